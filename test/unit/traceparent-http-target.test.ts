import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { httpTarget } from '../../shared/adapters/http-target.js';
import type { SubmitRequest } from '../../shared/targets/port.js';

// CONTRACT §1 v2: a dispatch message's `traceparent` is forwarded to the target as a header. A stub
// target on 127.0.0.1 keeps what each POST /runs carried, so the header is seen as the target sees it.

const HOST = '127.0.0.1';
const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

interface Received {
  readonly method: string | undefined;
  readonly url: string | undefined;
  readonly headers: IncomingHttpHeaders;
  readonly body: Record<string, unknown>;
}

let server: Server;
let baseUrl = '';
let received: Received[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ method: req.method, url: req.url, headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown> });
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ runId: 'r-traced', status: 'queued' }));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: 0, host: HOST }, () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('not listening on TCP');
  baseUrl = `http://${HOST}:${address.port}`;
});
afterAll(
  () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
);
beforeEach(() => {
  received = [];
});

function submitRequestFactory(overrides: Partial<SubmitRequest> = {}): SubmitRequest {
  return { dispatchId: 'd-traced', attempt: 1, origin: 'planner', task: { behavior: 'complete' }, expectedEvidence: [], callbackUrl: 'http://127.0.0.1:9', ...overrides };
}

async function submitted(request: SubmitRequest): Promise<Received> {
  const outcome = await httpTarget({ name: 'traced', kind: 'http', baseUrl }).submit(request);
  expect(outcome).toMatchObject({ kind: 'accepted', runId: 'r-traced' });
  expect(received).toHaveLength(1);
  const [only] = received;
  if (!only) throw new Error('the target received nothing');
  expect(only).toMatchObject({ method: 'POST', url: '/runs' });
  return only;
}

describe('httpTarget submit and traceparent', () => {
  it('sends the traceparent header on POST /runs when the request carries one', async () => {
    const request = await submitted(submitRequestFactory({ traceparent: TRACEPARENT }));
    expect(request.headers['traceparent']).toBe(TRACEPARENT);
    // A header, not a body field: the body stays the CONTRACT §8 submission.
    expect(request.body).not.toHaveProperty('traceparent');
  });

  it('sends no traceparent header when the request carries none', async () => {
    const request = await submitted(submitRequestFactory());
    expect(request.headers).not.toHaveProperty('traceparent');
    expect(request.headers['idempotency-key']).toBe('d-traced:1');
  });

  it('drops a malformed traceparent instead of sending it, and still submits (a header Node refuses would make every try unavailable)', async () => {
    for (const traceparent of ['', `${TRACEPARENT}\r\nx-injected: 1`, TRACEPARENT.toUpperCase(), `${TRACEPARENT}-extra`, 'x'.repeat(4_000)]) {
      received = [];
      const request = await submitted(submitRequestFactory({ traceparent }));
      expect(request.headers, JSON.stringify(traceparent.slice(0, 60))).not.toHaveProperty('traceparent');
      expect(request.headers).not.toHaveProperty('x-injected');
    }
  });
});
