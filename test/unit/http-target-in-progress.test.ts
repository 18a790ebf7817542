import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpTarget } from '../../shared/adapters/http-target.js';
import type { SubmitRequest } from '../../shared/targets/port.js';

// CONTRACT §8 v2: a target that is still working on an Idempotency-Key answers 409 {"code":"in_progress"};
// that is "ask again later", retried like a 5xx — not a refusal that blocks the dispatch for good.

let server: Server;
let url = '';
let answer: { status: number; body: string } = { status: 500, body: '' };
beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(answer.body);
    });
  });
  await new Promise<void>((resolve) => server.listen({ port: 0, host: '127.0.0.1' }, () => resolve()));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('not listening on TCP');
  url = `http://127.0.0.1:${address.port}`;
});
afterAll(
  () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
);

const request: SubmitRequest = { dispatchId: 'd-busy', attempt: 2, origin: 'planner', task: {}, expectedEvidence: [], callbackUrl: 'http://127.0.0.1:9' };

async function submitAnswered(status: number, body: unknown) {
  answer = { status, body: typeof body === 'string' ? body : JSON.stringify(body) };
  return httpTarget({ name: 'busy', kind: 'http', baseUrl: url }).submit(request);
}

describe('verdict timing: an Idempotency-Key still in progress', () => {
  it('is unavailable (retried like a 5xx) on 409 {"code":"in_progress"}, in the contract error shape too', async () => {
    expect(await submitAnswered(409, { code: 'in_progress' })).toEqual({ kind: 'unavailable', reason: 'HTTP 409: in_progress' });
    expect(await submitAnswered(409, { code: 'in_progress', message: 'run being created' })).toMatchObject({ kind: 'unavailable' });
    expect(await submitAnswered(409, { error: { code: 'in_progress', message: 'run being created' } })).toMatchObject({ kind: 'unavailable' });
  });

  it('keeps every other 4xx but 408 and 429 a rejection, another 409 included', async () => {
    expect(await submitAnswered(409, { code: 'conflict' })).toEqual({ kind: 'rejected', httpStatus: 409, reason: expect.any(String) });
    expect(await submitAnswered(409, { error: { code: 'key_reused', message: 'the key was used for another body' } })).toEqual({
      kind: 'rejected',
      httpStatus: 409,
      reason: 'the key was used for another body',
    });
    expect(await submitAnswered(409, 'in_progress')).toMatchObject({ kind: 'rejected', httpStatus: 409 });
    for (const status of [400, 403, 404, 422]) expect(await submitAnswered(status, { code: 'in_progress' }), String(status)).toMatchObject({ kind: 'rejected', httpStatus: status });
    for (const status of [408, 429]) expect(await submitAnswered(status, { code: 'x' }), String(status)).toMatchObject({ kind: 'unavailable' });
  });
});
