import { describe, expect, it } from 'vitest';
import { memoryStore, type RunFunction, type Transport } from '@dispatch-ledger/worker';
import { createLambdaWorker, memoryLambdaStore, type LambdaContextLike } from '@dispatch-ledger/worker/lambda';
import { CallbackClient } from '../../packages/worker/src/callbacks.js';
import { RunEngine } from '../../packages/worker/src/runs.js';
import { eventually } from '../support/eventually.js';

/*
 * What the worker kit reports of a run's evidence and text (docs/protocol.md §6, §12), on both runtimes.
 * Regressions (a review of the kit):
 * - an upload the run did not await was waited for before the final event, but its ref was recorded a
 *   few promise steps after the upload settled: the `completed` event left it out;
 * - on Lambda, an upload the ledger refused threw an error without its `code`, so `err.code ===
 *   'evidence_sealed'` (the kit's README) never held there; the http worker's had it;
 * - on Lambda a note and a summary were cut with `.slice`, which can split an emoji and leave half of it.
 */

const CALLBACK_URL = 'http://127.0.0.1:9';
const submission = (dispatchId: string) => ({ dispatchId, attempt: 1, origin: 'planner', task: {}, callbackUrl: CALLBACK_URL });
const context: LambdaContextLike = { awsRequestId: 'req-1', getRemainingTimeInMillis: () => 60_000 };

interface Sent {
  readonly method: string;
  readonly url: string;
  readonly body: Record<string, unknown> | undefined;
}

/** A ledger stand-in: records every callback; an evidence upload answers once `uploadWaitsFor` settles, as `upload` says. */
function ledger(options: { uploadWaitsFor?: Promise<unknown>; upload?: { status: number; text: string } } = {}): { transport: Transport; sent: Sent[]; events: () => Array<Record<string, unknown>> } {
  const sent: Sent[] = [];
  const transport: Transport = async (url, init) => {
    sent.push({ method: init.method, url, body: init.method === 'POST' && typeof init.body === 'string' ? (JSON.parse(init.body) as Record<string, unknown>) : undefined });
    if (init.method !== 'PUT') return { status: 202, text: '{}' };
    await options.uploadWaitsFor;
    return options.upload ?? { status: 201, text: '{}' };
  };
  return { transport, sent, events: () => sent.flatMap((one) => (one.method === 'POST' && one.url.includes('/events') && one.body ? [one.body] : [])) };
}

/** A run that starts an upload and returns without waiting for it; the upload is answered only once the run has returned. */
function unawaitedUpload(): { run: RunFunction; returned: Promise<void> } {
  let ran: () => void = () => undefined;
  const returned = new Promise<void>((resolve) => (ran = resolve));
  const run: RunFunction = async (_task, ctx) => {
    void ctx.putEvidence('out/late.md', 'written last').catch(() => undefined);
    ran();
    return { summary: 'done' };
  };
  return { run, returned };
}

describe('an upload the run did not wait for', () => {
  it('is listed in the http worker’s completed event', async () => {
    const { run, returned } = unawaitedUpload();
    const { transport, events } = ledger({ uploadWaitsFor: returned });
    const engine = new RunEngine({ store: memoryStore(), log: () => undefined, run, callbacks: new CallbackClient({ log: () => undefined, stopSignal: new AbortController().signal, transport }) });
    expect(await engine.submit('d-late:1', submission('d-late'))).toMatchObject({ kind: 'created' });
    const completed = await eventually('the completed event', () => events().find((event) => event.type === 'completed'));
    expect(completed.evidence).toEqual(['out/late.md']);
    await engine.close();
  });

  it('is listed in the Lambda worker’s completed event', async () => {
    const { run, returned } = unawaitedUpload();
    const { transport, events } = ledger({ uploadWaitsFor: returned });
    const lambda = createLambdaWorker({ name: 'late-lambda', run, store: memoryLambdaStore(), transport, log: () => undefined });
    await lambda({ ...submission('d-late-l'), runId: 'd-late-l:1' }, context);
    expect(events().find((event) => event.type === 'completed')?.evidence).toEqual(['out/late.md']);
  });
});

describe('on Lambda as on the http worker', () => {
  it('an upload the ledger refused throws with the ledger’s code (evidence_sealed)', async () => {
    const { transport } = ledger({ upload: { status: 409, text: JSON.stringify({ error: { code: 'evidence_sealed', message: 'the check found it' } }) } });
    const caught: unknown[] = [];
    const run: RunFunction = async (_task, ctx) => {
      await ctx.putEvidence('out/report.md', 'again').catch((error: unknown) => caught.push(error));
      return { summary: 'done' };
    };
    const lambda = createLambdaWorker({ name: 'sealed-lambda', run, store: memoryLambdaStore(), transport, log: () => undefined });
    await lambda({ ...submission('d-sealed'), runId: 'd-sealed:1' }, context);
    expect(caught).toHaveLength(1);
    expect(caught[0]).toMatchObject({ name: 'CallbackError', kind: 'refused', status: 409, code: 'evidence_sealed' });
  });

  it('a note and a summary cut at their bound never split an emoji', async () => {
    const { transport, events } = ledger();
    const store = memoryLambdaStore();
    // Each text puts an emoji's two halves across its bound (the kit's 1,000-character note, 2,000-character summary).
    const run: RunFunction = async (_task, ctx) => {
      await ctx.progress(`${'n'.repeat(999)}🚀 and more`);
      return { summary: `${'s'.repeat(1_999)}🚀 and more` };
    };
    const lambda = createLambdaWorker({ name: 'emoji-lambda', run, store, transport, log: () => undefined });
    await lambda({ ...submission('d-emoji'), runId: 'd-emoji:1' }, context);
    const item = await store.get('d-emoji:1');
    const texts = [String(item?.note), String(item?.result?.summary), JSON.stringify(events())];
    for (const text of texts) expect(text).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/);
    expect(item?.note?.startsWith('n'.repeat(999))).toBe(true);
  });
});

describe('many distinct uploads', () => {
  // Regression (a review): a run's record kept every distinct ref it uploaded, 512 bytes each at most; on
  // Lambda, beside a 256 KiB result body, the item could pass DynamoDB's 400 KB and its final write fail.
  it('keep every expected ref and the first 32 others on the Lambda run’s item, all a final event can claim', async () => {
    const { transport, events } = ledger();
    const store = memoryLambdaStore();
    const run: RunFunction = async (_task, ctx) => {
      for (let n = 0; n < 200; n += 1) await ctx.putEvidence(`out/extra-${String(n).padStart(3, '0')}-${'x'.repeat(400)}.md`, 'x');
      await ctx.putEvidence('out/report.md', 'the report');
      return { summary: 'done' };
    };
    const lambda = createLambdaWorker({ name: 'many-lambda', run, store, transport, log: () => undefined });
    await lambda({ ...submission('d-many'), expectedEvidence: ['out/report.md'], runId: 'd-many:1' }, context);
    const item = await store.get('d-many:1');
    expect(item?.evidence).toHaveLength(33);
    expect(item?.evidence).toContain('out/report.md');
    const completed = events().find((event) => event.type === 'completed');
    expect((completed?.evidence as string[] | undefined)?.[0]).toBe('out/report.md');
    expect(completed?.evidence).toHaveLength(32);
  });
});
