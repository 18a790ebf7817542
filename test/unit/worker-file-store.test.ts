import { mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createWorker, fileStore, memoryStore, StoreLockedError, StoreReadError, type RunContext, type RunRecord, type RunStore } from '@dispatch-ledger/worker';
import { spawnSync } from 'node:child_process';
import { CallbackClient, type Transport } from '../../packages/worker/src/callbacks.js';
import { RunEngine } from '../../packages/worker/src/runs.js';
import type { RunFunction } from '../../packages/worker/src/run-api.js';
import { fileNameFor } from '../../packages/worker/src/store.js';
import { eventually } from '../support/eventually.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
function freshDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'worker-store-'));
  dirs.push(dir);
  return dir;
}

const recordFactory = (overrides: Partial<RunRecord> = {}): RunRecord => ({
  v: 1,
  runId: 'd-1:1',
  idempotencyKey: 'd-1:1',
  dispatchId: 'd-1',
  attempt: 1,
  origin: 'planner',
  callbackUrl: 'http://127.0.0.1:9',
  expectedEvidence: [],
  timeouts: {},
  owner: 'w-test',
  createdAt: '2026-12-01T00:00:00.000Z',
  updatedAt: '2026-12-01T00:00:00.000Z',
  status: 'queued',
  nextSeq: 1,
  evidence: [],
  ...overrides,
});

const tempFiles = (dir: string): string[] => readdirSync(dir).filter((name) => name.endsWith('.tmp'));

describe('the worker kit: the file store', () => {
  it('creates a run exactly once under concurrent creates, and answers the winner to the others', async () => {
    const dir = freshDir();
    const stores = [fileStore({ dir }), fileStore({ dir })];
    const outcomes = await Promise.all(
      Array.from({ length: 20 }, (_, index) => stores[index % 2]?.create(recordFactory({ owner: `w-${index}` })) ?? Promise.reject(new Error('no store'))),
    );
    const created = outcomes.filter((outcome) => outcome.kind === 'created');
    expect(created).toHaveLength(1);
    const owners = new Set(outcomes.map((outcome) => (outcome.kind === 'exists' ? outcome.existing.owner : 'winner')));
    // Every loser read back one and the same record: the winner's.
    expect(owners.size).toBe(2);
    expect(readdirSync(dir)).toEqual([fileNameFor('d-1:1')]);
  });

  it('replaces a record whole: concurrent readers see an old or a new record, never a torn one, and no temporary file is left', async () => {
    const dir = freshDir();
    const store = fileStore({ dir });
    await store.create(recordFactory());
    const big = 'x'.repeat(200_000);
    const writes = Array.from({ length: 60 }, (_, index) => store.put(recordFactory({ nextSeq: index + 2, note: `${index}:${big}` })));
    const reads = Array.from({ length: 60 }, () => store.get('d-1:1'));
    const seen = await Promise.all(reads);
    await Promise.all(writes);
    for (const record of seen) {
      expect(record?.runId).toBe('d-1:1');
      // Whole: its note matches its seq, from one and the same write.
      if (record?.note !== undefined) expect(record.note.startsWith(`${record.nextSeq - 2}:`)).toBe(true);
    }
    expect(tempFiles(dir)).toEqual([]);
    expect((await store.list()).records).toHaveLength(1);
  });

  it('ignores a temporary file a crash left behind, and reports a record it cannot read instead of guessing', async () => {
    const dir = freshDir();
    const store = fileStore({ dir });
    await store.create(recordFactory());
    await store.create(recordFactory({ runId: 'd-2:1', idempotencyKey: 'd-2:1', dispatchId: 'd-2' }));
    writeFileSync(join(dir, `.${fileNameFor('d-3:1')}.123.abc.tmp`), '{"v":1,"runId":"d-3');
    writeFileSync(join(dir, fileNameFor('d-4:1')), '{"v":1,"runId":"d-4:1"');
    writeFileSync(join(dir, fileNameFor('d-5:1')), JSON.stringify({ ...recordFactory({ runId: 'd-5:1' }), status: 'dancing' }));

    const listed = await store.list();
    expect(listed.records.map((record) => record.runId).sort()).toEqual(['d-1:1', 'd-2:1']);
    expect(listed.unreadable.map((entry) => entry.reason).sort()).toEqual([`${fileNameFor('d-4:1')}: not JSON`, `${fileNameFor('d-5:1')}: status is not a run status`]);
    await expect(store.get('d-4:1')).rejects.toBeInstanceOf(StoreReadError);
    expect(await store.get('d-9:1')).toBeUndefined();
  });

  // Regression (a review): list() skipped every file whose name begins with ".", meant for temporary files
  // (which end in .tmp): a run of a dispatch id that begins with a dot (allowed) was never recovered after a
  // restart — never reported worker_restarted, its final event never sent again.
  it('lists the run of a dispatch id that begins with a dot', async () => {
    const dir = freshDir();
    const store = fileStore({ dir });
    await store.create(recordFactory({ runId: '.nightly-1:1', idempotencyKey: '.nightly-1:1', dispatchId: '.nightly-1' }));
    writeFileSync(join(dir, `.${fileNameFor('d-3:1')}.123.abc.tmp`), '{"v":1,"runId":"d-3');
    expect(fileNameFor('.nightly-1:1').startsWith('.')).toBe(true);
    expect(await store.list()).toEqual({ records: [expect.objectContaining({ runId: '.nightly-1:1' })], unreadable: [] });
  });

  it('names a run file by its encoded runId, or by a digest when that would be too long for a file system', () => {
    expect(fileNameFor('d-1:1')).toBe('d-1%3A1.json');
    expect(fileNameFor('..')).toBe('...json');
    const long = fileNameFor(`${':'.repeat(128)}`);
    expect(long).toMatch(/^h-[0-9a-f]{64}\.json$/);
  });
});

