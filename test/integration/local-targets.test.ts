import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { createLedgerClient } from '@dispatch-ledger/client';
import { createWorker, memoryStore, type ListeningWorker } from '@dispatch-ledger/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localTarget, type LocalTargetDeps } from '../../cli/local-targets.js';
import type { LocalState } from '../../local/state.js';
import { MAX_LOCAL_SECRET_BYTES, readLocalTargets, targetsFile, writeLocalTargets } from '../../local/targets.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { uniqueName } from '../support/engines.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * `ledger local target add|list|remove` (CONTRACT §16): a user's own worker registered on the local
 * platform. The commands run in-process against this file's platform, which is "running" in their state
 * directory; the registrations live in `<stateDir>/targets.json`, which the platform reads when it starts.
 */

const SECRET = 'Bearer local-target-secret-9f1c';
const stateDir = mkdtempSync(join(tmpdir(), 'ledger-local-targets-'));
const secretFile = join(stateDir, 'secret.txt');
let t: TestPlatform;
let table: LedgerTable;
let worker: ListeningWorker;
let running = false;
/** Each run the worker was asked for; a run whose goal is "hold" stays open until the test lets it go. */
const calls: string[] = [];
let release: () => void = () => undefined;
const held = new Promise<void>((resolve) => {
  release = resolve;
});

const deps = (): LocalTargetDeps => ({
  stateDir,
  running: () =>
    running
      ? ({ status: 'ready', pid: process.pid, startedAt: new Date().toISOString(), pids: {}, info: t.platform.info, ledgerTable: t.platform.resources.ledgerTable, logDir: stateDir, invocationLog: join(stateDir, 'invocations.jsonl') } satisfies LocalState)
      : undefined,
  connectTo: async () => createLedgerClient({ local: t.platform.info }),
  now: () => new Date('2026-12-05T12:00:00Z'),
});

/** Runs a command; its printed lines, or the error it threw. */
async function ledger(...args: string[]): Promise<{ lines: string[]; error?: string }> {
  const lines: string[] = [];
  try {
    await localTarget(args, (line) => void lines.push(line), deps());
    return { lines };
  } catch (error) {
    return { lines, error: error instanceof Error ? error.message : String(error) };
  }
}

beforeAll(async () => {
  writeFileSync(secretFile, `${SECRET}\n`);
  worker = await createWorker({
    name: 'mine',
    secret: SECRET,
    store: memoryStore(),
    run: async (task, ctx) => {
      calls.push(ctx.runId);
      if ((task as { goal?: string }).goal === 'hold') await held;
      return { summary: `done: ${String((task as { goal?: string }).goal)}` };
    },
  }).listen();
  // Added while the platform is down: kept in the state directory, registered when it starts.
  const added = await ledger('add', 'mine', '--url', `${worker.url}/`, '--secret-file', secretFile, '--max-concurrent-runs', '2');
  expect(added.error).toBeUndefined();
  expect(added.lines.join('\n')).toMatch(/registered at the next npx ledger local up/);
  t = await startTestPlatform({}, { stateDir });
  running = true;
  table = new LedgerTable(DynamoDBDocumentClient.from(t.clients.dynamodb), { tableName: t.platform.resources.ledgerTable, retentionSeconds: 86_400 });
});
afterAll(async () => {
  release();
  await worker?.close();
  await t?.stop();
  // It holds the secret.
  rmSync(stateDir, { recursive: true, force: true });
});

const send = async (target: string, goal: string, timeouts?: Record<string, number>): Promise<string> => {
  const dispatchId = uniqueName('d-lt');
  await t.send(JSON.stringify({ dispatchId, origin: 'planner', target, task: { goal }, delivery: { mode: 'detached' }, ...(timeouts ? { timeouts } : {}) }));
  return dispatchId;
};

