import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpTarget } from '../../shared/adapters/http-target.js';
import type { SubmitRequest } from '../../shared/targets/port.js';

// CONTRACT V3 §8: a target that answers 401 is (most likely) in the middle of a secret rotation — it has
// the new secret and the ledger's cache still holds the old one, or the other way round. That is "ask
// again later", retried with backoff like a 5xx; never a refusal that blocks the dispatch for good.

let server: Server;
let url = '';
const answer = { status: 401, body: JSON.stringify({ error: { code: 'unauthorized', message: 'the authorization header is missing or wrong' } }) };
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

const request: SubmitRequest = { dispatchId: 'd-rotating', attempt: 1, origin: 'planner', task: {}, expectedEvidence: [], callbackUrl: 'http://127.0.0.1:9' };

describe('httpTarget when the target answers 401 (a secret rotation in progress)', () => {
  it('is unavailable — retried, never rejected — on submit, lookup, approval and cancel', async () => {
    const target = httpTarget({ name: 'rotating', kind: 'http', baseUrl: url }, { authHeader: async () => 'Bearer old-secret' });
    const unavailable = { kind: 'unavailable', reason: 'HTTP 401: the authorization header is missing or wrong' };
    expect(await target.submit(request)).toEqual(unavailable);
    // A lookup answered 401 is lookup_unavailable at the monitor: never failed, never target_not_found.
    expect(await target.lookup('d-rotating:1')).toEqual(unavailable);
    expect(await target.decideApproval('d-rotating:1', 'a-1', 'approve')).toEqual(unavailable);
    expect(await target.cancel('d-rotating:1')).toEqual(unavailable);
  });
});
