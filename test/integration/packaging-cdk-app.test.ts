import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readdirSync, readFileSync, rmSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildFunctionBundles, LEDGER_FUNCTIONS } from '../../infra/bundling.js';
import { projectRoot } from '../../local/paths.js';
import { readmeBlocks } from '../support/readme-blocks.js';
import { installedAlone, packing, repoVersionOf, run, sizeOf, userEnv } from '../support/packing.js';

/**
 * The packages as a team installs them (CONTRACT §16, README "Use it in your own project"), as a CDK app
 * made by `cdk init app --language typescript` (CommonJS, Jest) with the README's construct block: `cdk
 * synth` with cdk-nag clean, cfn-lint with no error, its Jest test passing, and the functions it deploys
 * the package's prebuilt bundles, byte for byte a rebuild from the sources.
 * No workspace, no link into the repository, no tsx of ours: one `npm install` of the tarballs per
 * project, from the warm npm cache; its time is printed. The other packaging files: packaging-node-app.test.ts
 * (the worker, the client and the CLI: the README's commands) and packaging-typed-app.test.ts
 * (the five packages' manifests, and a strict TypeScript project against their types).
 */
const packed = packing('packaging-cdk-app', ['@dispatch-ledger/cdk', '@dispatch-ledger/protocol']);

beforeAll(() => packed.pack(), 300_000);

afterAll(() => packed.dispose());

describe('1. a CDK app made by cdk init (CommonJS, Jest) with @dispatch-ledger/cdk', () => {
  const app = join(packed.work, 'ledger-app');
  const JEST_TEST = `
import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { DispatchLedger } from '@dispatch-ledger/cdk';

test('the stack holds the ledger: its table and its prebuilt functions; plain http targets are refused', () => {
  const stack = new Stack(new App(), 'Test');
  const ledger = new DispatchLedger(stack, 'Ledger');
  const template = Template.fromStack(stack);
  template.resourceCountIs('AWS::DynamoDB::Table', 1);
  template.hasResourceProperties('AWS::Lambda::Function', { Handler: 'index.handler', Runtime: 'nodejs24.x' });
  expect(() => ledger.addTarget({ name: 'plain', baseUrl: 'http://agents.example.com' })).toThrow(/https/);
});
`;

  beforeAll(async () => {
    mkdirSync(app);
    // The stock template, as a team starts (it runs its own npm install), with the CLI this repository pins.
    await run(join(projectRoot, 'node_modules', '.bin', 'cdk'), ['init', 'app', '--language', 'typescript', '--no-notices'], { cwd: app, env: userEnv(), timeout: 300_000 });
    await packed.timedInstall('cdk app', app, [packed.tarball('@dispatch-ledger/cdk'), packed.tarball('@dispatch-ledger/protocol'), `cdk-nag@${repoVersionOf('cdk-nag')}`]);
    writeFileSync(join(app, 'bin', 'ledger-app.ts'), readmeBlocks('cdk-app.ts')['cdk-app.ts'] ?? '');
    for (const file of readdirSync(join(app, 'lib'))) rmSync(join(app, 'lib', file));
    for (const file of readdirSync(join(app, 'test'))) rmSync(join(app, 'test', file));
    writeFileSync(join(app, 'test', 'ledger-app.test.ts'), JEST_TEST);
  }, 600_000);

  it('is CommonJS with Jest, and installs the construct from its tarball alone', async () => {
    const manifest = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as { type?: string; devDependencies: Record<string, string> };
    expect(manifest.type).toBeUndefined();
    expect(Object.keys(manifest.devDependencies)).toContain('jest');
    await installedAlone(app, ['@dispatch-ledger/cdk', 'aws-cdk-lib']);
    console.log(`packaging: the cdk app installs ${(sizeOf(join(app, 'node_modules')) / 1e6).toFixed(0)} MB (aws-cdk-lib ${JSON.parse(readFileSync(join(app, 'node_modules', 'aws-cdk-lib', 'package.json'), 'utf8')).version})`);
  });

  it('synthesizes the README block with cdk-nag clean; cfn-lint finds no error; its functions are the prebuilt bundles, byte for byte a rebuild', async () => {
    // The template's app command type-checks (strict) and runs bin/ledger-app.ts; any cdk-nag finding fails it.
    await run('npx', ['cdk', 'synth', '--quiet', '--no-notices'], { cwd: app, env: userEnv(), timeout: 300_000 });
    const template = join(app, 'cdk.out', 'Ledger.template.json');
    const lint = await run('cfn-lint', ['--format', 'parseable', '--ignore-checks', 'W3005', '--', template]).then(
      () => ({ status: 0, output: '' }),
      (error: { code?: number; stdout?: string }) => ({ status: error.code ?? -1, output: error.stdout ?? '' }),
    );
    expect(lint).toEqual({ status: 0, output: '' });
    const report = JSON.parse(readFileSync(join(app, 'cdk.out', 'validation-report.json'), 'utf8')) as { pluginReports: Array<{ violations: unknown[] }> };
    expect(report.pluginReports.flatMap((plugin) => plugin.violations)).toEqual([]);

    // No esbuild and no Docker at synth: each function's asset is the file the package ships, and that
    // file is what a rebuild from the sources makes.
    const rebuilt = join(packed.work, 'rebuilt');
    await buildFunctionBundles(rebuilt);
    const assets = readdirSync(join(app, 'cdk.out')).filter((name) => name.startsWith('asset.')).map((name) => readFileSync(join(app, 'cdk.out', name, 'index.mjs')));
    for (const name of LEDGER_FUNCTIONS) {
      const shipped = readFileSync(join(app, 'node_modules', '@dispatch-ledger', 'cdk', 'dist', 'functions', name, 'index.mjs'));
      expect(shipped.equals(readFileSync(join(rebuilt, name, 'index.mjs'))), `${name}: the shipped bundle differs from a rebuild`).toBe(true);
      expect(assets.some((asset) => asset.equals(shipped)), `${name}: no asset is its shipped bundle`).toBe(true);
    }
  }, 300_000);

  // Its types are checked by the template's app command above (`npx tsc`, strict, CommonJS); Jest (swc) only runs it.
  it('passes its Jest test (CommonJS: the package\'s require entry)', async () => {
    const { stdout, stderr } = await run('npx', ['jest', '--ci'], { cwd: app, env: userEnv(), timeout: 180_000 });
    expect(`${stdout}${stderr}`).toMatch(/Tests:\s+1 passed, 1 total/);
  }, 180_000);
});
