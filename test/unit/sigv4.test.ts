import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  allCredentials,
  createLocalCredentials,
  iamAuthorizer,
  MAX_CLOCK_SKEW_MS,
  signedHeaders,
  sigV4Verifier,
  type LocalCredential,
  type ReceivedRequest,
  type SigningCredentials,
} from '../../local/runtime/sigv4.js';

const REGION = 'us-east-1';
const API = 'http://127.0.0.1:4123';
const credentials = createLocalCredentials({ origins: ['planner', 'lead-agent'], targets: ['demo-agent'] });
const planner = credentials.origins.planner as LocalCredential;
const demoAgent = credentials.targets['demo-agent'] as LocalCredential;
const signedAt = new Date('2025-06-01T12:00:00.000Z');
const verify = sigV4Verifier({ region: REGION, credentials: allCredentials(credentials), now: () => signedAt });

/** What the server receives for a request signed as `as` (fetch adds `host` from the URL). */
async function received(
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: string },
  as: SigningCredentials = planner,
  at: Date = signedAt,
): Promise<ReceivedRequest> {
  const url = new URL(path, API);
  const headers = await signedHeaders(url, init, { credentials: as, region: REGION }, at);
  const lower = Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]));
  return {
    method: init.method ?? 'GET',
    rawPath: url.pathname,
    rawQueryString: url.search.slice(1),
    headers: { ...lower, host: url.host, 'user-agent': 'node', accept: '*/*' },
    body: Buffer.from(init.body ?? ''),
  };
}

const post = (body: string) => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body });

async function refusal(request: ReceivedRequest | Promise<ReceivedRequest>, verifier = verify): Promise<string> {
  const verdict = await verifier(await request);
  if (verdict.kind !== 'refused') throw new Error('expected a refusal, got verified');
  return verdict.reason;
}

