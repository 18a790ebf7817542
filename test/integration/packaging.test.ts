import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createLedgerClient } from '@dispatch-ledger/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localTarget } from '../../cli/local-targets.js';
import { projectRoot } from '../../local/paths.js';
import { ORIGIN_SCRIPT, roundTripped, stateDirOf } from '../support/client-script.js';
import { eventually } from '../support/eventually.js';
import { uniqueName } from '../support/engines.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * The packages as a team installs them (CONTRACT §16): `npm pack` of protocol, client and worker, and a
 * fresh project with only those tarballs and registry packages — no workspace, no link into the
 * repository, no tsx. Its worker runs on plain node and is registered on this file's local platform
 * (`ledger local target add`); its origin dispatches to it with the client, sees it handled and
 * delivers the result; and a strict TypeScript file type-checks against the installed `.d.ts` files.
 * (The CLI and the construct are packaged by later steps of the packages issue.)
 */
const run = promisify(execFile);
const PACKAGES = ['@dispatch-ledger/protocol', '@dispatch-ledger/client', '@dispatch-ledger/worker'];
const work = mkdtempSync(join(tmpdir(), 'ledger-packaging-'));
const app = join(work, 'app');
let t: TestPlatform;
let worker: ChildProcess | undefined;
let installSeconds = 0;

const WORKER = `
import { createWorker, memoryStore } from '@dispatch-ledger/worker';
const worker = createWorker({
  name: 'packed',
  store: memoryStore(),
  async run(task, ctx) {
    await ctx.putEvidence('out/report.md', '# Report\\n\\n' + String(task.goal) + '\\n');
    return { summary: 'report written: ' + String(task.goal) };
  },
});
const { url } = await worker.listen(0);
console.log(JSON.stringify({ url }));
`;


const TYPED = `
import { FINAL_RUN_STATUSES, isFinalRunStatus, type RunStatus } from '@dispatch-ledger/protocol';
import { createLedgerClient, isLedgerApiError, type DispatchView, type LedgerClient } from '@dispatch-ledger/client';
import { createWorker, memoryStore, type RunFunction } from '@dispatch-ledger/worker';
import { createLambdaWorker, type LambdaHandler } from '@dispatch-ledger/worker/lambda';

const run: RunFunction = async (task, ctx) => {
  await ctx.putEvidence('out/a.md', String(task.goal));
  return { summary: ctx.runId };
};
export const http = createWorker({ name: 'typed', run, store: memoryStore() });
export const lambda: LambdaHandler = createLambdaWorker({ name: 'typed', run });
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
`;

beforeAll(async () => {
  const packed = join(work, 'packed');
  mkdirSync(packed);
  mkdirSync(app);
  // What \`npm pack\` ships is the built JavaScript: the root build runs before the tests (pretest).
  await run('npm', ['pack', '--silent', '--pack-destination', packed, ...PACKAGES.flatMap((name) => ['-w', name])], { cwd: projectRoot, timeout: 120_000 });
  const tarballs = readdirSync(packed).map((file) => join(packed, file));
  expect(tarballs).toHaveLength(3);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'packed-app', private: true, type: 'module' }));
  // @types/node and typescript from the registry, at the versions this repository tests with (a warm cache).
  const versionOf = (name: string): string => (createRequire(join(projectRoot, 'package.json'))(`${name}/package.json`) as { version: string }).version;
  const started = Date.now();
  await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', ...tarballs, `@types/node@${versionOf('@types/node')}`, `typescript@${versionOf('typescript')}`], { cwd: app, timeout: 300_000 });
  installSeconds = (Date.now() - started) / 1000;
  writeFileSync(join(app, 'worker.mjs'), WORKER);
  writeFileSync(join(app, 'origin.mjs'), ORIGIN_SCRIPT);
  t = await startTestPlatform();
}, 420_000);

