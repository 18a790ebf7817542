import { afterEach, describe, expect, it } from 'vitest';
import { createWorker, memoryStore, type OpenWorker, type RunFunction, type Transport, type WorkerAnswer } from '@dispatch-ledger/worker';
import { eventually } from '../support/eventually.js';

/**
 * `worker.open()`: the kit's protocol without a server of its own, as a function from request to
 * answer — what a layer in front of the kit (the demo agent's faults, another HTTP framework) calls.
 * It answers exactly as `listen`'s server does.
 */

const SECRET = 'Bearer open-secret-5d1e';

const events: string[] = [];
/** Takes every callback, as the ledger would, and keeps the events' types. */
const ledgerStandIn: Transport = async (_url, init) => {
  if (typeof init.body === 'string' && init.method === 'POST') events.push((JSON.parse(init.body) as { type: string }).type);
  return { status: init.method === 'PUT' ? 201 : 202, text: '{}' };
};

const run: RunFunction = async (task) => ({ summary: `done: ${String(task['goal'])}` });

let open: OpenWorker | undefined;
afterEach(async () => {
  await open?.close();
  open = undefined;
  events.length = 0;
});

const submission = { dispatchId: 'd-open', attempt: 1, origin: 'planner', task: { goal: 'write' }, expectedEvidence: [], callbackUrl: 'http://127.0.0.1:9' };
const post = (headers: Record<string, string>, body: unknown = submission) => ({
  method: 'POST',
  url: '/runs',
  headers: { 'content-type': 'application/json', 'idempotency-key': 'd-open:1', ...headers },
  body: typeof body === 'string' ? body : JSON.stringify(body),
});
const json = (answer: WorkerAnswer): unknown => JSON.parse(answer.body) as unknown;

describe('worker.open(): the protocol as a request handler', () => {
  it('creates, repeats, looks up and completes a run as the server would, and echoes a safe x-request-id', async () => {
    open = await createWorker({ name: 'kit-open', run, store: memoryStore(), transport: ledgerStandIn, log: () => undefined }).open();

    const created = await open.handle(post({ 'x-request-id': 'req-open-1' }));
    expect(created.status).toBe(201);
    expect(created.headers).toMatchObject({ 'content-type': 'application/json; charset=utf-8', 'x-request-id': 'req-open-1' });
    expect(json(created)).toEqual({ runId: 'd-open:1', status: 'queued' });
    const repeated = await open.handle(post({}));
    expect(repeated.status).toBe(200);
    expect(json(repeated)).toMatchObject({ runId: 'd-open:1' });

    await eventually('the completion', () => (events.includes('completed') ? events : undefined), { timeoutMs: 3_000, intervalMs: 5 });
    const lookup = await open.handle({ method: 'GET', url: '/runs/d-open%3A1', headers: {} });
    expect(json(lookup)).toEqual({ runId: 'd-open:1', status: 'completed', result: { summary: 'done: write' } });
    expect(lookup.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('answers errors as the server does: 404, 405 with allow, malformed JSON, a body over 2 MB', async () => {
    open = await createWorker({ name: 'kit-open', run, store: memoryStore(), transport: ledgerStandIn, log: () => undefined }).open();

    expect((await open.handle({ method: 'GET', url: '/nowhere', headers: {} })).status).toBe(404);
    const wrongMethod = await open.handle({ method: 'GET', url: '/runs', headers: {} });
    expect([wrongMethod.status, wrongMethod.headers['allow']]).toEqual([405, 'POST']);
    expect(json(await open.handle(post({}, '{nope')))).toMatchObject({ error: { code: 'malformed_json' } });
    expect((await open.handle(post({}, JSON.stringify({ padding: 'x'.repeat(2 * 1024 * 1024) })))).status).toBe(413);
  });

  it('answers 401 without the secret and changes nothing', async () => {
    const store = memoryStore();
    open = await createWorker({ name: 'kit-open', run, store, transport: ledgerStandIn, log: () => undefined, secret: SECRET }).open();

    const refused = await open.handle(post({}));
    expect(refused.status).toBe(401);
    expect(json(refused)).toMatchObject({ error: { code: 'unauthorized' } });
    expect((await store.list()).records).toEqual([]);
    expect((await open.handle(post({ authorization: SECRET }))).status).toBe(201);
  });

  it('is one live worker per store: open and listen exclude each other until closed', async () => {
    const worker = createWorker({ name: 'kit-open', run, store: memoryStore(), transport: ledgerStandIn, log: () => undefined });
    const first = await worker.open();
    await expect(worker.listen()).rejects.toThrow(/already listening/);
    await first.close();
    open = await worker.open();
    expect((await open.handle({ method: 'GET', url: '/health', headers: {} })).status).toBe(200);
  });
});