describe('ledger local target', () => {
  it('registers a target kept in the state directory when the platform starts, with its secret, and the ledger runs dispatches on it', async () => {
    expect(await table.getTarget('mine')).toEqual({ name: 'mine', kind: 'http', baseUrl: worker.url, secretRef: 'dispatch-ledger/local/targets/mine', maxConcurrentRuns: 2 });
    const dispatchId = await send('mine', 'first');
    const done = await t.viewWhen(dispatchId, (view) => view.execution.status === 'completed');
    expect(done.execution.result?.summary).toBe('done: first');
    expect(calls).toContain(`${dispatchId}:1`);
    // The list says a secret is there, never what it is; the file holding it is the user's alone.
    const listed = await ledger('list', '--json');
    expect(JSON.parse(listed.lines[0] ?? '')).toEqual({ targets: [{ name: 'mine', url: worker.url, maxConcurrentRuns: 2, secret: true, addedAt: '2026-12-05T12:00:00.000Z' }] });
    expect(listed.lines.join('\n')).not.toContain(SECRET);
    expect((await ledger('list')).lines.join('\n')).not.toContain(SECRET);
    expect(readFileSync(targetsFile(stateDir), 'utf8')).toContain(SECRET);
    expect(statSync(targetsFile(stateDir)).mode & 0o777).toBe(0o600);
  });

  it('refuses bad input with a clear error and changes nothing: neither the file nor the table', async () => {
    const long = join(stateDir, 'long.txt');
    writeFileSync(long, 'x'.repeat(MAX_LOCAL_SECRET_BYTES + 10));
    // One byte over, with its newline: within the file's size slack, still over the secret's bound.
    const justOver = join(stateDir, 'just-over.txt');
    writeFileSync(justOver, `${'x'.repeat(MAX_LOCAL_SECRET_BYTES + 1)}\n`);
    const empty = join(stateDir, 'empty.txt');
    writeFileSync(empty, '\n');
    const cases: Array<{ args: string[]; says: RegExp }> = [
      { args: ['add', 'demo-agent', '--url', 'http://127.0.0.1:9999'], says: /"demo-agent" is the local platform's own target \(reserved/ },
      { args: ['add', 'desk', '--url', 'http://127.0.0.1:9999'], says: /reserved/ },
      { args: ['add', 'Bad_Name', '--url', 'http://127.0.0.1:9999'], says: /is not a target name/ },
      { args: ['add', 'other', '--url', 'http://example.com:8080'], says: /example\.com is not the loopback/ },
      { args: ['add', 'other', '--url', 'http://169.254.169.254:80'], says: /is not the loopback/ },
      { args: ['add', 'other', '--url', 'ftp://127.0.0.1:21'], says: /ftp: is not http or https/ },
      { args: ['add', 'other', '--url', 'http://127.0.0.1'], says: /names no port/ },
      { args: ['add', 'other', '--url', 'http://user:pw@127.0.0.1:9999'], says: /carries credentials: use --secret-file/ },
      // Regression (a review): port 0 was taken, and every dispatch to it retried until its budget was spent.
      { args: ['add', 'other', '--url', 'http://127.0.0.1:0'], says: /port 0 is no port a worker listens on/ },
      { args: ['add', 'other', '--url', 'http://127.0.0.1:9999/?x=1'], says: /query or a fragment/ },
      { args: ['add', 'other', '--url', 'not a url'], says: /is not a URL/ },
      { args: ['add', 'other'], says: /--url is required/ },
      { args: ['add', '--url', 'http://127.0.0.1:9999'], says: /needs the target's NAME/ },
      { args: ['add', 'other', '--url', 'http://127.0.0.1:9999', '--secret', 'Bearer x'], says: /never taken on the command line/ },
      { args: ['add', 'other', '--url', 'http://127.0.0.1:9999', '--secret-file', join(stateDir, 'nope')], says: /no such file/ },
      { args: ['add', 'other', '--url', 'http://127.0.0.1:9999', '--secret-file', empty], says: /is empty/ },
      { args: ['add', 'other', '--url', 'http://127.0.0.1:9999', '--secret-file', long], says: /over 4096 bytes/ },
      { args: ['add', 'other', '--url', 'http://127.0.0.1:9999', '--secret-file', justOver], says: /over 4096 bytes/ },
      { args: ['add', 'other', '--url', `http://127.0.0.1:9999/${'a'.repeat(2_100)}`], says: /over 2048 characters/ },
      { args: ['add', 'other', '--url', 'http://127.0.0.1:9999', '--max-concurrent-runs', '0'], says: /from 1 to 10,000, not 0/ },
      { args: ['add', 'other', '--url', 'http://127.0.0.1:9999', '--max-concurrent-runs', '10001'], says: /not 10001/ },
      { args: ['add', 'other', '--url', 'http://127.0.0.1:9999', '--max-concurrent-runs', 'lots'], says: /not lots/ },
      { args: ['add', 'mine', '--url', 'http://127.0.0.1:9999'], says: /a local target named mine already exists \(http:\/\/127\.0\.0\.1:\d+\); --replace changes it/ },
      { args: ['remove', 'nobody'], says: /no local target named nobody/ },
      { args: ['remove', 'demo-agent'], says: /reserved/ },
      { args: ['frobnicate'], says: /usage: ledger local target add/ },
    ];
    const before = readFileSync(targetsFile(stateDir), 'utf8');
    const registered = await table.getTarget('mine');
    for (const { args, says } of cases) {
      const answer = await ledger(...args);
      expect(answer.error, args.join(' ')).toMatch(says);
      expect(answer.lines, args.join(' ')).toEqual([]);
    }
    expect(readFileSync(targetsFile(stateDir), 'utf8')).toBe(before);
    expect(await table.getTarget('mine')).toEqual(registered);
    expect(await table.getTarget('other')).toBeUndefined();
    expect((await table.getTarget('demo-agent'))?.kind).toBe('http');
  });

  // Regression (a review): while the platform was starting, add said to restart it (down, then up).
  it('says to wait, not to restart, while the platform is starting, and changes nothing', async () => {
    const starting: LocalTargetDeps = {
      ...deps(),
      running: () => {
        const state = deps().running();
        return state ? { ...state, status: 'starting' } : undefined;
      },
    };
    const before = readFileSync(targetsFile(stateDir), 'utf8');
    await expect(localTarget(['add', 'early', '--url', 'http://127.0.0.1:9999'], () => undefined, starting)).rejects.toThrow(/the local platform is starting: run this again once npx ledger local status says it is running/);
    await expect(localTarget(['remove', 'mine'], () => undefined, starting)).rejects.toThrow(/the local platform is starting/);
    expect(readFileSync(targetsFile(stateDir), 'utf8')).toBe(before);
    expect(await table.getTarget('early')).toBeUndefined();
  });

  it('takes the same add again as done (a re-run script), and changes nothing', async () => {
    // The bug it pins: re-running the README's commands in the same folder failed at `target add` (the
    // registration survives down/up), though it asked for exactly what was there.
    const before = readFileSync(targetsFile(stateDir), 'utf8');
    const registered = await table.getTarget('mine');
    const again = await ledger('add', 'mine', '--url', `${worker.url}/`, '--secret-file', secretFile, '--max-concurrent-runs', '2');
    expect(again.error).toBeUndefined();
    expect(again.lines[0]).toBe(`local target mine is already registered → ${worker.url} (at most 2 runs at once) with its secret: nothing changed`);
    expect(readFileSync(targetsFile(stateDir), 'utf8')).toBe(before);
    expect(await table.getTarget('mine')).toEqual(registered);
    // Anything else asked of the same name is still refused without --replace.
    expect((await ledger('add', 'mine', '--url', `${worker.url}/`, '--secret-file', secretFile)).error).toMatch(/already exists .*--replace changes it/);
  });

  it('replaces a target with --replace, on the running platform and in the file', async () => {
    const answer = await ledger('add', 'mine', '--url', worker.url, '--secret-file', secretFile, '--replace');
    expect(answer.error).toBeUndefined();
    expect(answer.lines[0]).toBe(`replaced local target mine → ${worker.url} with its secret`);
    expect(await table.getTarget('mine')).toEqual({ name: 'mine', kind: 'http', baseUrl: worker.url, secretRef: 'dispatch-ledger/local/targets/mine' });
    expect(JSON.parse(readFileSync(targetsFile(stateDir), 'utf8')).targets).toHaveLength(1);
  });

  it('refuses to remove a target with a run in flight unless --force; forced, the run goes unknown, never failed', async () => {
    const dispatchId = await send('mine', 'hold', { stallAfterSeconds: 2 });
    await t.viewWhen(dispatchId, (view) => view.phase === 'submitted' && view.execution.status === 'running');
    const refused = await ledger('remove', 'mine');
    expect(refused.error).toMatch(new RegExp(`mine has 1 run\\(s\\) in flight \\(${dispatchId}\\); wait for them, cancel them, or --force`));
    expect(await table.getTarget('mine')).toBeDefined();

    const forced = await ledger('remove', 'mine', '--force');
    expect(forced.error).toBeUndefined();
    expect(forced.lines).toEqual(['removed local target mine']);
    expect(await table.getTarget('mine')).toBeUndefined();
    expect(JSON.parse(readFileSync(targetsFile(stateDir), 'utf8'))).toEqual({ targets: [] });
    // Nothing can look the run up any more: the ledger loses sight of it, and says so.
    const lost = await t.viewWhen(dispatchId, (view) => view.execution.status === 'unknown');
    expect(lost.execution.status).toBe('unknown');
    expect(lost.phase).toBe('submitted');
    expect(existsSync(targetsFile(stateDir))).toBe(true);
  });

  // Regression (a review): the platform kept a target's secret for 5 minutes (the AWS default), so after
  // `add --replace` with a new secret file every call went out with the old one, refused 401, retried —
  // dispatches stalled for minutes while the CLI said the target was registered.
  it('uses a secret replaced with add --replace at the next call', async () => {
    const NEW = 'Bearer rotated-secret-77aa';
    const rotated = await createWorker({ name: 'rotating', secret: NEW, store: memoryStore(), run: async () => ({ summary: 'took the new secret' }) }).listen();
    try {
      expect((await ledger('add', 'rotating', '--url', rotated.url, '--secret-file', secretFile)).error).toBeUndefined();
      // The worker refuses the old secret: the submission is retried (a 401 is a rotation under way), by the
      // intake and then the monitor — each has read the old secret — until its budget is spent.
      const refused = await send('rotating', 'rotate');
      const blocked = await t.viewWhen(refused, (view) => view.phase === 'blocked');
      expect(blocked.blockedReason).toContain('HTTP 401');
      const newFile = join(stateDir, 'new-secret.txt');
      writeFileSync(newFile, `${NEW}\n`);
      expect((await ledger('add', 'rotating', '--url', rotated.url, '--secret-file', newFile, '--replace')).error).toBeUndefined();
      const taken = await send('rotating', 'rotated');
      const done = await t.viewWhen(taken, (view) => view.execution.status === 'completed' || view.phase === 'blocked');
      expect(done.execution.result?.summary).toBe('took the new secret');
    } finally {
      await ledger('remove', 'rotating', '--force');
      await rotated.close();
    }
  });

  it('takes a default port, makes a state directory that git ignores, and refuses a hand-edited file holding what add would refuse', async () => {
    const fresh = join(mkdtempSync(join(tmpdir(), 'ledger-fresh-')), '.ledger', 'local');
    try {
      const lines: string[] = [];
      await localTarget(['add', 'on-eighty', '--url', 'http://127.0.0.1:80'], (line) => void lines.push(line), { ...deps(), stateDir: fresh, running: () => undefined });
      expect(lines[0]).toBe('added local target on-eighty → http://127.0.0.1');
      expect(readFileSync(join(fresh, '.gitignore'), 'utf8')).toMatch(/^\*$/m);
      // Edited by hand to a non-loopback URL: the next start (and every command) refuses it, naming why, never quoting secrets.
      writeLocalTargets(fresh, []);
      writeFileSync(targetsFile(fresh), JSON.stringify({ targets: [{ name: 'edited', url: 'http://10.0.0.5:80', addedAt: 'x', secret: 'Bearer s3cret' }] }));
      expect(() => readLocalTargets(fresh)).toThrow(/holds a target add would refuse: its url: 10\.0\.0\.5 is not the loopback/);
      writeFileSync(targetsFile(fresh), '{"targets": [{"name": "x", "secret": "Bearer s3cret"');
      expect(() => readLocalTargets(fresh)).toThrow(/is not JSON; fix or remove it$/);
    } finally {
      rmSync(fresh, { recursive: true, force: true });
    }
  });
});