describe('sigV4Verifier', () => {
  it('verifies a GET with a query and names the caller by its access key', async () => {
    const verdict = await verify(await received('/origins/planner/dispatches?status=completed&limit=5&limit=6', {}));
    expect(verdict).toEqual({ kind: 'verified', credential: planner });
  });

  it('verifies a POST whose body matches its signed x-amz-content-sha256', async () => {
    const request = await received('/dispatches/d-1/receipts', post('{"receiptId":"rc-1"}'));
    expect(request.headers['x-amz-content-sha256']).toBe(createHash('sha256').update('{"receiptId":"rc-1"}').digest('hex'));
    expect(await verify(request)).toMatchObject({ kind: 'verified', credential: { principal: { role: 'origin', origin: 'planner' } } });
  });

  it('verifies a percent-encoded path as sent (an evidence ref with a space, a dispatch id with a colon)', async () => {
    const verdict = await verify(await received('/dispatches/d%3A1/evidence/out/my%20report.md?runId=r-1', { method: 'PUT', body: 'hello' }, demoAgent));
    expect(verdict).toMatchObject({ kind: 'verified', credential: { principal: { role: 'target', target: 'demo-agent' } } });
  });

  it("verifies a role session's request, X-Amz-Security-Token signed", async () => {
    const request = await received('/runs/r-1/events', post('{}'), demoAgent);
    expect(request.headers['x-amz-security-token']).toBe(demoAgent.sessionToken);
    expect(request.headers.authorization).toContain('x-amz-security-token');
    expect((await verify(request)).kind).toBe('verified');
  });

  it('agrees with the AWS SigV4 test suite (get-vanilla)', async () => {
    const example: LocalCredential = {
      accessKeyId: 'AKIDEXAMPLE',
      secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
      principalId: 'AIDAEXAMPLE',
      userId: 'AIDAEXAMPLE',
      userArn: 'arn:aws:iam::000000000000:user/example',
      principal: { role: 'operator' },
    };
    const vanilla = sigV4Verifier({ region: 'us-east-1', service: 'service', credentials: [example], now: () => new Date('2015-08-30T12:36:00Z') });
    const request: ReceivedRequest = {
      method: 'GET',
      rawPath: '/',
      rawQueryString: '',
      headers: {
        host: 'example.amazonaws.com',
        'x-amz-date': '20150830T123600Z',
        authorization:
          'AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31',
      },
      body: new Uint8Array(),
    };
    expect(await vanilla(request)).toEqual({ kind: 'verified', credential: example });
    const flipped = request.headers.authorization?.replace(/1$/, '2') ?? '';
    expect(await refusal({ ...request, headers: { ...request.headers, authorization: flipped } }, vanilla)).toMatch(/signature does not match/);
  });

  it('refuses a request with no Authorization header', async () => {
    const { authorization: _dropped, ...unsigned } = (await received('/dispatches/d-1', {})).headers;
    expect(await refusal({ ...(await received('/dispatches/d-1', {})), headers: unsigned })).toMatch(/not signed/);
  });

  it('refuses another scheme than AWS4-HMAC-SHA256', async () => {
    const request = await received('/dispatches/d-1', {});
    expect(await refusal({ ...request, headers: { ...request.headers, authorization: 'Bearer abc' } })).toMatch(/AWS4-HMAC-SHA256/);
  });

  it('refuses a request signed with the wrong secret', async () => {
    const wrongSecret = { accessKeyId: planner.accessKeyId, secretAccessKey: `${planner.secretAccessKey}x` };
    expect(await refusal(received('/dispatches/d-1', {}, wrongSecret))).toMatch(/signature does not match/);
  });

  it('refuses an access key it does not know', async () => {
    const stranger = { accessKeyId: 'AKIAUNKNOWNUNKNOWN00', secretAccessKey: planner.secretAccessKey };
    expect(await refusal(received('/dispatches/d-1', {}, stranger))).toMatch(/access key is not known/);
  });

  it('refuses a date more than 15 minutes off the server clock, either way, and takes one just inside', async () => {
    const minutes = (n: number) => new Date(signedAt.getTime() + n * 60_000);
    expect(await refusal(received('/dispatches/d-1', {}, planner, minutes(-16)))).toMatch(/more than 15 minutes/);
    expect(await refusal(received('/dispatches/d-1', {}, planner, minutes(16)))).toMatch(/more than 15 minutes/);
    expect((await verify(await received('/dispatches/d-1', {}, planner, new Date(signedAt.getTime() - MAX_CLOCK_SKEW_MS + 1000)))).kind).toBe('verified');
  });

  it('refuses a missing or malformed X-Amz-Date', async () => {
    const request = await received('/dispatches/d-1', {});
    expect(await refusal({ ...request, headers: { ...request.headers, 'x-amz-date': '2025-06-01T12:00:00Z' } })).toMatch(/X-Amz-Date/);
    expect(await refusal({ ...request, headers: { ...request.headers, 'x-amz-date': '20250231T120000Z' } })).toMatch(/X-Amz-Date/);
  });

  it('refuses a body that does not match its signed payload hash', async () => {
    const request = await received('/dispatches/d-1/receipts', post('{"state":"accepted"}'));
    expect(await refusal({ ...request, body: Buffer.from('{"state":"rejected"}') })).toMatch(/body does not match/);
  });

  it('refuses a changed body when no payload hash was sent (the signature covers the body)', async () => {
    const request = await received('/dispatches/d-1/receipts', post('{"state":"accepted"}'));
    const { 'x-amz-content-sha256': _hash, ...headers } = request.headers;
    expect((await verify({ ...request, headers })).kind).toBe('refused');
  });

  it('refuses UNSIGNED-PAYLOAD', async () => {
    const request = await received('/dispatches/d-1/receipts', { ...post('{}'), headers: { 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' } });
    expect(await refusal(request)).toMatch(/payload must be signed/);
  });

  it('refuses a changed method, path, query or signed header, and ignores unsigned ones', async () => {
    const request = await received('/dispatches/d-1?refresh=true', { headers: { 'x-ledger-origin': 'planner' } });
    expect((await verify({ ...request, method: 'DELETE' })).kind).toBe('refused');
    expect((await verify({ ...request, rawPath: '/dispatches/d-2' })).kind).toBe('refused');
    expect((await verify({ ...request, rawQueryString: 'refresh=false' })).kind).toBe('refused');
    expect((await verify({ ...request, headers: { ...request.headers, 'x-ledger-origin': 'lead-agent' } })).kind).toBe('refused');
    expect((await verify({ ...request, headers: { ...request.headers, 'user-agent': 'curl', accept: 'text/html' } })).kind).toBe('verified');
  });

  it("refuses a session's key without its token, or with another token", async () => {
    const request = await received('/runs/r-1/events', post('{}'), demoAgent);
    const { 'x-amz-security-token': _token, ...withoutToken } = request.headers;
    expect(await refusal({ ...request, headers: withoutToken })).toMatch(/session token/);
    expect(await refusal({ ...request, headers: { ...request.headers, 'x-amz-security-token': 'forged' } })).toMatch(/session token/);
  });

  it('refuses a scope of another region or service', async () => {
    const otherRegion = sigV4Verifier({ region: 'eu-west-1', credentials: allCredentials(credentials), now: () => signedAt });
    expect(await refusal(received('/dispatches/d-1', {}), otherRegion)).toMatch(/region "us-east-1"/);
    const url = new URL('/dispatches/d-1', API);
    const execute = await signedHeaders(url, {}, { credentials: planner, region: REGION, service: 'execute-api' }, signedAt);
    expect(await refusal({ method: 'GET', rawPath: url.pathname, rawQueryString: '', headers: { ...execute, host: url.host }, body: new Uint8Array() })).toMatch(/service "execute-api"/);
  });

  it('refuses a signature that leaves host out of SignedHeaders', async () => {
    const request = await received('/dispatches/d-1', {});
    const authorization = request.headers.authorization?.replace('SignedHeaders=host;', 'SignedHeaders=') ?? '';
    expect(await refusal({ ...request, headers: { ...request.headers, authorization } })).toMatch(/must include host/);
  });
});

describe('createLocalCredentials', () => {
  it('makes an IAM user per origin and the operator, a role session per target, all distinct', () => {
    expect(credentials.operator).toMatchObject({ principal: { role: 'operator' }, accessKeyId: expect.stringMatching(/^AKIA[A-Z2-7]{16}$/) });
    expect(planner).toMatchObject({ principal: { role: 'origin', origin: 'planner' }, userId: planner.principalId, userArn: expect.stringContaining(':user/') });
    expect(planner.sessionToken).toBeUndefined();
    expect(demoAgent.accessKeyId).toMatch(/^ASIA[A-Z2-7]{16}$/);
    expect(demoAgent.sessionToken).toEqual(expect.any(String));
    expect(demoAgent.userId).toBe(`${demoAgent.principalId}:demo-agent`);
    const all = allCredentials(credentials);
    expect(all).toHaveLength(4);
    expect(new Set(all.map((c) => c.accessKeyId)).size).toBe(4);
    expect(new Set(all.map((c) => c.principalId)).size).toBe(4);
    expect(createLocalCredentials({ origins: ['planner'], targets: [] }).origins.planner?.secretAccessKey).not.toBe(planner.secretAccessKey);
  });
});

describe('iamAuthorizer', () => {
  it("fills requestContext.authorizer.iam as a function URL with AWS_IAM auth does", () => {
    expect(iamAuthorizer(demoAgent)).toEqual({
      iam: {
        accessKey: demoAgent.accessKeyId,
        accountId: '000000000000',
        callerId: demoAgent.userId,
        cognitoIdentity: null,
        principalOrgId: null,
        userArn: demoAgent.userArn,
        userId: demoAgent.userId,
      },
    });
  });
});
