import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createLedgerClient, isLedgerNetworkError } from '@dispatch-ledger/client';

/**
 * Every call of the client ends after its `timeoutMs` (docs/protocol.md §15). Regression: `dispatch`
 * gave the queue's send no bound but the caller's own signal, so a queue that took the connection and
 * never answered held the caller for ever. Against a server on loopback that answers nothing.
 */
let silent: Server;
let url: string;
beforeAll(async () => {
  silent = createServer(() => undefined);
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
});
afterEach(() => {
  vi.unstubAllEnvs();
});
afterAll(async () => {
  silent.closeAllConnections();
  await new Promise((resolve) => silent.close(resolve));
});

describe('a call to a ledger that never answers', () => {
  it('dispatch ends after timeoutMs as a LedgerNetworkError (the message may or may not be queued)', async () => {
    const client = createLedgerClient({ origin: 'planner', timeoutMs: 300, local: { apiUrl: url, dispatchQueueUrl: `${url}/000000000000/dispatches`, sqsEndpoint: url } });
    const failed = await client.dispatch({ dispatchId: 'd-1', target: 'demo-agent', task: {} }).catch((error: unknown) => error);
    expect(isLedgerNetworkError(failed)).toBe(true);
    expect((failed as Error).message).toMatch(/sending to the dispatch queue failed/);
  }, 10_000);

  // Regression: the stack's outputs were read (CloudFormation DescribeStacks) with no bound at all.
  it("reading a stack's outputs ends after timeoutMs, as a network error naming the stack (the next call asks again)", async () => {
    // The SDK's own endpoint variable points CloudFormation at the silent server (no request leaves loopback).
    vi.stubEnv('AWS_ENDPOINT_URL_CLOUDFORMATION', url);
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'AKIALOCALTEST0000000');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'local-test-secret');
    const client = createLedgerClient({ origin: 'planner', stack: 'DispatchLedger', region: 'us-east-1', timeoutMs: 300 });
    const failed = await client.check('d-1').catch((error: unknown) => error);
    expect(isLedgerNetworkError(failed)).toBe(true);
    expect((failed as Error).message).toMatch(/^reading stack "DispatchLedger" in us-east-1 \(CloudFormation DescribeStacks\) failed: /);
  }, 10_000);

  // A review: the request was signed before its timeout began, and finding credentials (SSO, a
  // credential process) may hang. No request leaves: the signing never ends.
  it('a call whose credentials never come ends after timeoutMs as a LedgerNetworkError', async () => {
    const client = createLedgerClient({ origin: 'planner', apiUrl: url, region: 'us-east-1', timeoutMs: 300, credentials: () => new Promise(() => undefined) });
    const failed = await client.check('d-1').catch((error: unknown) => error);
    expect(isLedgerNetworkError(failed)).toBe(true);
    expect((failed as Error).message).toMatch(/no answer from the ledger at .* within the call's timeout \(300 ms\)/);
  }, 10_000);
});
