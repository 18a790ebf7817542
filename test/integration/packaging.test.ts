import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildFunctionBundles, LEDGER_FUNCTIONS } from '../../infra/bundling.js';
import { freePort, isAlive } from '../../local/engines/process.js';
import { projectRoot } from '../../local/paths.js';
import { eventually } from '../support/eventually.js';
import { readmeBlocks } from '../support/readme-blocks.js';

/**
 * The packages as a team installs them (CONTRACT §16, README "Use it in your own project"): `npm pack`
 * of all five, and fresh projects with only those tarballs and registry packages — no workspace, no
 * link into the repository, no tsx of ours:
 * 1. a CDK app made by `cdk init app --language typescript` (CommonJS, Jest) with the README's construct
 *    block: `cdk synth` with cdk-nag clean, cfn-lint with no error, its Jest test passing, and the
 *    functions it deploys the package's prebuilt bundles, byte for byte a rebuild from the sources;
 * 2. a plain node ESM project with the worker, the client and the CLI: the README's commands run as
 *    written — `npx ledger local up`, its worker registered with `npx ledger local target add`, its
 *    origin's round trip — and `npx ledger local down`, after an `npm ci`, leaves none of the pids;
 * 3. a strict TypeScript project type-checks against the installed `.d.ts` files.
 * One `npm install` of the tarballs per project, from the warm npm cache (the cdk app's template runs
 * its own first); their times are printed. The tarballs are packed from what the `pretest` build made
 * (`--ignore-scripts`: a package's prepack rebuilds its dist/ in place, under the feet of the files that
 * run the built CLI beside this one); the build's determinism is what makes that the same.
 */
