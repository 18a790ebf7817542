import type { APIGatewayProxyEventV2, APIGatewayProxyResultV2 } from 'aws-lambda';
import { afterEach, describe, expect, it } from 'vitest';
import type { InvocationReport } from '../../local/runtime/context.js';
import { MAX_PAYLOAD_BYTES, startHttpApi } from '../../local/runtime/http-api.js';

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

async function api(respond: (event: APIGatewayProxyEventV2) => Promise<APIGatewayProxyResultV2>) {
  const events: APIGatewayProxyEventV2[] = [];
  const reports: InvocationReport[] = [];
  const server = await startHttpApi({
    functionName: 'api',
    region: 'us-east-1',
    handler: async (event) => {
      events.push(event);
      return respond(event);
    },
    onInvocation: (report) => reports.push(report),
  });
  close = server.close;
  return { url: server.url, events, reports };
}

describe('the local HTTP API (API Gateway HTTP API, payload 2.0)', () => {
  it('binds to 127.0.0.1 and turns a request into an APIGatewayProxyEventV2', async () => {
    const { url, events } = await api(async () => ({ statusCode: 201, headers: { 'content-type': 'application/json' }, body: '{"ok":true}' }));
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    const response = await fetch(`${url}/dispatches/d-1/receipts?limit=5&kind=a&kind=b`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-ledger-origin': 'planner', cookie: 'a=1; b=2' },
      body: JSON.stringify({ receiptId: 'r-1' }),
    });

    expect(response.status).toBe(201);
    expect(await response.json()).toEqual({ ok: true });
    const event = events[0];
    expect(event).toMatchObject({
      version: '2.0',
      routeKey: '$default',
      rawPath: '/dispatches/d-1/receipts',
      rawQueryString: 'limit=5&kind=a&kind=b',
      queryStringParameters: { limit: '5', kind: 'a,b' },
      cookies: ['a=1', 'b=2'],
      body: '{"receiptId":"r-1"}',
      isBase64Encoded: false,
      requestContext: { http: { method: 'POST', path: '/dispatches/d-1/receipts' }, stage: '$default' },
    });
    expect(event?.headers['x-ledger-origin']).toBe('planner');
    expect(event?.headers.cookie).toBeUndefined();
  });

  it('passes a binary body base64-encoded and decodes a base64 result', async () => {
    const bytes = Buffer.from([0, 1, 2, 255]);
    const { url, events } = await api(async () => ({ statusCode: 200, body: bytes.toString('base64'), isBase64Encoded: true }));

    const response = await fetch(`${url}/dispatches/d-1/evidence/out%2Fa.bin`, {
      method: 'PUT',
      headers: { 'content-type': 'application/octet-stream' },
      body: bytes,
    });

    expect(events[0]?.isBase64Encoded).toBe(true);
    expect(Buffer.from(events[0]?.body ?? '', 'base64')).toEqual(bytes);
    expect(events[0]?.rawPath).toBe('/dispatches/d-1/evidence/out%2Fa.bin');
    expect(Buffer.from(await response.arrayBuffer())).toEqual(bytes);
  });

  it('answers a plain (non-structured) result as a 200 JSON body, as API Gateway infers it', async () => {
    const { url } = await api(async () => JSON.stringify({ inferred: true }));
    const response = await fetch(url);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(await response.json()).toEqual({ inferred: true });
  });

  it('answers 500 without any detail when the handler throws, and records the error', async () => {
    const { url, reports } = await api(async () => {
      throw new Error('secret internals at /var/task/x.js:12');
    });
    const response = await fetch(url);
    const text = await response.text();
    expect(response.status).toBe(500);
    expect(text).toBe('{"message":"Internal Server Error"}');
    expect(reports[0]).toMatchObject({ outcome: 'error', trigger: 'http' });
  });

  // Regression: the front awaited the handler without a bound, so a hung call held its request (and the
  // caller) for ever, where AWS ends the invocation at the function's timeout.
  it("ends a handler at the function's timeout: 500, the invocation recorded timed out, and the next request served", async () => {
    const reports: InvocationReport[] = [];
    let calls = 0;
    const server = await startHttpApi({
      functionName: 'api',
      region: 'us-east-1',
      timeoutMs: 100,
      // The first call never ends; the second answers.
      handler: () => (++calls === 1 ? new Promise<APIGatewayProxyResultV2>(() => undefined) : Promise.resolve({ statusCode: 200, body: 'ok' })),
      onInvocation: (report) => reports.push(report),
    });
    close = server.close;
    const hung = await fetch(server.url);
    expect(hung.status).toBe(500);
    expect(await hung.text()).toBe('{"message":"Internal Server Error"}');
    expect(reports[0]).toMatchObject({ outcome: 'error', trigger: 'http', error: expect.stringMatching(/Task timed out after 0\.10 seconds/) });
    const next = await fetch(server.url);
    expect([next.status, await next.text()]).toEqual([200, 'ok']);
  });

  it('refuses a payload over 10 MB with 413 without invoking the handler', async () => {
    const { url, events } = await api(async () => ({ statusCode: 200 }));
    const response = await fetch(url, { method: 'PUT', body: Buffer.alloc(MAX_PAYLOAD_BYTES + 1) });
    expect(response.status).toBe(413);
    expect(events).toHaveLength(0);
  });
});

describe('the local HTTP API path', () => {
  it('passes the path exactly as sent, dot segments and encodings included (regression: URL parsing resolved them)', async () => {
    const { url, events } = await api(async () => ({ statusCode: 204 }));
    const { hostname, port } = new URL(url);
    const { request } = await import('node:http');
    await new Promise<void>((resolve, reject) => {
      const sent = request({ hostname, port, path: '/dispatches/d-1/evidence/../%2e%2e/./x?runId=r', method: 'PUT' }, (response) => {
        response.resume();
        response.on('end', () => resolve());
      });
      sent.on('error', reject);
      sent.end('x');
    });
    expect(events[0]?.rawPath).toBe('/dispatches/d-1/evidence/../%2e%2e/./x');
    expect(events[0]?.queryStringParameters).toEqual({ runId: 'r' });
  });
});
