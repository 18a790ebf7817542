import { afterEach, describe, expect, it } from 'vitest';
import { createWorker, memoryStore, type ListeningWorker, type LogLine, type RunFunction, type RunStore, type Transport } from '@dispatch-ledger/worker';
import { eventually } from '../support/eventually.js';

/**
 * CONTRACT V3 §8: given the target's secret, the kit's HTTP server answers 401 to every request that
 * does not carry the `authorization` value the ledger sends (the secret's value, as the ledger's http
 * target adapter sends it: shared/adapters/wiring.ts, http-target.ts) — and changes nothing in its store.
 * Without it, a stranger who reached a worker could cancel any run (the ledger then records the
 * cancellation as the target's own word) or create the next attempt's run first, with its own task.
 */

const CURRENT = 'Bearer kit-secret-current-2f9c';
const PREVIOUS = 'Bearer kit-secret-previous-81d0';
const CALLBACK_URL = 'http://127.0.0.1:9';

/** Takes every callback, as the ledger would. */
const ledgerStandIn: Transport = async (_url, init) => ({ status: init.method === 'PUT' ? 201 : 202, text: '{}' });

const submission = (dispatchId: string, attempt = 1) => ({ dispatchId, attempt, origin: 'planner', task: { goal: 'wait for approval' }, expectedEvidence: [], callbackUrl: CALLBACK_URL });

let listening: ListeningWorker | undefined;
afterEach(async () => {
  await listening?.close();
  listening = undefined;
});

/** A worker whose runs wait for an approval: a live run that approval and cancel can reach. */
async function startWorker(secrets: { secret?: string; secrets?: readonly string[] }): Promise<{ url: string; store: RunStore; calls: string[] }> {
  const calls: string[] = [];
  const run: RunFunction = async (_task, ctx) => {
    calls.push(ctx.runId);
    const decision = await ctx.requestApproval('go on?');
    return { summary: `decided ${decision}` };
  };
  const store = memoryStore();
  listening = await createWorker({ name: 'kit-auth', run, store, transport: ledgerStandIn, log: () => undefined, ...secrets }).listen(0, '127.0.0.1');
  return { url: listening.url, store, calls };
}

async function call(url: string, method: string, path: string, options: { authorization?: string; body?: unknown; key?: string } = {}): Promise<{ status: number; body: unknown }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (options.authorization !== undefined) headers['authorization'] = options.authorization;
  if (options.key !== undefined) headers['idempotency-key'] = options.key;
  const response = await fetch(`${url}${path}`, { method, headers, ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }) });
  return { status: response.status, body: (await response.json()) as unknown };
}

const snapshot = async (store: RunStore): Promise<string> => JSON.stringify((await store.list()).records);