/** A ledger stand-in: answers every callback 2xx and keeps each event's seq and type. */
/** A file store whose writes fail while `full()` says the disk is full. */
function fillingStore(dir: string, full: () => boolean): RunStore {
  const files = fileStore({ dir });
  return { ...files, put: async (record) => (full() ? Promise.reject(new Error('ENOSPC: no space left on device')) : files.put(record)) };
}

function ledgerStandIn(): { transport: Transport; events: Array<{ seq: number; type: string; result?: { summary?: string } }> } {
  const events: Array<{ seq: number; type: string; result?: { summary?: string } }> = [];
  return {
    events,
    transport: async (_url, init) => {
      if (init.method === 'POST' && typeof init.body === 'string') events.push(JSON.parse(init.body) as { seq: number; type: string });
      return { status: init.method === 'PUT' ? 201 : 202, text: '{}' };
    },
  };
}

function engineOn(dir: string, transport: Transport, run: RunFunction, store: RunStore = fileStore({ dir })): { engine: RunEngine; stop: AbortController } {
  const stop = new AbortController();
  const engine = new RunEngine({
    store,
    log: () => undefined,
    callbacks: new CallbackClient({ log: () => undefined, stopSignal: stop.signal, transport }),
    run,
  });
  return { engine, stop };
}

const submission = { dispatchId: 'd-r', attempt: 1, origin: 'planner', task: {}, callbackUrl: 'http://127.0.0.1:9', expectedEvidence: ['out/a.md'] };