const run = promisify(execFile);
const work = mkdtempSync(join(tmpdir(), 'ledger-packaging-'));
const packed = join(work, 'packed');
const tarballs: Record<string, string> = {};
const PACKAGES = ['@dispatch-ledger/protocol', '@dispatch-ledger/client', '@dispatch-ledger/worker', '@dispatch-ledger/cdk', 'dispatch-ledger'];
/** The version of a package installed in the repository, as its lock file pins it (a package may export no `./package.json`). */
const repoVersionOf = (name: string): string => {
  const lock = JSON.parse(readFileSync(join(projectRoot, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string }> };
  const version = lock.packages[`node_modules/${name}`]?.version;
  if (!version) throw new Error(`${name} is not in package-lock.json`);
  return version;
};
/**
 * Nothing that phones home from a test: no CDK telemetry (and `--no-notices` on each cdk command), no
 * npm update check, and npx never fetching a package it does not find installed (a `ledger` it could not
 * find would be someone else's package from the registry).
 */
const QUIET = { CDK_DISABLE_CLI_TELEMETRY: 'true', NO_UPDATE_NOTIFIER: '1', npm_config_update_notifier: 'false', npm_config_yes: 'false' };
/** The environment of a user's shell: this run's PATH and HOME, none of the test's own variables (no LEDGER_STATE_DIR). */
const userEnv = (): NodeJS.ProcessEnv => ({ PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', ...QUIET, ...(process.env['DISPATCH_LEDGER_CACHE'] ? { DISPATCH_LEDGER_CACHE: process.env['DISPATCH_LEDGER_CACHE'] } : {}) });
const installs: Record<string, number> = {};
/** What `npm pack --json` says of a package it packed. */
interface PackEntry {
  readonly name: string;
  readonly version: string;
  readonly filename: string;
  readonly files: ReadonlyArray<{ readonly path: string }>;
}
const packs: Record<string, PackEntry> = {};

/** `npm install` in a project, timed; an engine warning fails it (every package promises Node.js ≥ 20.19, this run's node). */
async function timedInstall(project: string, cwd: string, args: string[]): Promise<void> {
  const started = Date.now();
  const { stdout, stderr } = await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', ...args], { cwd, env: userEnv(), timeout: 300_000 });
  installs[project] = (Date.now() - started) / 1000;
  expect(`${stdout}${stderr}`).not.toContain('EBADENGINE');
}

/** `npm ls` of a project: no path into the repository, and the given packages installed in it. */
async function installedAlone(cwd: string, names: string[]): Promise<void> {
  const { stdout } = await run('npm', ['ls', '--all', '--parseable'], { cwd, env: userEnv(), maxBuffer: 64 * 1024 * 1024 });
  const paths = stdout.split('\n').filter((line) => line !== '');
  expect(paths.filter((line) => line.startsWith(projectRoot))).toEqual([]);
  for (const name of names) expect(paths).toContain(join(cwd, 'node_modules', name));
}

const sizeOf = (dir: string): number => {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) total += sizeOf(full);
    else if (entry.isFile()) total += statSync(full).size;
  }
  return total;
};

beforeAll(async () => {
  mkdirSync(packed);
  // What `npm pack` ships is built by the packages' prepack (and the root build before the tests).
  const { stdout } = await run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', packed, ...PACKAGES.flatMap((name) => ['-w', name])], { cwd: projectRoot, timeout: 300_000, maxBuffer: 64 * 1024 * 1024 });
  for (const entry of JSON.parse(stdout) as PackEntry[]) {
    packs[entry.name] = entry;
    tarballs[entry.name] = join(packed, entry.filename);
  }
  expect(Object.keys(tarballs).sort()).toEqual([...PACKAGES].sort());
  console.log(`packaging: packed sizes ${PACKAGES.map((name) => `${name} ${statSync(tarballs[name] ?? '').size} B`).join(', ')}`);
}, 300_000);

afterAll(() => {
  console.log(`packaging: npm install times ${Object.entries(installs).map(([project, seconds]) => `${project} ${seconds.toFixed(1)} s`).join(', ')}`);
  rmSync(work, { recursive: true, force: true });
});

describe('the five packages', () => {
  it('are at one version, pin each other at it, promise Node.js >= 20.19, and ship only their built files and README', () => {
    const version = packs['dispatch-ledger']?.version;
    expect(version).toMatch(/^\d+\.\d+\.\d+/);
    for (const name of PACKAGES) {
      const manifest = JSON.parse(readFileSync(join(projectRoot, 'node_modules', name, 'package.json'), 'utf8')) as { version: string; engines?: { node?: string }; dependencies?: Record<string, string>; private?: boolean };
      expect(manifest.version, name).toBe(version);
      expect(manifest.engines?.node, name).toBe('>=20.19');
      expect(manifest.private, name).toBeUndefined();
      for (const [dependency, range] of Object.entries(manifest.dependencies ?? {})) if (PACKAGES.includes(dependency)) expect(range, `${name} → ${dependency}`).toBe(version);
      const files = (packs[name]?.files ?? []).map((file) => file.path);
      expect(files, name).toContain('README.md');
      expect(files, name).toContain('package.json');
      // The CLI's bin is a launcher outside dist/ (npm links a bin only when its file exists at install).
      const allowed = name === 'dispatch-ledger' ? ['README.md', 'package.json', 'bin/ledger.js'] : ['README.md', 'package.json'];
      expect(files.filter((file) => !allowed.includes(file) && !file.startsWith('dist/')), `${name} ships files outside dist/`).toEqual([]);
    }
  });
});

describe('1. a CDK app made by cdk init (CommonJS, Jest) with @dispatch-ledger/cdk', () => {
  const app = join(work, 'ledger-app');
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
    await timedInstall('cdk app', app, [tarballs['@dispatch-ledger/cdk'] ?? '', tarballs['@dispatch-ledger/protocol'] ?? '', `cdk-nag@${repoVersionOf('cdk-nag')}`]);
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
    const rebuilt = join(work, 'rebuilt');
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

describe('2. a plain node project with the worker, the client and the CLI: the README commands as written', () => {
  const app = join(work, 'node-app');
  let blocks: Record<string, string> = {};
  const background: ChildProcess[] = [];

  beforeAll(async () => {
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'node-app', private: true, type: 'module' }));
    const names = ['@dispatch-ledger/protocol', '@dispatch-ledger/client', '@dispatch-ledger/worker', 'dispatch-ledger'] as const;
    await timedInstall('node app', app, names.map((name) => tarballs[name] ?? ''));
    blocks = readmeBlocks('worker.mjs', 'origin.mjs', 'commands.sh');
    writeFileSync(join(app, 'worker.mjs'), blocks['worker.mjs'] ?? '');
    writeFileSync(join(app, 'origin.mjs'), blocks['origin.mjs'] ?? '');
  }, 300_000);

  afterAll(async () => {
    for (const child of background) if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) process.kill(-child.pid, 'SIGTERM');
    // Whatever happened above, the platform started here is stopped (by the installed bin, if it is still there).
    const bin = join(app, 'node_modules', '.bin', 'ledger');
    if (existsSync(join(app, '.ledger', 'local', 'state.json')) && existsSync(bin)) await run(bin, ['local', 'down'], { cwd: app, env: userEnv() }).catch(() => undefined);
  });

  it('installs from the tarballs alone, with no tsx and no esbuild', async () => {
    await installedAlone(app, ['@dispatch-ledger/worker', '@dispatch-ledger/client', 'dispatch-ledger']);
    const { stdout } = await run('npm', ['ls', '--all', '--parseable'], { cwd: app, env: userEnv(), maxBuffer: 64 * 1024 * 1024 });
    expect(stdout.split('\n').some((line) => /node_modules\/(tsx|esbuild)$/.test(line))).toBe(false);
    console.log(`packaging: the node app installs ${(sizeOf(join(app, 'node_modules')) / 1e6).toFixed(0)} MB`);
  });

  it('runs the README quick start on a folder with no .ledger yet: up, a dispatch sent with the AWS CLI, check, down', async () => {
    const block = readmeBlocks('quick-start.sh')['quick-start.sh'] ?? '';
    expect(existsSync(join(app, '.ledger'))).toBe(false);
    // As a person types it, except that the check is asked again until the ledger has taken the message
    // from its queue (a person runs it a moment later): the block's own line, retried.
    const check = 'npx ledger check d-1';
    const checkLine = block.split('\n').find((line) => line.startsWith(check));
    expect(checkLine).toBeDefined();
    const script = block.replace(checkLine ?? '', `for try in $(seq 60); do ${check} > check.out && break; sleep 0.5; done; cat check.out`);
    const { stdout } = await run('sh', ['-ec', script], { cwd: app, env: userEnv(), timeout: 240_000 });
    const info = JSON.parse(readFileSync(join(app, '.ledger', 'local.json'), 'utf8')) as { dispatchQueueUrl: string };
    expect(info.dispatchQueueUrl).toMatch(/^http:\/\/sqs\.us-east-1\.localhost:\d+\//);
    expect(stdout).toContain('d-1');
    expect(stdout).toMatch(/stopped \d+ processes/);
    expect(existsSync(join(app, '.ledger', 'local', 'state.json'))).toBe(false);
  }, 300_000);

  it('runs the README commands: up, the worker registered, the origin\'s round trip; down after an npm ci leaves none of the pids up started', async () => {
    const commands = (blocks['commands.sh'] ?? '').split('\n').filter((line) => line.trim() !== '');
    expect(commands[0]).toBe('npx ledger local up --detach');
    // One the kernel just handed out and freed (a random pick could be a port in use: a failed bind).
    const port = await freePort();
    const said: Record<string, string> = {};
    let pids: number[] = [];
    for (const [index, written] of commands.entries()) {
      // The worker's port: a free one of this run rather than the README's 8787.
      const line = written.replaceAll('8787', String(port));
      if (line.endsWith('&')) {
        const child = spawn('sh', ['-c', line.slice(0, -1).trim()], { cwd: app, env: userEnv(), detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
        background.push(child);
        let out = '';
        child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
        await eventually('the worker to print its URL', () => (out.includes(`"url":"http://127.0.0.1:${port}"`) ? true : undefined), { timeoutMs: 30_000 });
        continue;
      }
      if (line === 'npx ledger local down') {
        const state = JSON.parse(readFileSync(join(app, '.ledger', 'local', 'state.json'), 'utf8')) as { pids: Record<string, number> };
        pids = Object.values(state.pids);
        expect(pids.length).toBeGreaterThanOrEqual(4);
        // An npm ci in between: the state is in the project, not in node_modules.
        await run('npm', ['ci', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: app, env: userEnv(), timeout: 300_000 });
      }
      const { stdout } = await run('sh', ['-c', line], { cwd: app, env: userEnv(), timeout: 240_000 });
      said[`${index}`] = stdout;
    }
    // The platform kept its state in the project, git-ignored, never in node_modules.
    expect(readFileSync(join(app, '.ledger', 'local', '.gitignore'), 'utf8').split('\n')).toContain('*');
    expect(said['2']).toContain(`added local target report-writer → http://127.0.0.1:${port}`);
    const printed = JSON.parse((said['3'] ?? '').trim().split('\n').at(-1) ?? '') as Record<string, unknown>;
    expect(printed).toMatchObject({ evidence: 'handled', summary: 'report written: write the report', acked: 1 });
    expect(said['4']).toMatch(/^stopped \d+ processes/);
    expect(pids.filter((pid) => isAlive(pid))).toEqual([]);
  }, 600_000);
});

describe('3. a strict TypeScript project against the installed .d.ts files', () => {
  const app = join(work, 'typed-app');
  const TYPED = `
import { FINAL_RUN_STATUSES, isFinalRunStatus, type RunStatus } from '@dispatch-ledger/protocol';
import { createLedgerClient, isLedgerApiError, type DispatchView, type LedgerClient } from '@dispatch-ledger/client';
import { createWorker, memoryStore, type RunFunction } from '@dispatch-ledger/worker';
import { createLambdaWorker, type LambdaHandler } from '@dispatch-ledger/worker/lambda';
import { stepFunctionsTask } from '@dispatch-ledger/worker/stepfunctions';
import { run as runLedger } from 'dispatch-ledger';

const run: RunFunction = async (task, ctx) => {
  await ctx.putEvidence('out/a.md', String(task.goal));
  return { summary: ctx.runId };
};
export const http = createWorker({ name: 'typed', run, store: memoryStore() });
export const lambda: LambdaHandler = createLambdaWorker({ name: 'typed', run });
// Inside a state machine's Lambda task (CONTRACT §17): the task's value is the state's output.
export const flowTask = stepFunctionsTask(async (task, ctx) => {
  await ctx.putEvidence('out/b.md', String(task.goal));
  return { runId: ctx.runId };
});
const ledger: LedgerClient = createLedgerClient({ origin: 'planner', local: true });
// Answers parse leniently (a newer ledger's status is a string this version does not know).
export async function status(id: string): Promise<{ status: string | null; final: boolean } | null> {
  try {
    const view: DispatchView = await ledger.check(id);
    const known = view.execution.status as RunStatus | null;
    return { status: view.execution.status, final: known !== null && isFinalRunStatus(known) };
  } catch (error) {
    if (isLedgerApiError(error) && error.status === 404) return null;
    throw error;
  }
}
export const finals: readonly string[] = FINAL_RUN_STATUSES;
// The CLI as a module: a command run in-process, its exit code.
export const help: Promise<number> = runLedger(['--help']);
`;
  // Inside a Lambda durable function (CONTRACT §17): the kit's handler, wrapped by the durable SDK.
  const DURABLE = `
import { withDurableExecution, type DurableContext } from '@aws/durable-execution-sdk-js';
import { sigv4Signer } from '@dispatch-ledger/worker';
import { ApprovalCancelledError, durableRun } from '@dispatch-ledger/worker/durable';

export const review = withDurableExecution(
  durableRun(
    async (task, ctx) => {
      await ctx.heartbeat();
      const grant = await ctx.requestApproval();
      await ctx.durable.step('publish', () => ctx.putEvidence('out/review.md', String(task.goal)));
      return { summary: grant.approvalId };
    },
    { signer: sigv4Signer({ region: 'us-east-1' }) },
  ),
);
// The SDK's whole context, for its waits and child contexts.
export const waiting = withDurableExecution(durableRun<DurableContext>(async (_task, ctx) => ctx.durable.wait({ seconds: 5 })));
export const cancelled = (error: unknown): boolean => error instanceof ApprovalCancelledError;
`;
  const options = ['--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--types', 'node'];
  const tsc = async (file: string): Promise<{ code: number; output: string }> =>
    run(process.execPath, [join(app, 'node_modules', 'typescript', 'bin', 'tsc'), ...options, file], { cwd: app, timeout: 120_000 }).then(
      () => ({ code: 0, output: '' }),
      (error: { code?: number; stdout?: string }) => ({ code: error.code ?? 1, output: error.stdout ?? '' }),
    );

  beforeAll(async () => {
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'typed-app', private: true, type: 'module' }));
    // @types/node and typescript at the versions this repository tests with.
    const names = ['@dispatch-ledger/protocol', '@dispatch-ledger/client', '@dispatch-ledger/worker', 'dispatch-ledger'] as const;
    await timedInstall('typed app', app, [...names.map((name) => tarballs[name] ?? ''), `@types/node@${repoVersionOf('@types/node')}`, `typescript@${repoVersionOf('typescript')}`]);
  }, 300_000);

  it('type-checks a strict file using the protocol, the client, the three worker entries and the CLI as a module; a wrong one fails', async () => {
    writeFileSync(join(app, 'typed.ts'), TYPED);
    expect(await tsc('typed.ts')).toEqual({ code: 0, output: '' });
    // The types say something: a worker without its run function does not type-check.
    writeFileSync(join(app, 'bad.ts'), "import { createWorker } from '@dispatch-ledger/worker';\nexport const w = createWorker({ name: 'bad' });\n");
    const bad = await tsc('bad.ts');
    expect(bad.code).not.toBe(0);
    expect(bad.output).toMatch(/bad\.ts.*Property 'run' is missing/s);
  }, 180_000);

  it("type-checks the README's worker.mjs and origin.mjs as a TypeScript editor checks JavaScript (checkJs, strict)", async () => {
    // The bug it pins: the origin's `view?.execution.result?.summary` did not type-check under strict
    // (the view's execution declared no result), though node ran it; only running the blocks missed it.
    const readme = readmeBlocks('worker.mjs', 'origin.mjs');
    for (const name of ['worker.mjs', 'origin.mjs'] as const) writeFileSync(join(app, `readme-${name}`), readme[name] ?? '');
    expect([readme['worker.mjs']?.length ?? 0, readme['origin.mjs']?.length ?? 0].every((length) => length > 100)).toBe(true);
    const checked = await run(process.execPath, [join(app, 'node_modules', 'typescript', 'bin', 'tsc'), ...options, '--allowJs', '--checkJs', 'readme-worker.mjs', 'readme-origin.mjs'], { cwd: app, timeout: 120_000 }).then(
      () => ({ code: 0, output: '' }),
      (error: { code?: number; stdout?: string }) => ({ code: error.code ?? 1, output: error.stdout ?? '' }),
    );
    expect(checked).toEqual({ code: 0, output: '' });
  }, 180_000);

  // Run after the file above type-checked without it: the root and the other subpaths need no durable SDK.
  it('type-checks the /durable subpath against the durable SDK, an optional peer installed on its own (its Node.js >= 22 engine the only warning)', async () => {
    expect(existsSync(join(app, 'node_modules', '@aws', 'durable-execution-sdk-js'))).toBe(false);
    // The SDK's .d.ts files name Lambda's `Context` from @types/aws-lambda, which it does not depend on.
    const { stdout, stderr } = await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', `@aws/durable-execution-sdk-js@${repoVersionOf('@aws/durable-execution-sdk-js')}`, `@types/aws-lambda@${repoVersionOf('@types/aws-lambda')}`], { cwd: app, env: userEnv(), timeout: 300_000 });
    const warned = new Set([...`${stdout}${stderr}`.matchAll(/EBADENGINE\s+package: '(.+?)@[^@']+'/g)].map((match) => match[1]));
    expect([...warned]).toEqual(['@aws/durable-execution-sdk-js']);
    writeFileSync(join(app, 'durable.ts'), DURABLE);
    expect(await tsc('durable.ts')).toEqual({ code: 0, output: '' });
  }, 300_000);
});