describe('the worker kit with the target secret', () => {
  it('answers 401 on every route it serves, unsigned or wrongly signed, and changes nothing in its store', async () => {
    const { url, store, calls } = await startWorker({ secret: CURRENT });
    // A live run, made by the ledger (the right header), waiting for its approval.
    const made = await call(url, 'POST', '/runs', { authorization: CURRENT, key: 'd-auth:1', body: submission('d-auth') });
    expect(made).toEqual({ status: 201, body: { runId: 'd-auth:1', status: 'queued' } });
    const waiting = await eventually('the run waits for approval', async () => {
      const found = await call(url, 'GET', '/runs/d-auth%3A1', { authorization: CURRENT });
      return (found.body as { status?: string }).status === 'waiting_for_approval' ? (found.body as { pendingApproval: { approvalId: string } }) : undefined;
    });
    const before = await snapshot(store);

    const requests = [
      { method: 'POST', path: '/runs', key: 'd-auth:2', body: submission('d-auth', 2) },
      { method: 'POST', path: '/runs', key: 'd-stranger:1', body: submission('d-stranger') },
      { method: 'GET', path: '/runs/d-auth%3A1' },
      { method: 'POST', path: '/runs/d-auth%3A1/cancel' },
      { method: 'POST', path: '/runs/d-auth%3A1/approval', body: { approvalId: waiting.pendingApproval.approvalId, decision: 'cancel' } },
      { method: 'GET', path: '/health' },
      { method: 'GET', path: '/no-such-route' },
    ];
    const wrong = [undefined, '', 'Bearer kit-secret-current-2f9', `${CURRENT}x`, CURRENT.toLowerCase(), PREVIOUS, CURRENT.replace('Bearer ', '')];
    for (const request of requests) {
      for (const authorization of wrong) {
        const answer = await call(url, request.method, request.path, { ...request, ...(authorization === undefined ? {} : { authorization }) });
        expect(answer, `${request.method} ${request.path} with ${JSON.stringify(authorization)}`).toEqual({
          status: 401,
          body: { error: { code: 'unauthorized', message: 'the authorization header is missing or not the target secret' } },
        });
      }
    }

    expect(await snapshot(store)).toBe(before);
    expect(calls).toEqual(['d-auth:1']);
    // The run still waits: no cancel, no decision reached it.
    expect(await call(url, 'GET', '/runs/d-auth%3A1', { authorization: CURRENT })).toMatchObject({ status: 200, body: { status: 'waiting_for_approval' } });
    expect(await call(url, 'POST', '/runs/d-auth%3A1/approval', { authorization: CURRENT, body: { approvalId: waiting.pendingApproval.approvalId, decision: 'approve' } })).toMatchObject({ status: 200 });
  });

  it('logs refused requests at a bounded rate: a stranger hammering the worker cannot flood its logs', async () => {
    const lines: LogLine[] = [];
    listening = await createWorker({ name: 'kit-auth', run: async () => ({ summary: 'never' }), store: memoryStore(), transport: ledgerStandIn, log: (line) => void lines.push(line), secret: CURRENT }).listen(0, '127.0.0.1');
    const statuses = new Set<number>();
    for (let request = 0; request < 120; request += 1) statuses.add((await call(listening.url, 'GET', `/runs/r-${request}`)).status);
    expect([...statuses]).toEqual([401]);
    const refused = lines.filter((line) => line.msg === 'request_unauthorized');
    expect(refused.length).toBe(10);
    // The last line of the window says the rest are counted, not logged.
    expect(refused.at(-1)).toMatchObject({ level: 'warn', more: 'further refusals this minute are counted and reported with the next one logged' });
  });

  it('takes both secrets during a rotation (secrets: [current, previous]), and no other', async () => {
    const { url } = await startWorker({ secrets: [CURRENT, PREVIOUS] });
    expect(await call(url, 'POST', '/runs', { authorization: CURRENT, key: 'd-rot:1', body: submission('d-rot') })).toMatchObject({ status: 201 });
    expect(await call(url, 'POST', '/runs', { authorization: PREVIOUS, key: 'd-rot:1', body: submission('d-rot') })).toMatchObject({ status: 200, body: { runId: 'd-rot:1' } });
    expect(await call(url, 'GET', '/runs/d-rot%3A1', { authorization: PREVIOUS })).toMatchObject({ status: 200 });
    expect(await call(url, 'POST', '/runs/d-rot%3A1/cancel', { authorization: CURRENT })).toMatchObject({ status: 200 });
    expect(await call(url, 'GET', '/health', { authorization: PREVIOUS })).toEqual({ status: 200, body: { ok: true } });
    expect((await call(url, 'GET', '/runs/d-rot%3A1', { authorization: 'Bearer kit-secret-older-0000' })).status).toBe(401);
  });

  it('refuses a secret it could never match (empty, not a header value, more than two) when created', () => {
    const run: RunFunction = async () => undefined;
    for (const secrets of [{ secret: '' }, { secret: 'Bearer a\nb' }, { secrets: [] }, { secrets: [CURRENT, PREVIOUS, 'Bearer third'] }, { secret: CURRENT, secrets: [PREVIOUS] }]) {
      expect(() => createWorker({ name: 'kit-auth', run, store: memoryStore(), ...secrets }), JSON.stringify(secrets)).toThrow(/secret/);
    }
  });
});
