import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { isLedgerNetworkError } from '@dispatch-ledger/client';
import { ArgumentsError } from '../../cli/args.js';
import { connect, resolveConnection } from '../../cli/connect.js';
import { events } from '../../cli/events.js';
import { dlq, UsageError } from '../../cli/operations.js';

// Where a command's requests go (CONTRACT §13): the connection flags and the region's environment
// variables, read before anything is sent; and what the remote client sends (signed, never as an origin).

const RLO = '\u202e';
/** Refused as a usage mistake (exit 2): connection flags that are malformed, missing or do not go together. */
const refused = (run: () => unknown, problem: RegExp): void => {
  expect(run).toThrow(ArgumentsError);
  expect(run).toThrow(problem);
};

describe('resolveConnection', () => {
  it('is the local platform without --stack or --api-url, whatever the environment says', () => {
    expect(resolveConnection({}, { AWS_REGION: 'eu-west-1' })).toEqual({ kind: 'local' });
    expect(resolveConnection({ stack: undefined, 'api-url': undefined }, {})).toEqual({ kind: 'local' });
  });

  it('takes --api-url without its trailing slash (a function URL is printed with one), and --queue-url to send', () => {
    expect(resolveConnection({ 'api-url': 'https://abc.lambda-url.eu-west-1.on.aws/' }, { AWS_REGION: 'eu-west-1' })).toEqual({
      kind: 'api',
      apiUrl: 'https://abc.lambda-url.eu-west-1.on.aws',
      region: 'eu-west-1',
    });
    const queueUrl = 'https://sqs.eu-west-1.amazonaws.com/123456789012/dispatch';
    // A queue URL only names the queue (the SQS client sends to its own endpoint): http is fine for it.
    expect(resolveConnection({ 'api-url': 'http://localhost:4010', 'queue-url': 'http://sqs.us-east-1.example.com/1/q', region: 'us-east-1' }, {})).toMatchObject({ apiUrl: 'http://localhost:4010' });
    expect(resolveConnection({ 'api-url': 'http://[::1]:4010', region: 'us-east-1' }, {})).toMatchObject({ apiUrl: 'http://[::1]:4010' });
    expect(resolveConnection({ 'api-url': 'http://127.0.0.1:4010', 'queue-url': queueUrl, region: 'us-east-1' }, {})).toEqual({
      kind: 'api',
      apiUrl: 'http://127.0.0.1:4010',
      dispatchQueueUrl: queueUrl,
      region: 'us-east-1',
    });
  });

  it('takes the region from --region, else AWS_REGION, else AWS_DEFAULT_REGION', () => {
    const stack = { stack: 'DispatchLedger' };
    expect(resolveConnection({ ...stack, region: 'us-west-2' }, { AWS_REGION: 'eu-west-1', AWS_DEFAULT_REGION: 'ap-south-1' })).toEqual({ kind: 'stack', stack: 'DispatchLedger', region: 'us-west-2' });
    expect(resolveConnection(stack, { AWS_REGION: 'eu-west-1', AWS_DEFAULT_REGION: 'ap-south-1' })).toMatchObject({ region: 'eu-west-1' });
    expect(resolveConnection(stack, { AWS_REGION: '', AWS_DEFAULT_REGION: 'us-gov-west-1' })).toMatchObject({ region: 'us-gov-west-1' });
  });

  it('refuses a remote connection with no region, saying how to give one', () => {
    refused(() => resolveConnection({ stack: 'DispatchLedger' }, {}), /no region to sign for \(the stack's region\): pass --region R, or set AWS_REGION/);
    refused(() => resolveConnection({ 'api-url': 'https://x.example.com' }, {}), /no region/);
  });

  it('refuses flags that do not go together', () => {
    refused(() => resolveConnection({ stack: 'a', 'api-url': 'https://x.example.com', region: 'us-east-1' }, {}), /give --stack NAME or --api-url URL, not both/);
    refused(() => resolveConnection({ stack: 'a', 'queue-url': 'https://q.example.com/1/q', region: 'us-east-1' }, {}), /--stack gives the dispatch queue/);
    refused(() => resolveConnection({ 'queue-url': 'https://q.example.com/1/q' }, {}), /--queue-url and --region go with --api-url URL/);
    refused(() => resolveConnection({ region: 'us-east-1' }, {}), /--queue-url and --region go with --api-url URL/);
  });

  it.each([
    ['another scheme', { 'api-url': 'ftp://x.example.com' }, /--api-url must be an https URL \(http only on 127\.0\.0\.1, \[::1\] or localhost\) without a query/],
    ['plain http to another machine (a signed request could be replayed)', { 'api-url': 'http://ledger.example.com' }, /--api-url must be an https URL/],
    // Only the literal loopback names: a *.localhost name resolves wherever the resolver says.
    ['plain http to a *.localhost name', { 'api-url': 'http://api.localhost:4010' }, /--api-url must be an https URL \(http only on 127\.0\.0\.1, \[::1\] or localhost\)/],
    ['plain http to a name ending in localhost', { 'api-url': 'http://evil-localhost:4010' }, /--api-url must be an https URL/],
    ['a query', { 'api-url': 'https://x.example.com/?origin=planner' }, /--api-url must be an https URL/],
    ['no URL', { 'api-url': 'not a url' }, /--api-url must be/],
    ['a URL over 2,048 characters', { 'api-url': `https://x.example.com/${'a'.repeat(2100)}` }, /--api-url must be/],
    ['a queue URL of another scheme', { 'api-url': 'https://x.example.com', 'queue-url': 'sqs://q' }, /--queue-url must be an http\(s\) URL without a query/],
    // A review: a user name and password were taken, and a refused URL printed them.
    ['a user name and password', { 'api-url': 'https://someone:s3cret@x.example.com' }, /--api-url must be an https URL .* without a query or a user name .*, got "https:\/\/…@x\.example\.com"/],
    ['a password on plain http elsewhere', { 'api-url': 'http://someone:s3cret@remote.example' }, /got "http:\/\/…@remote\.example"/],
    ['a queue URL with a password', { 'api-url': 'https://x.example.com', 'queue-url': 'https://u:s3cret@sqs.example.com/1/q' }, /--queue-url must be .*, got "https:\/\/…@sqs\.example\.com\/1\/q"/],
    ['a stack name starting with a digit', { stack: '1-starts-with-a-digit' }, /--stack must be a CloudFormation stack name/],
    ['a stack name with an underscore', { stack: 'under_score' }, /--stack must be a CloudFormation stack name/],
    ['a stack name over 128 characters', { stack: `a${'b'.repeat(128)}` }, /--stack must be a CloudFormation stack name/],
    ['a region that is none', { stack: 'a', region: 'Mars' }, /--region must be an AWS region such as us-east-1, got "Mars"/],
  ])('refuses %s before sending anything', (_name, values, problem) => {
    refused(() => resolveConnection(values, { AWS_REGION: 'us-east-1' }), problem);
  });

  it('refuses a malformed AWS_REGION by its name, and escapes what it quotes', () => {
    refused(() => resolveConnection({ stack: 'a' }, { AWS_REGION: 'not a region' }), /AWS_REGION must be an AWS region/);
    refused(() => resolveConnection({ stack: `x${RLO}` }, {}), /got "x\\u202e"/);
  });
});

describe('connect to a deployed API (@dispatch-ledger/client, against a fake of the API on 127.0.0.1)', () => {
  const servers: Server[] = [];
  afterEach(async () => {
    vi.unstubAllEnvs();
    await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
  });

  async function fakeApi(): Promise<{ url: string; seen: Array<Record<string, string | string[] | undefined>> }> {
    const seen: Array<Record<string, string | string[] | undefined>> = [];
    const server = createServer((request, response) => {
      seen.push({ ...request.headers, path: request.url });
      request.resume();
      request.on('end', () => {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end('{"ok":true}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push(server);
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
  }

  it("signs every call for lambda in its region with the default chain's credentials, and never speaks as an origin", async () => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'AKIAREMOTECALLER0001');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'remote-secret');
    vi.stubEnv('AWS_SESSION_TOKEN', 'remote-session');
    const api = await fakeApi();
    const ledger = await connect({ 'api-url': api.url, region: 'eu-west-1' }, { origin: 'planner' });
    expect((await ledger.endpoints()).local).toBe(false);
    expect(await ledger.raw('getDispatch', { params: { dispatchId: 'd-1' } })).toMatchObject({ status: 200, body: { ok: true } });
    expect(await ledger.raw('cancel', { params: { dispatchId: 'd-1' }, body: { reason: 'no longer needed' } })).toMatchObject({ status: 200 });
    expect(api.seen).toHaveLength(2);
    for (const headers of api.seen) {
      expect(headers['authorization']).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIAREMOTECALLER0001\/\d{8}\/eu-west-1\/lambda\/aws4_request, /);
      expect(headers['x-amz-security-token']).toBe('remote-session');
      expect(headers).not.toHaveProperty('x-ledger-origin');
    }
    expect(api.seen[1]?.['content-type']).toBe('application/json');
  });

  it('never follows a redirect with a signed request: the signature and session token stay with the API', async () => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'AKIAREMOTECALLER0001');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'remote-secret');
    vi.stubEnv('AWS_SESSION_TOKEN', 'remote-session');
    const elsewhere = await fakeApi();
    const redirecting = createServer((request, response) => {
      request.resume();
      response.writeHead(307, { location: `${elsewhere.url}/dispatches/d-1` });
      response.end();
    });
    await new Promise<void>((resolve) => redirecting.listen(0, '127.0.0.1', resolve));
    servers.push(redirecting);
    const ledger = await connect({ 'api-url': `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}`, region: 'us-east-1' });
    expect(isLedgerNetworkError(await ledger.raw('getDispatch', { params: { dispatchId: 'd-1' } }).catch((error: unknown) => error))).toBe(true);
    expect(isLedgerNetworkError(await ledger.raw('attention', { as: 'operator' }).catch((error: unknown) => error))).toBe(true);
    expect(elsewhere.seen).toEqual([]);
  });

  it('says what sending needs when it has no dispatch queue, and that it could not reach an API', async () => {
    // A port nothing listens on any more.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    const ledger = await connect({ 'api-url': `http://127.0.0.1:${port}`, region: 'us-east-1' }, { origin: 'planner' });
    await expect(ledger.dispatch({ dispatchId: 'd-1', target: 't', task: {} })).rejects.toThrow(/no dispatch queue: give --queue-url with --api-url/);
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'AKIAREMOTECALLER0001');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'remote-secret');
    const unreachable = ledger.raw('getDispatch', { params: { dispatchId: 'd-1' } });
    await expect(unreachable).rejects.toSatisfy(isLedgerNetworkError);
    await expect(unreachable).rejects.toThrow(`GET /dispatches/{dispatchId} did not reach the ledger at http://127.0.0.1:${port}: ECONNREFUSED`);
  });
});