describe('the worker kit: a restart on the same file store', () => {
  it('reports a run the previous process left running as failed worker_restarted, with a seq it never used, and keeps the run answerable', async () => {
    const dir = freshDir();
    const ledger = ledgerStandIn();
    let calls = 0;
    const hold: RunFunction = async (_task, ctx: RunContext) => {
      calls += 1;
      await ctx.putEvidence('out/a.md', 'a');
      await ctx.progress('half way');
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
      throw ctx.signal.reason;
    };
    const first = engineOn(dir, ledger.transport, hold);
    await first.engine.submit('d-r:1', submission);
    await eventually('the progress event', () => (ledger.events.some((event) => event.type === 'progress') ? true : undefined));
    first.stop.abort();
    await first.engine.close();
    const before = await fileStore({ dir }).get('d-r:1');
    expect(before?.status).toBe('running');
    const usedSeqs = ledger.events.map((event) => event.seq);

    const second = engineOn(dir, ledger.transport, hold);
    const recovered = await second.engine.recover();
    expect(recovered.restarted).toEqual(['d-r:1']);
    // Written before recover() resolves: the lookup answers the truth at once.
    expect(await second.engine.lookup('d-r:1')).toMatchObject({ runId: 'd-r:1', status: 'failed', nativeStatus: 'worker_restarted', result: { summary: 'worker_restarted' }, evidence: ['out/a.md'], note: 'half way' });
    const failed = await eventually('the failed event', () => ledger.events.find((event) => event.type === 'failed'));
    expect(failed).toMatchObject({ nativeStatus: 'worker_restarted', result: { summary: 'worker_restarted' } });
    expect(failed.seq).toBeGreaterThan(Math.max(...usedSeqs));
    await eventually('the report recorded as delivered', async () => ((await fileStore({ dir }).get('d-r:1'))?.finalReport?.state === 'delivered' ? true : undefined));

    // The same Idempotency-Key still answers the same run, and its code is not run again.
    expect(await second.engine.submit('d-r:1', submission)).toEqual({ kind: 'existing', run: { runId: 'd-r:1', status: 'failed' } });
    expect(calls).toBe(1);
    // A third start has nothing left to report.
    await second.engine.close();
    const third = engineOn(dir, ledger.transport, hold);
    expect(await third.engine.recover()).toEqual({ restarted: [], resent: [] });
    await third.engine.close();
    expect(ledger.events.filter((event) => event.type === 'failed')).toHaveLength(1);
  });

  // Regression (a review): a store write that failed was logged and its event sent all the same; the file
  // kept the older nextSeq, so the next process sent that seq again for worker_restarted — the ledger
  // answered "already known" and the run's failure was never applied.
  it('sends no event whose seq the store did not take, so a restart never sends a seq twice', async () => {
    const dir = freshDir();
    const ledger = ledgerStandIn();
    let diskFull = false;
    let progressed = (): void => undefined;
    const reported = new Promise<void>((resolve) => (progressed = resolve));
    const run: RunFunction = async (_task, ctx: RunContext) => {
      await ctx.progress('before the disk filled');
      diskFull = true;
      await ctx.progress('while the disk is full');
      progressed();
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
      throw ctx.signal.reason;
    };
    const { engine, stop } = engineOn(dir, ledger.transport, run, fillingStore(dir, () => diskFull));
    await engine.submit('d-r:1', submission);
    await reported;
    stop.abort();
    await engine.close();

    diskFull = false;
    const second = engineOn(dir, ledger.transport, async () => ({ summary: 'never called' }));
    expect((await second.engine.recover()).restarted).toEqual(['d-r:1']);
    await eventually('the failed event', () => ledger.events.find((event) => event.type === 'failed'));
    await second.engine.close();
    const seqs = ledger.events.map((event) => event.seq);
    expect(new Set(seqs).size).toBe(seqs.length);
    // The start's heartbeat and the first progress went out; the progress whose seq was not stored did not.
    expect(ledger.events.map((event) => event.type)).toEqual(['heartbeat', 'progress', 'failed']);
  });

  // A review of that fix: a final event is sent even when its write failed — a restart then reports
  // worker_restarted under the same seq, which the ledger, holding the final event, drops; holding the final
  // event back instead lost a completed result until a restart reported the run failed.
  it('sends a final event though its write failed', async () => {
    const dir = freshDir();
    const ledger = ledgerStandIn();
    let diskFull = false;
    const run: RunFunction = async () => {
      diskFull = true;
      return { summary: 'done on a full disk' };
    };
    const { engine } = engineOn(dir, ledger.transport, run, fillingStore(dir, () => diskFull));
    await engine.submit('d-r:1', submission);
    const completed = await eventually('the completed event', () => ledger.events.find((event) => event.type === 'completed'));
    expect(completed.result?.summary).toBe('done on a full disk');
    await engine.close();
  });

  it('sends again a final event the previous process never got through, with the same seq', async () => {
    const dir = freshDir();
    let up = false;
    const events: Array<{ seq: number; type: string }> = [];
    const flaky: Transport = async (_url, init) => {
      if (!up) return { status: 503, text: '{"error":{"code":"unavailable"}}' };
      if (typeof init.body === 'string') events.push(JSON.parse(init.body) as { seq: number; type: string });
      return { status: 202, text: '{}' };
    };
    const first = engineOn(dir, flaky, async () => ({ summary: 'done', body: { answer: 42 } }));
    await first.engine.submit('d-r:1', submission);
    await eventually('the run completed in the store', async () => ((await fileStore({ dir }).get('d-r:1'))?.status === 'completed' ? true : undefined));
    first.stop.abort();
    await first.engine.close();
    const left = await fileStore({ dir }).get('d-r:1');
    expect(left?.finalReport?.state).toBe('pending');

    up = true;
    const second = engineOn(dir, flaky, async () => ({ summary: 'never called' }));
    expect(await second.engine.recover()).toEqual({ restarted: [], resent: ['d-r:1'] });
    const completed = await eventually('the completed event', () => events.find((event) => event.type === 'completed'));
    expect(completed).toEqual({ dispatchId: 'd-r', seq: left?.finalReport?.seq, type: 'completed', result: { summary: 'done', body: { answer: 42 } }, evidence: [] });
    await second.engine.close();
    expect(JSON.parse(readFileSync(join(dir, fileNameFor('d-r:1')), 'utf8'))).toMatchObject({ status: 'completed', finalReport: { state: 'delivered' } });
  });
});

