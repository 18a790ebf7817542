import type { APIGatewayProxyEventV2WithIAMAuthorizer } from 'aws-lambda';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually } from '../support/eventually.js';
import { startDemoAgent, type DemoAgent } from '../../local/demo-agent/server.js';
import type { InvocationReport } from '../../local/runtime/context.js';
import { startHttpApi } from '../../local/runtime/http-api.js';
import { allCredentials, createLocalCredentials, signedFetch, signedHeaders, sigV4Verifier, type LocalCredential } from '../../local/runtime/sigv4.js';

const REGION = 'us-east-1';
const credentials = createLocalCredentials({ origins: ['planner'], targets: ['demo-agent'] });
const planner = credentials.origins.planner as LocalCredential;
const demoAgent = credentials.targets['demo-agent'] as LocalCredential;

let close: (() => Promise<void>) | undefined;
let agent: DemoAgent | undefined;
afterEach(async () => {
  await agent?.stop();
  agent = undefined;
  await close?.();
  close = undefined;
});

/** Submits a `complete` run with one expected file to the demo agent, its callbacks going to `callbackUrl`. */
async function completeRun(demo: DemoAgent, callbackUrl: string): Promise<void> {
  const response = await fetch(`${demo.url}/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': 'd:1:1' },
    body: JSON.stringify({ dispatchId: 'd:1', attempt: 1, origin: 'planner', task: { behavior: 'complete' }, expectedEvidence: ['out/my report.md'], callbackUrl }),
  });
  expect(response.status).toBe(200);
}

/** The local HTTP API with AWS_IAM auth in front of a handler that records what it is given. */
async function iamApi() {
  const events: APIGatewayProxyEventV2WithIAMAuthorizer[] = [];
  const reports: InvocationReport[] = [];
  const refusals: string[] = [];
  const server = await startHttpApi({
    functionName: 'api',
    region: REGION,
    handler: async (event) => {
      events.push(event as APIGatewayProxyEventV2WithIAMAuthorizer);
      return { statusCode: 202, headers: { 'content-type': 'application/json' }, body: '{"applied":true}' };
    },
    onInvocation: (report) => reports.push(report),
    verifySignature: sigV4Verifier({ region: REGION, credentials: allCredentials(credentials) }),
    onRefused: ({ reason }) => refusals.push(reason),
  });
  close = server.close;
  return { url: server.url, events, reports, refusals };
}

describe('the local HTTP API with AWS_IAM auth (ledger local up --sigv4)', () => {
  it('hands a verified request to the handler with requestContext.authorizer.iam filled', async () => {
    const { url, events } = await iamApi();
    const response = await signedFetch(
      `${url}/dispatches/d-1/receipts?limit=5`,
      { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"receiptId":"rc-1"}' },
      { credentials: planner, region: REGION },
    );
    expect(response.status).toBe(202);
    expect(events[0]?.requestContext.authorizer.iam).toEqual({
      accessKey: planner.accessKeyId,
      accountId: '000000000000',
      callerId: planner.userId,
      cognitoIdentity: null,
      principalOrgId: null,
      userArn: planner.userArn,
      userId: planner.principalId,
    });
    expect(events[0]).toMatchObject({ rawPath: '/dispatches/d-1/receipts', body: '{"receiptId":"rc-1"}', queryStringParameters: { limit: '5' } });
  });

  it('answers 403 forbidden JSON to an unsigned request, without invoking the handler', async () => {
    const { url, events, reports, refusals } = await iamApi();
    const response = await fetch(`${url}/dispatches/d-1`, { headers: { 'x-ledger-origin': 'planner' } });
    expect(response.status).toBe(403);
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(await response.json()).toEqual({ error: { code: 'forbidden', message: expect.stringMatching(/not signed/) } });
    expect(events).toHaveLength(0);
    expect(reports).toHaveLength(0);
    expect(refusals).toHaveLength(1);
  });

  it('answers 403 to a wrong secret and to a body changed after signing', async () => {
    const { url, events } = await iamApi();
    const wrong = await signedFetch(`${url}/dispatches/d-1`, { method: 'GET' }, { credentials: { ...planner, secretAccessKey: 'not-the-secret' }, region: REGION });
    expect(wrong.status).toBe(403);
    expect(await wrong.json()).toMatchObject({ error: { code: 'forbidden', message: expect.stringMatching(/signature does not match/) } });

    const target = `${url}/dispatches/d-1/receipts`;
    const init = { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"state":"accepted"}' };
    const headers = await signedHeaders(target, init, { credentials: planner, region: REGION });
    const tampered = await fetch(target, { ...init, headers, body: '{"state":"rejected"}' });
    expect(tampered.status).toBe(403);
    expect(await tampered.json()).toMatchObject({ error: { code: 'forbidden', message: expect.stringMatching(/body does not match/) } });
    expect(events).toHaveLength(0);
  });

  it("carries the demo agent's signed callbacks (run events and evidence) through, as its target role session", async () => {
    const { url, events } = await iamApi();
    agent = await startDemoAgent({ callbackTries: 1, signing: { credentials: demoAgent, region: REGION } });
    await completeRun(agent, url);
    await eventually('the completion', () => (events.length === 3 ? events : undefined), { timeoutMs: 3_000, intervalMs: 10 });
    expect(events.map((event) => [event.rawPath, event.requestContext.authorizer.iam.userId])).toEqual([
      ['/runs/d%3A1%3A1/events', demoAgent.userId],
      ['/dispatches/d%3A1/evidence/out/my%20report.md', demoAgent.userId],
      ['/runs/d%3A1%3A1/events', demoAgent.userId],
    ]);
  });

  it('refuses the demo agent callbacks when they go unsigned', async () => {
    const { url, events, refusals } = await iamApi();
    agent = await startDemoAgent({ callbackTries: 1 });
    await completeRun(agent, url);
    await eventually('the three callbacks refused', () => (refusals.length === 3 ? refusals : undefined), { timeoutMs: 3_000, intervalMs: 10 });
    expect(events).toHaveLength(0);
  });
});