describe('the commands that do not go through the API', () => {
  it("ledger events refuses --stack and --api-url, saying where a deployed stack's events are", async () => {
    for (const args of [['--stack', 'prod', '--region', 'eu-west-1'], ['--api-url', 'https://x.lambda-url.eu-west-1.on.aws/', '--region', 'eu-west-1']]) {
      const refusedEvents = events(args, () => undefined);
      await expect(refusedEvents).rejects.toBeInstanceOf(ArgumentsError);
      await expect(refusedEvents).rejects.toThrow(/reads the local platform's event log only; on a deployed stack the events are on its EventBridge bus \(the stack output EventBusName\)/);
    }
  });

  it.each([
    [['redrive', '--api-url', 'https://x.example.com'], /dlq redrive works on the queues, not the API/],
    [['redrive', '--stack', 'prod', '--dlq-url', 'https://q.example.com/1/dlq'], /--stack gives the queues and the table/],
    [['redrive', '--stack', 'prod', '--table', 'ledger'], /--stack gives the queues and the table/],
    [['redrive', '--dlq-url', 'https://q.example.com/1/dlq'], /give both --dlq-url and --queue-url/],
  ])('ledger dlq %j is refused before any call', async (args, problem) => {
    const refusedDlq = dlq(args, () => undefined);
    await expect(refusedDlq).rejects.toBeInstanceOf(UsageError);
    await expect(refusedDlq).rejects.toThrow(problem);
  });
});
