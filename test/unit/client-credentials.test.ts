import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { createLedgerClient, isLedgerConfigError, isLedgerNetworkError } from '@dispatch-ledger/client';

// Bug pinned: no AWS credentials met in the queue send was a LedgerNetworkError ("sending to the dispatch
// queue failed: CredentialsProviderError …"), so `ledger send` said the message "may have reached the
// queue" when nothing could have been sent. The API's calls already called it a config error; now the
// queue's does too, in the same words (one mapping for the API, the queue and the stack's outputs).

const sqs = mockClient(SQSClient);
afterEach(() => sqs.reset());

const remote = () => createLedgerClient({ origin: 'planner', apiUrl: 'http://127.0.0.1:9', queueUrl: 'http://127.0.0.1:9/000000000000/dispatches', region: 'us-east-1' });

describe('the client sending a dispatch', () => {
  it('calls missing credentials a config error, in the words the API calls use', async () => {
    sqs.on(SendMessageCommand).rejects(Object.assign(new Error('Could not load credentials from any providers'), { name: 'CredentialsProviderError' }));
    const failed = await remote().dispatch({ dispatchId: 'd-1', target: 'demo-agent', task: {} }).then(() => undefined, (error: unknown) => error);
    expect(isLedgerConfigError(failed)).toBe(true);
    expect((failed as Error).message).toBe('no AWS credentials: the default credential chain found none (set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY): Could not load credentials from any providers');
  });

  it('still calls a queue that did not answer a network error', async () => {
    sqs.on(SendMessageCommand).rejects(Object.assign(new Error('socket hang up'), { name: 'Error' }));
    const failed = await remote().dispatch({ dispatchId: 'd-1', target: 'demo-agent', task: {} }).then(() => undefined, (error: unknown) => error);
    expect(isLedgerNetworkError(failed)).toBe(true);
    expect((failed as Error).message).toBe('sending to the dispatch queue failed: Error: socket hang up');
  });
});

describe("the client reading the local platform's credentials file", () => {
  // Bug pinned: a credentials file that is not JSON gave a LedgerConfigError carrying JSON.parse's
  // message, which from Node 21 on quotes a piece of the text — there, the secret key.
  it('names the file and says it is not JSON, without repeating its text', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'client-credentials-'));
    const credentialsFile = join(dir, 'credentials.json');
    const secret = 'wJalrXUtnFEMI-not-a-real-key';
    writeFileSync(credentialsFile, `{"region":"us-east-1","credentials":{"secretAccessKey":"${secret}" "accessKeyId":"AKIA"}}`);
    try {
      const local = createLedgerClient({ origin: 'planner', local: { apiUrl: 'http://127.0.0.1:9', dispatchQueueUrl: 'http://127.0.0.1:9/q', sqsEndpoint: 'http://127.0.0.1:9', credentialsFile } });
      const failed = await local.check('d-1').catch((thrown: unknown) => thrown);
      expect(isLedgerConfigError(failed)).toBe(true);
      expect((failed as Error).message).toBe(`the local platform’s credentials (--sigv4) could not be read at ${credentialsFile}: not JSON (its text is not repeated here: it may hold a secret)`);
      expect((failed as Error).message).not.toContain(secret.slice(0, 8));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("a client that speaks for no origin, on a --sigv4 local platform", () => {
  // Regression: a dispatch's lists (runs, receipts, operator receipts, attestations) were called as the
  // client's origin, so a client with none (an operator's) failed with "no credential for origin" before
  // sending, though the routes let the operator read any dispatch's lists — as `check` already did.
  it("reads a dispatch's lists as the operator, signed with the operator's key", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'client-credentials-'));
    const credentialsFile = join(dir, 'credentials.json');
    const key = (id: string) => ({ accessKeyId: `AKIA${id}`, secretAccessKey: `secret-${id}`, principalId: id, principal: { role: 'operator' } });
    writeFileSync(credentialsFile, JSON.stringify({ region: 'us-east-1', service: 'lambda', credentials: { operator: key('OPERATOR00000000'), origins: {}, targets: {} } }));
    const seen: string[] = [];
    const { createServer } = await import('node:http');
    const server = createServer((request, response) => {
      seen.push(`${request.url ?? ''} ${String(request.headers.authorization ?? '').includes('AKIAOPERATOR00000000/') ? 'operator' : 'unsigned'}`);
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ items: [], cursor: null }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const apiUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
      const operator = createLedgerClient({ local: { apiUrl, dispatchQueueUrl: `${apiUrl}/q`, sqsEndpoint: apiUrl, credentialsFile } });
      for (const list of [operator.runs, operator.receipts.list, operator.receipts.operator, operator.manual.list]) expect(await list.page('d-1')).toMatchObject({ items: [] });
      expect(seen).toEqual(['/dispatches/d-1/runs operator', '/dispatches/d-1/receipts operator', '/dispatches/d-1/operator-receipts operator', '/dispatches/d-1/manual-attestations operator']);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('an API URL carrying a user name and password', () => {
  // Regression: taken (and quoted whole in any error about it); the ledger's calls are signed, so a
  // password in the URL is never needed and only leaks — into errors, logs and the signed request line.
  it('is refused as a config error that does not repeat the password', async () => {
    const client = createLedgerClient({ origin: 'planner', apiUrl: 'https://someone:s3cret-pass@abc.lambda-url.eu-west-1.on.aws/', queueUrl: 'https://sqs.eu-west-1.amazonaws.com/1/q', region: 'eu-west-1' });
    const failed = await client.check('d-1').catch((thrown: unknown) => thrown);
    expect(isLedgerConfigError(failed)).toBe(true);
    expect((failed as Error).message).toMatch(/apiUrl must not carry a user name or password/);
    expect((failed as Error).message).not.toContain('s3cret');
  });
});
