import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROUTE_DOCS, ROUTES, routePath, type RouteCaller, type RouteName } from '@dispatch-ledger/protocol';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { LOCAL_REGION } from '../../local/engines/index.js';
import { signedFetch, type LocalCredentials, type SigningCredentials } from '../../local/runtime/sigv4.js';
import { uniqueName } from '../support/engines.js';
import { eventually } from '../support/eventually.js';

/**
 * docs/protocol.md §2 and §15, walked over HTTP for every entry of the route table on the local platform
 * under --sigv4 (IAM as in AWS): the caller the table names is admitted and answered a status the table
 * documents (never a 5xx); the wrong role gets 404 — 403 on an operator route — and the route does
 * nothing; a path the table does not name is a 404, never a 500.
 */
let t: TestPlatform;
let credentials: LocalCredentials;
let dispatchId: string;
let runId: string;

beforeAll(async () => {
  t = await startTestPlatform({}, { sigv4: true });
  if (!t.platform.credentials) throw new Error('a --sigv4 platform gives credentials');
  credentials = t.platform.credentials;
  dispatchId = uniqueName('d-walk');
  await t.clients.sqs.send(new SendMessageCommand({ QueueUrl: t.platform.info.dispatchQueueUrl, MessageBody: JSON.stringify({ dispatchId, origin: 'planner', target: 'demo-agent', task: { behavior: 'complete' }, expectedEvidence: ['out/report.md'] }) }));
  const view = await eventually('the walked dispatch', () => call('GET', `/dispatches/${dispatchId}`, undefined, credentials.origins.planner as SigningCredentials), { until: (answer) => answer.status === 200 && (answer.body as { runId?: string }).runId !== undefined && (answer.body as { evidence: { outcome: string } }).evidence.outcome === 'handled' });
  runId = (view.body as { runId: string }).runId;
});
afterAll(async () => {
  await t?.stop();
});

async function call(method: string, path: string, body: unknown, who: SigningCredentials): Promise<{ status: number; body: unknown }> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const response = await signedFetch(`${t.platform.info.apiUrl}${path}`, { method: method as 'GET', ...(payload === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: payload }) }, { credentials: who, region: LOCAL_REGION });
  const text = await response.text();
  return { status: response.status, body: text === '' ? null : (JSON.parse(text) as unknown) };
}

/** Each route's path on the walked dispatch, its run and planner's inbox. */
const pathOf = (name: RouteName): string => {
  const params: Record<string, string> = { dispatchId, runId, origin: 'planner', resultId: `r1~${dispatchId}`, target: 'demo-agent', ref: 'out/walk.md' };
  const query = name === 'putEvidence' || name === 'getTask' ? `?runId=${encodeURIComponent(runId)}` : name === 'getRunControl' ? `?dispatchId=${encodeURIComponent(dispatchId)}` : '';
  return `${routePath(ROUTES[name], params)}${query}`;
};

/** Who the table names, as a credential: the dispatch's own origin, the operator, its target. */
const rightCaller = (name: RouteName): SigningCredentials => {
  const who: readonly RouteCaller[] = ROUTES[name].who;
  if (who.includes('owner') || who.includes('origin')) return credentials.origins.planner as SigningCredentials;
  if (who.includes('target')) return credentials.targets['demo-agent'] as SigningCredentials;
  return credentials.operator;
};

const NAMES = Object.keys(ROUTES) as RouteName[];

/** The body sent: a well-formed one where the route reads whose it is from the body (a run event names its dispatch), else `{}`. */
const bodyOf = (name: RouteName): unknown => {
  if (ROUTES[name].method === 'GET') return undefined;
  return name === 'postRunEvent' ? { dispatchId, seq: 1_000, type: 'heartbeat' } : {};
};

describe('every route of the table, over HTTP (--sigv4)', () => {
  it.each(NAMES)('%s: the wrong role is refused (404, or 403 on an operator route) and nothing changes', async (name) => {
    const spec = ROUTES[name];
    const before = await call('GET', `/dispatches/${dispatchId}`, undefined, credentials.operator);
    const stranger = credentials.origins['lead-agent'] as SigningCredentials;
    const answer = await call(spec.method, pathOf(name), bodyOf(name), stranger);
    const operatorOnly = spec.who.length === 1 && spec.who[0] === 'operator';
    expect(answer.status, `${spec.method} ${spec.path}`).toBe(operatorOnly ? 403 : 404);
    const after = await call('GET', `/dispatches/${dispatchId}`, undefined, credentials.operator);
    expect(after.body).toEqual(before.body);
  });

  it.each(NAMES)('%s: the caller the table names is admitted and answered a documented status', async (name) => {
    const spec = ROUTES[name];
    const doc = ROUTE_DOCS[name];
    // An empty body: admitted, then validated (a GET is answered in full).
    const answer = await call(spec.method, pathOf(name), bodyOf(name), rightCaller(name));
    const documented = spec.method === 'GET' && name !== 'inboxBody' && name !== 'getTask' ? doc.ok : [...doc.ok, ...doc.errors];
    expect(documented, `${spec.method} ${spec.path} answered ${answer.status}: ${JSON.stringify(answer.body).slice(0, 300)}`).toContain(answer.status);
    expect(answer.status).not.toBe(403);
  });

  it.each([
    ['GET', '/nope'],
    ['GET', '/dispatches/x/nope'],
    ['POST', '/origins/planner/inbox/r1~x/ack/more'],
    ['GET', '/runs/x'],
    ['PUT', '/dispatches/x'],
    ['GET', '/'],
  ])('%s %s, not in the table: 404 or 405, never a 500', async (method, path) => {
    const answer = await call(method, path, method === 'GET' ? undefined : {}, credentials.operator);
    expect([404, 405]).toContain(answer.status);
  });
});
