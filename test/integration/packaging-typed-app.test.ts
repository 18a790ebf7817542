import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../../local/paths.js';
import { packing, PACKAGES, repoVersionOf, run, userEnv } from '../support/packing.js';

/**
 * The packages as a team installs them (CONTRACT §16, README "Use it in your own project"), all five
 * packed: their manifests and files, and a strict TypeScript project that type-checks against the
 * installed `.d.ts` files.
 * No workspace, no link into the repository, no tsx of ours: one `npm install` of the tarballs per
 * project, from the warm npm cache; its time is printed. The other packaging files: packaging-cdk-app.test.ts
 * (a CDK app with the construct) and packaging-node-app.test.ts (the worker, the client and
 * the CLI: the README's commands).
 */
const packed = packing('packaging-typed-app', PACKAGES);

beforeAll(() => packed.pack(), 300_000);

afterAll(() => packed.dispose());

describe('the five packages', () => {
  it('are at one version, pin each other at it, promise Node.js >= 20.19, and ship only their built files and README', () => {
    const version = packed.packs['dispatch-ledger']?.version;
    expect(version).toMatch(/^\d+\.\d+\.\d+/);
    for (const name of PACKAGES) {
      const manifest = JSON.parse(readFileSync(join(projectRoot, 'node_modules', name, 'package.json'), 'utf8')) as { version: string; engines?: { node?: string }; dependencies?: Record<string, string>; private?: boolean };
      expect(manifest.version, name).toBe(version);
      expect(manifest.engines?.node, name).toBe('>=20.19');
      expect(manifest.private, name).toBeUndefined();
      for (const [dependency, range] of Object.entries(manifest.dependencies ?? {})) if ((PACKAGES as readonly string[]).includes(dependency)) expect(range, `${name} → ${dependency}`).toBe(version);
      const files = (packed.packs[name]?.files ?? []).map((file) => file.path);
      expect(files, name).toContain('README.md');
      expect(files, name).toContain('package.json');
      // The CLI's bin is a launcher outside dist/ (npm links a bin only when its file exists at install).
      const allowed = name === 'dispatch-ledger' ? ['README.md', 'package.json', 'bin/ledger.js'] : ['README.md', 'package.json'];
      expect(files.filter((file) => !allowed.includes(file) && !file.startsWith('dist/')), `${name} ships files outside dist/`).toEqual([]);
    }
  });
});

describe('3. a strict TypeScript project against the installed .d.ts files', () => {
  const app = join(packed.work, 'typed-app');
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
    await packed.timedInstall('typed app', app, [...names.map((name) => packed.tarball(name)), `@types/node@${repoVersionOf('@types/node')}`, `typescript@${repoVersionOf('typescript')}`]);
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
