import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listsTables } from '../../local/engines/dynamodb-local.js';
import { answersHttp } from '../../local/engines/process.js';

/**
 * When DynamoDB Local counts as started. Regression: any HTTP answer counted, but its HTTP server
 * answers before its storage is up, and a test file's first CreateTable met a 500 UnknownError in a
 * clean clone's CI (2026-12-07, dynamodb-local.test.ts). Here an engine whose HTTP server is up and
 * whose API is not yet: answering, and not ready.
 */
describe("DynamoDB Local's readiness", () => {
  let server: Server;
  let endpoint: string;
  let storageUp = false;
  const targets: string[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      targets.push(String(req.headers['x-amz-target'] ?? ''));
      const ok = storageUp && req.method === 'POST' && req.headers['x-amz-target'] === 'DynamoDB_20120810.ListTables' && String(req.headers.authorization ?? '').startsWith('AWS4-HMAC-SHA256 Credential=');
      res.writeHead(ok ? 200 : storageUp ? 400 : 500, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(ok ? '{"TableNames":[]}' : '{"__type":"com.amazonaws.dynamodb.v20120810#InternalFailure"}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('is an answer to ListTables, not any HTTP answer: an engine answering 500 is not ready', async () => {
    storageUp = false;
    expect(await answersHttp(endpoint)).toBe(true);
    expect(await listsTables(endpoint)).toBe(false);
    storageUp = true;
    expect(await listsTables(endpoint)).toBe(true);
    expect(targets.filter((target) => target === 'DynamoDB_20120810.ListTables')).toHaveLength(2);
  });
});