describe('the worker kit: one live worker per file store', () => {
  // Regression (a review): a second worker on the same store (the README's block run again, a second
  // terminal) recovered before it found its port taken, and reported the first one's live run failed
  // worker_restarted to the ledger — while that run went on, and its real end came under the same seq.
  it('refuses a second worker on a store a live one holds, before it reports anything, and lets one start once the first closed', async () => {
    const dir = freshDir();
    const ledger = ledgerStandIn();
    let running: () => void = () => undefined;
    const started = new Promise<void>((resolve) => (running = resolve));
    const hold = async (_task: unknown, ctx: RunContext) => {
      running();
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
      return { summary: 'stopped' };
    };
    const first = await createWorker({ name: 'w-first', run: hold, store: fileStore({ dir }), transport: ledger.transport, log: () => undefined }).listen(0, '127.0.0.1');
    const submitted = await fetch(`${first.url}/runs`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': 'd-r:1' }, body: JSON.stringify(submission) });
    expect(submitted.status).toBe(201);
    await started;
    await eventually('the run running in the store', async () => ((await fileStore({ dir }).get('d-r:1'))?.status === 'running' ? true : undefined));

    const second = createWorker({ name: 'w-second', run: hold, store: fileStore({ dir }), transport: ledger.transport, log: () => undefined });
    await expect(second.listen(0, '127.0.0.1')).rejects.toBeInstanceOf(StoreLockedError);
    expect(ledger.events.filter((event) => event.type === 'failed')).toEqual([]);
    expect((await fileStore({ dir }).get('d-r:1'))?.status).toBe('running');

    await first.close();
    const again = await second.listen(0, '127.0.0.1');
    await again.close();
  });

  it('takes over a lock a process that is gone left behind', async () => {
    const dir = freshDir();
    const gone = spawnSync(process.execPath, ['-e', '']).pid;
    writeFileSync(join(dir, '.lock'), JSON.stringify({ pid: gone, startedAt: '2026-12-01T00:00:00.000Z' }));
    const worker = await createWorker({ name: 'w-after-crash', run: async () => ({ summary: 'x' }), store: fileStore({ dir }), transport: ledgerStandIn().transport, log: () => undefined }).listen(0, '127.0.0.1');
    expect(JSON.parse(readFileSync(join(dir, '.lock'), 'utf8'))).toMatchObject({ pid: process.pid });
    await worker.close();
    expect(readdirSync(dir)).not.toContain('.lock');
    // A container restarted gives its process the same pid: a lock of an earlier process with this pid is taken over too.
    writeFileSync(join(dir, '.lock'), JSON.stringify({ pid: process.pid, processStartedAt: '2026-01-01T00:00:00.000Z' }));
    const restarted = await createWorker({ name: 'w-same-pid', run: async () => ({ summary: 'x' }), store: fileStore({ dir }), transport: ledgerStandIn().transport, log: () => undefined }).listen(0, '127.0.0.1');
    await restarted.close();
  });

  // A review of the lock: two starting at once could both take it (one read the other's lock before it was
  // written and took it as stale; or both took one stale lock over, the second removing the first's).
  it('gives a stale lock to one of two workers taking it over at once, and refuses the other', async () => {
    const dir = freshDir();
    const gone = spawnSync(process.execPath, ['-e', '']).pid;
    writeFileSync(join(dir, '.lock'), JSON.stringify({ pid: gone, processStartedAt: '2026-12-01T00:00:00.000Z' }));
    const tries = await Promise.allSettled(Array.from({ length: 4 }, () => fileStore({ dir }).lock?.() ?? Promise.reject(new Error('no lock'))));
    expect(tries.filter((tried) => tried.status === 'fulfilled')).toHaveLength(1);
    expect(tries.filter((tried) => tried.status === 'rejected').every((tried) => tried.status === 'rejected' && tried.reason instanceof StoreLockedError)).toBe(true);
    expect(readdirSync(dir).filter((name) => name !== '.lock')).toEqual([]);
  });

  it('holds back from a lock it cannot read while it is young, or that another machine holds; takes an old unreadable one over', async () => {
    const dir = freshDir();
    writeFileSync(join(dir, '.lock'), '');
    await expect(fileStore({ dir }).lock?.()).rejects.toThrow(/its lock is being written/);
    utimesSync(join(dir, '.lock'), new Date('2026-01-01'), new Date('2026-01-01'));
    const taken = await fileStore({ dir }).lock?.();
    await taken?.release();
    writeFileSync(join(dir, '.lock'), JSON.stringify({ host: 'another-machine', pid: 1, processStartedAt: '2026-12-01T00:00:00.000Z' }));
    await expect(fileStore({ dir }).lock?.()).rejects.toThrow(/a worker on another-machine holds it/);
    // A takeover a crash left beside a stale lock is never removed by name (two takers could remove each other's): a person deletes it.
    const gone = spawnSync(process.execPath, ['-e', '']).pid;
    writeFileSync(join(dir, '.lock'), JSON.stringify({ pid: gone, processStartedAt: '2026-12-01T00:00:00.000Z' }));
    writeFileSync(join(dir, '.lock.takeover'), '1');
    utimesSync(join(dir, '.lock.takeover'), new Date('2026-01-01'), new Date('2026-01-01'));
    await expect(fileStore({ dir }).lock?.()).rejects.toThrow(/another worker is taking it over \(if none is starting, delete .*\.lock\.takeover too\)/);
    expect(readdirSync(dir).sort()).toEqual(['.lock', '.lock.takeover']);
  });

  it('refuses a second worker on one memory store', async () => {
    const store = memoryStore();
    const first = await createWorker({ name: 'w-memory', run: async () => ({ summary: 'x' }), store, transport: ledgerStandIn().transport, log: () => undefined }).listen(0, '127.0.0.1');
    await expect(createWorker({ name: 'w-memory-2', run: async () => ({ summary: 'x' }), store, transport: ledgerStandIn().transport, log: () => undefined }).listen(0, '127.0.0.1')).rejects.toBeInstanceOf(StoreLockedError);
    await first.close();
  });
});