afterAll(async () => {
  if (worker?.pid !== undefined && worker.exitCode === null && worker.signalCode === null) {
    const exited = new Promise((done) => worker?.once('exit', done));
    process.kill(worker.pid, 'SIGTERM');
    await exited;
  }
  await t?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('the packed packages in a fresh project', () => {
  it('installs from the tarballs alone: no link into the repository, no tsx', async () => {
    const { stdout } = await run('npm', ['ls', '--all', '--parseable'], { cwd: app });
    const paths = stdout.split('\n').filter((line) => line !== '');
    expect(paths.filter((line) => line.startsWith(projectRoot))).toEqual([]);
    expect(paths.some((line) => /node_modules\/tsx$/.test(line))).toBe(false);
    for (const name of PACKAGES) expect(paths).toContain(join(app, 'node_modules', name));
    console.log(`packaging: npm install of the three tarballs, @types/node and typescript took ${installSeconds.toFixed(1)} s`);
  });

  it('runs a worker and an origin on plain node: registered with ledger local target add, dispatched to, handled, delivered', async () => {
    const started = spawn(process.execPath, ['worker.mjs'], { cwd: app, stdio: ['ignore', 'pipe', 'pipe'] });
    worker = started;
    let stdout = '';
    let stderr = '';
    started.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    started.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const { url } = await eventually('the worker to print its URL', () => {
      if (started.exitCode !== null) throw new Error(`the worker exited ${started.exitCode}: ${stderr}`);
      const line = stdout.split('\n').find((candidate) => candidate.startsWith('{'));
      return line ? (JSON.parse(line) as { url: string }) : undefined;
    }, { timeoutMs: 30_000 });

    const stateDir = stateDirOf(t);
    const said: string[] = [];
    await localTarget(['add', 'packed', '--url', url], (line) => void said.push(line), {
      stateDir,
      running: () => ({ status: 'ready', pid: process.pid, startedAt: new Date().toISOString(), pids: {}, info: t.platform.info, ledgerTable: t.platform.resources.ledgerTable, logDir: stateDir, invocationLog: join(stateDir, 'invocations.log') }),
      connectTo: async () => createLedgerClient({ local: t.platform.info }),
      now: () => new Date(),
    });
    expect(said[0]).toBe(`added local target packed → ${url}`);

    const dispatchId = uniqueName('d-packed');
    const origin = await run(process.execPath, ['origin.mjs'], { cwd: app, env: { PATH: process.env['PATH'] ?? '', LEDGER_STATE_DIR: stateDir, DISPATCH_ID: dispatchId, TARGET: 'packed', TASK: JSON.stringify({ goal: 'from a fresh project' }) }, timeout: 120_000 });
    expect(JSON.parse(origin.stdout)).toEqual(roundTripped(dispatchId));
    expect((await t.view(dispatchId)).execution.result?.summary).toBe('report written: from a fresh project');
  }, 180_000);

  it('type-checks a strict TypeScript file against the installed .d.ts files', async () => {
    writeFileSync(join(app, 'typed.ts'), TYPED);
    writeFileSync(join(app, 'bad.ts'), "import { createWorker } from '@dispatch-ledger/worker';\nexport const w = createWorker({ name: 'bad' });\n");
    const tsc = join(app, 'node_modules', 'typescript', 'bin', 'tsc');
    const options = ['--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--types', 'node'];
    const good = await run(process.execPath, [tsc, ...options, 'typed.ts'], { cwd: app, timeout: 120_000 }).then(
      () => ({ code: 0, output: '' }),
      (error: { code?: number; stdout?: string }) => ({ code: error.code ?? 1, output: error.stdout ?? '' }),
    );
    expect(good).toEqual({ code: 0, output: '' });
    // The types say something: a worker without its run function does not type-check.
    const bad = await run(process.execPath, [tsc, ...options, 'bad.ts'], { cwd: app, timeout: 120_000 }).then(
      () => ({ code: 0, output: '' }),
      (error: { code?: number; stdout?: string }) => ({ code: error.code ?? 1, output: error.stdout ?? '' }),
    );
    expect(bad.code).not.toBe(0);
    expect(bad.output).toMatch(/bad\.ts.*Property 'run' is missing/s);
  }, 180_000);
});
