import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBucket, ensureLedgerTable } from '../../local/resources.js';
import { CapacityMeter } from '../../bench/capacity-meter.js';
import { InboxTable } from '../../shared/adapters/inbox-table.js';
import { STATE_ITEM } from '../../shared/adapters/item-kinds.js';
import { stateVersionOf } from '../../shared/adapters/state-item.js';
import { LedgerFeedsTable } from '../../shared/adapters/ledger-feeds.js';
import { LedgerDueIndex } from '../../shared/adapters/due-index.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import { ApiError, errorResponse } from '../../shared/api/http.js';
import { route, type ApiDeps } from '../../shared/api/routes.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import { stateOnly, type DispatchState } from '../../shared/dispatch/state.js';
import { accepted, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { eventsForState, type StateVersion } from '../../shared/events/derive.js';
import { takeDispatchMessage } from '../../shared/usecases/intake.js';
import { notStored, type BlobStore, type LedgerStore } from '../../shared/ledger/port.js';
import { monitorTick } from '../../shared/usecases/monitor.js';
import type { SubmitRequest, TargetPort } from '../../shared/targets/port.js';
import type { LookupOutcome, SubmitOutcome } from '../../shared/dispatch/target-answers.js';
import { engineClients, loopbackOnly, uniqueName, testEngines } from '../support/engines.js';
import { eventually } from '../support/eventually.js';
import { intakeDepsFactory, newDispatchFactory, overriding } from '../support/factories.js';

/**
 * The results inbox (CONTRACT §10, issue 14) on DynamoDB Local and fauxqs S3: the real table, its
 * inbox index, the API router and the monitor, with a clock the test moves and a target in hand.
 */

const clients = engineClients();
const dynamodb = loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
const meter = new CapacityMeter();
meter.attach(dynamodb);
const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
let tableName: string;
let table: LedgerTable;
let blobs: S3Blobs;
let clock = new Date('2026-12-01T10:00:00Z');
const tick = (seconds: number) => {
  clock = new Date(clock.getTime() + seconds * 1000);
};

/** Accepts every submission (run `r-{attempt}`); lookups answer what `lookupAnswer` says. */
class AcceptingTarget implements TargetPort {
  lookupAnswer: LookupOutcome = { kind: 'unavailable', reason: 'HTTP 503' };
  async submit(request: SubmitRequest): Promise<SubmitOutcome> {
    return { kind: 'accepted', runId: `r-${request.attempt}`, status: 'running', requestId: `q-${request.attempt}` };
  }
  async lookup(): Promise<LookupOutcome> {
    return this.lookupAnswer;
  }
  async decideApproval(_runId: string, approvalId: string, decision: 'approve' | 'cancel') {
    return { kind: 'decided' as const, approvalId, decision };
  }
  async cancel() {
    return { kind: 'cancelled' as const, status: 'cancelled' as const };
  }
}
const target = new AcceptingTarget();

beforeAll(async () => {
  tableName = uniqueName('inbox');
  await ensureLedgerTable(clients.dynamodb, tableName);
  blobs = new S3Blobs(clients.s3, await ensureBucket(clients.s3, uniqueName('inbox-blobs')));
  table = new LedgerTable(documents, { tableName, retentionSeconds: 30 * 86_400 });
  await table.putTarget({ name: 'scripted', kind: 'http', baseUrl: 'http://127.0.0.1:9' });
});
afterAll(() => {
  clients.destroy();
  dynamodb.destroy();
});

function apiDeps(overrides: { store?: LedgerStore; blobs?: BlobStore } = {}): ApiDeps {
  return {
    store: overrides.store ?? table,
    blobs: overrides.blobs ?? blobs,
    feeds: new LedgerFeedsTable(documents, { tableName, retentionSeconds: 30 * 86_400, now: () => clock }),
    inbox: new InboxTable(documents, { tableName, retentionSeconds: 30 * 86_400 }),
    principals: table,
    principalMode: 'open',
    targetFor: () => target,
    callbackUrl: 'http://127.0.0.1:9',
    retryPolicy: DEFAULT_RETRY_POLICY,
    now: () => clock,
    claimSeconds: 60,
    // A long poll's waits move the test's clock instead of the wall clock.
    sleep: async (ms) => tick(ms / 1000),
  };
}

interface Answer {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

/** One API call through the router, answered as the handler answers it (ApiError → its status; anything else → 500). */
async function call(method: string, path: string, body?: unknown, origin = 'planner', deps: ApiDeps = apiDeps()): Promise<Answer> {
  const [rawPath = '', search = ''] = path.split('?');
  try {
    const response = await route(deps, {
      method,
      rawPath,
      query: Object.fromEntries(new URLSearchParams(search)),
      headers: { 'content-type': 'application/json', 'x-ledger-origin': origin },
      body: body === undefined ? undefined : Buffer.from(JSON.stringify(body)),
      iamUserId: undefined,
    });
    return { status: response.statusCode, body: JSON.parse(response.body) as Record<string, unknown> };
  } catch (error) {
    if (error instanceof ApiError) {
      const response = errorResponse(error);
      return { status: response.statusCode, body: JSON.parse(response.body) as Record<string, unknown> };
    }
    return { status: 500, body: { error: { code: 'internal' } } };
  }
}

const errorCode = (answer: Answer): unknown => (answer.body.error as { code?: unknown } | undefined)?.code;
const stateOf = async (dispatchId: string): Promise<DispatchState> => {
  const state = await table.getState(dispatchId);
  if (!state) throw new Error(`no state for ${dispatchId}`);
  return state;
};
/** The state item as stored: the state, the version that wrote it and what that write changed. */
const writtenOf = async (dispatchId: string): Promise<StateVersion> => {
  const { Item } = await documents.send(new GetCommand({ TableName: tableName, Key: STATE_ITEM.key(dispatchId), ConsistentRead: true }));
  if (!Item) throw new Error(`no state item for ${dispatchId}`);
  return stateVersionOf(Item);
};

/** A dispatch taken in by the intake (the target accepts it): returns its id and run. */
async function submittedDispatch(origin: string, message: Record<string, unknown> = {}): Promise<{ dispatchId: string; runId: string }> {
  const dispatchId = uniqueName('d');
  await takeDispatchMessage(intakeDepsFactory({ store: table, blobs, targetFor: () => target, now: () => clock }), {
    messageId: uniqueName('m'),
    body: JSON.stringify({ dispatchId, origin, target: 'scripted', task: { goal: 'review the plan' }, ...message }),
    senderId: 'test',
  });
  const state = await stateOf(dispatchId);
  return { dispatchId, runId: state.runId ?? '' };
}

/** A dispatch whose run the target reported final: its result is made in that write. */
async function finishedDispatch(origin: string, message: Record<string, unknown> = {}, result: Record<string, unknown> = { summary: 'looks good' }, deps?: ApiDeps): Promise<{ dispatchId: string; runId: string; resultId: string }> {
  const { dispatchId, runId } = await submittedDispatch(origin, message);
  const answer = await call('POST', `/runs/${runId}/events`, { dispatchId, seq: 1, type: 'completed', result }, origin, deps);
  expect(answer.status).toBe(202);
  return { dispatchId, runId, resultId: `r1~${dispatchId}` };
}

/**
 * `count` results of `origin` made straight on the table (a callback dispatch whose submission answer
 * was final: one write each, no API round trips), each ready a millisecond after the one before, all
 * before the test's clock. Their result ids, oldest first.
 */
async function readyResults(origin: string, count: number): Promise<string[]> {
  const ids = Array.from({ length: count }, (_, n) => `${uniqueName('d')}-${n}`);
  const queue = ids.map((dispatchId, n) => {
    const at = new Date(clock.getTime() - (count - n));
    const start = accepted(newDispatchFactory({ dispatchId, origin, target: 'scripted', writtenAt: at.toISOString() }), at);
    return submitted(start, { kind: 'accepted', runId: `r-${n}`, status: 'completed', requestId: `q-${n}` }, DEFAULT_RETRY_POLICY, at);
  });
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      for (let state = queue.shift(); state; state = queue.shift()) expect((await table.commit(notStored(stateOnly(state)), state)).kind).toBe('committed');
    }),
  );
  return ids.map((dispatchId) => `r1~${dispatchId}`);
}

const claim = (origin: string, body: Record<string, unknown> = {}) => call('POST', `/origins/${origin}/inbox/claim`, { mode: 'after_turn', ...body }, origin);
const settle = (origin: string, resultId: string, action: 'ack' | 'release' | 'renew', body: Record<string, unknown>) =>
  call('POST', `/origins/${origin}/inbox/${encodeURIComponent(resultId)}/${action}`, body, origin);
const resultIdsOf = (answer: Answer): string[] => ((answer.body.results ?? []) as Array<{ resultId: string }>).map((result) => result.resultId);

describe('claims: one winner, leases on their own clock', () => {
  it('gives each result to exactly one of 8 concurrent claimers', async () => {
    const origin = uniqueName('o');
    const made: Array<{ resultId: string }> = [];
    for (let index = 0; index < 5; index += 1) made.push(await finishedDispatch(origin));
    const answers = await Promise.all(Array.from({ length: 8 }, () => claim(origin, { max: 10 })));
    expect(answers.every((answer) => answer.status === 200)).toBe(true);
    const won = answers.flatMap(resultIdsOf);
    expect(won.sort()).toEqual(made.map((entry) => entry.resultId).sort());
    // Each claimer that won holds its own token; nobody else holds one of its results.
    const tokens = answers.filter((answer) => resultIdsOf(answer).length > 0).map((answer) => answer.body.claimToken);
    expect(new Set(tokens).size).toBe(tokens.length);
    expect(resultIdsOf(await claim(origin))).toEqual([]);
  });

  it('lets a new claimer win with a new token once a lease lapsed; the old token then loses, and nothing changes', async () => {
    const origin = uniqueName('o');
    const { dispatchId, resultId } = await finishedDispatch(origin);
    const first = await claim(origin, { leaseSeconds: 30 });
    expect(resultIdsOf(first)).toEqual([resultId]);
    tick(31);
    const second = await claim(origin, { leaseSeconds: 30 });
    expect(resultIdsOf(second)).toEqual([resultId]);
    expect(second.body.claimToken).not.toBe(first.body.claimToken);
    expect((second.body.results as Array<{ deliveryAttempts: number }>)[0]?.deliveryAttempts).toBe(1);
    const before = await writtenOf(dispatchId);
    const stale = await settle(origin, resultId, 'ack', { claimToken: first.body.claimToken });
    expect(stale.status).toBe(409);
    expect(errorCode(stale)).toBe('lease_lost');
    expect(await writtenOf(dispatchId)).toEqual(before);
    expect((await settle(origin, resultId, 'ack', { claimToken: second.body.claimToken })).status).toBe(200);
  });

  it('lets the holder renew (a steal after the first lease finds nothing) and refuses anyone else', async () => {
    const origin = uniqueName('o');
    const { resultId } = await finishedDispatch(origin);
    const held = await claim(origin, { leaseSeconds: 10 });
    tick(8);
    expect((await settle(origin, resultId, 'renew', { claimToken: 'not-the-token', leaseSeconds: 60 })).status).toBe(409);
    const renewed = await settle(origin, resultId, 'renew', { claimToken: held.body.claimToken, leaseSeconds: 60 });
    expect(renewed.status).toBe(200);
    tick(10);
    expect(resultIdsOf(await claim(origin))).toEqual([]);
    tick(60);
    expect(resultIdsOf(await claim(origin))).toEqual([resultId]);
  });

  it('refuses to renew a lease that lapsed, even before anyone claimed again', async () => {
    const origin = uniqueName('o');
    const { resultId } = await finishedDispatch(origin);
    const held = await claim(origin, { leaseSeconds: 10 });
    tick(11);
    const late = await settle(origin, resultId, 'renew', { claimToken: held.body.claimToken, leaseSeconds: 60 });
    expect(late.status).toBe(409);
    expect(errorCode(late)).toBe('lease_lost');
  });

  it('changes nothing for a wrong token, on ack or release', async () => {
    const origin = uniqueName('o');
    const { dispatchId, resultId } = await finishedDispatch(origin);
    await claim(origin);
    const before = await writtenOf(dispatchId);
    for (const action of ['ack', 'release'] as const) {
      const answer = await settle(origin, resultId, action, { claimToken: 'forged-token' });
      expect(answer.status).toBe(409);
      expect(errorCode(answer)).toBe('lease_lost');
    }
    expect(await writtenOf(dispatchId)).toEqual(before);
  });

  it('redelivers a result once after the lease when its claimer just went away', async () => {
    const origin = uniqueName('o');
    const { resultId } = await finishedDispatch(origin);
    expect(resultIdsOf(await claim(origin, { leaseSeconds: 20 }))).toEqual([resultId]);
    // The claimer crashes: no ack, no release.
    tick(21);
    const again = await Promise.all([claim(origin), claim(origin), claim(origin)]);
    expect(again.flatMap(resultIdsOf)).toEqual([resultId]);
    expect(resultIdsOf(await claim(origin))).toEqual([]);
  });

  it('claims a group all or none: one id held elsewhere → 409 and nothing claimed', async () => {
    const origin = uniqueName('o');
    const a = await finishedDispatch(origin);
    const b = await finishedDispatch(origin);
    expect(resultIdsOf(await claim(origin, { resultIds: [a.resultId] }))).toEqual([a.resultId]);
    const group = await claim(origin, { resultIds: [a.resultId, b.resultId] });
    expect(group.status).toBe(409);
    expect((await stateOf(b.dispatchId)).result?.state).toBe('pending');
    expect(resultIdsOf(await claim(origin, { resultIds: [b.resultId] }))).toEqual([b.resultId]);
    expect((await claim(origin, { resultIds: [`r1~${uniqueName('d')}`] })).status).toBe(404);
  });
});

describe('settlement: delivered once, dropped with its payload kept', () => {
  it('acks twice with one delivery, one receipt and one Result Delivered; the view shows confirmed delivery by the origin', async () => {
    const origin = uniqueName('o');
    const { dispatchId, resultId } = await finishedDispatch(origin);
    const held = await claim(origin);
    const claimed = await writtenOf(dispatchId);
    const first = await settle(origin, resultId, 'ack', { claimToken: held.body.claimToken });
    const delivered = await writtenOf(dispatchId);
    const second = await settle(origin, resultId, 'ack', { claimToken: held.body.claimToken });
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(second.body).toMatchObject({ state: 'delivered' });
    expect(await writtenOf(dispatchId)).toEqual(delivered);
    expect(delivered.version).toBe(claimed.version + 1);
    expect(eventsForState(claimed, delivered).map((event) => event.detailType)).toEqual(['Result Delivered']);
    const view = await call('GET', `/dispatches/${dispatchId}`, undefined, origin);
    expect(view.body.ownerDelivery).toEqual({ state: 'confirmed', receiptId: `ack:${resultId}`, basis: 'origin_ack', at: delivered.state.result?.deliveredAt, recordedBy: `origin:${origin}` });
    expect(view.body.artifactAcceptance).toMatchObject({ state: 'unverified' });
  });

  it('takes a release reason of up to 500 characters, a blank one included (older clients send an empty error message); longer is 422', async () => {
    const origin = uniqueName('o');
    const { resultId } = await finishedDispatch(origin, {}, { summary: 'the review' });
    const held = await claim(origin);
    expect((await settle(origin, resultId, 'release', { claimToken: held.body.claimToken, reason: 'x'.repeat(501) })).status).toBe(422);
    expect((await settle(origin, resultId, 'release', { claimToken: held.body.claimToken, reason: '' })).body).toMatchObject({ state: 'pending', deliveryAttempts: 1 });
  });

  it('drops a result released up to the cap, keeps its payload, never hands it out again, and lists it in attention', async () => {
    const origin = uniqueName('o');
    await table.putOriginSettings(origin, { maxDeliveryAttempts: 3 });
    const { dispatchId, resultId } = await finishedDispatch(origin, {}, { summary: 'the review' });
    for (let round = 1; round <= 3; round += 1) {
      const held = await claim(origin);
      expect(resultIdsOf(held)).toEqual([resultId]);
      const released = await settle(origin, resultId, 'release', { claimToken: held.body.claimToken, reason: 'busy' });
      expect(released.body).toMatchObject({ state: round < 3 ? 'pending' : 'dropped', deliveryAttempts: round });
    }
    expect(resultIdsOf(await claim(origin))).toEqual([]);
    expect((await claim(origin, { resultIds: [resultId] })).status).toBe(409);
    const dropped = await call('GET', `/origins/${origin}/inbox?state=dropped`, undefined, origin);
    expect(dropped.body.items).toMatchObject([{ resultId, summary: 'the review', droppedReason: 'attempts', deliveryAttempts: 3 }]);
    const listed = await eventually('the attention list', async () => {
      const page = await call('GET', '/attention?kind=result_dropped&limit=100', undefined, origin);
      return (page.body.items as Array<{ dispatchId: string }>).find((item) => item.dispatchId === dispatchId);
    });
    expect(listed).toMatchObject({ kind: 'result_dropped' });
    expect((await writtenOf(dispatchId)).changes).toEqual(['result_dropped']);
  });

  it('drops a pending result older than the origin TTL from the monitor, as expired, and lists it in attention', async () => {
    const origin = uniqueName('o');
    await table.putOriginSettings(origin, { resultTtlHours: 1 });
    const { dispatchId } = await finishedDispatch(origin);
    const monitor = { ...apiDeps(), store: table, dueIndex: new LedgerDueIndex(documents, tableName), pageSize: 100 };
    // The due time the stall watch held comes first: the monitor schedules the expiry then.
    tick(700);
    await monitorTick(monitor);
    expect((await stateOf(dispatchId)).result?.state).toBe('pending');
    tick(3600);
    await monitorTick(monitor);
    const state = await writtenOf(dispatchId);
    expect(state.state.result).toMatchObject({ state: 'dropped', droppedReason: 'expired' });
    expect(eventsForState(undefined, state).map((event) => event.detailType)).toEqual(['Result Dropped']);
    await eventually('the attention list', async () => {
      const page = await call('GET', '/attention?kind=result_dropped&limit=100', undefined, origin);
      return (page.body.items as Array<{ dispatchId: string }>).some((item) => item.dispatchId === dispatchId) || undefined;
    });
  });
});

describe('the monitor and a claimed result', () => {
  it('moves a claimed result past its TTL whose lease lives to the lease end: one write over five ticks, then dropped once when the lease lapses', async () => {
    const origin = uniqueName('o');
    await table.putOriginSettings(origin, { resultTtlHours: 1 });
    const { dispatchId, resultId } = await finishedDispatch(origin);
    const monitor = { ...apiDeps(), store: table, dueIndex: new LedgerDueIndex(documents, tableName), pageSize: 100 };
    tick(700);
    await monitorTick(monitor);
    // Claimed shortly before the TTL, for 15 minutes: the lease outlives the TTL.
    tick(2600);
    expect(resultIdsOf(await claim(origin, { leaseSeconds: 900 }))).toEqual([resultId]);
    const claimed = await writtenOf(dispatchId);
    tick(301);
    for (let round = 0; round < 5; round += 1) {
      await monitorTick(monitor);
      const state = await stateOf(dispatchId);
      expect(state.result?.state).toBe('claimed');
      // Every tick leaves it due in the future (was: due at its TTL, in the past — rewritten by every tick).
      expect(Date.parse(state.dueAt ?? '')).toBeGreaterThan(clock.getTime());
      tick(60);
    }
    expect((await writtenOf(dispatchId)).version - claimed.version).toBe(1);
    tick(900);
    await monitorTick(monitor);
    const lapsed = await writtenOf(dispatchId);
    expect(lapsed.state.result).toMatchObject({ state: 'dropped', droppedReason: 'expired', deliveryAttempts: 1 });
    expect(lapsed.version - claimed.version).toBe(2);
  });
});

describe('the inbox list', () => {
  it('lists results by state, oldest ready first, page by page from the inbox index; a forged cursor is 400', async () => {
    const origin = uniqueName('o');
    const made: string[] = [];
    for (let index = 0; index < 3; index += 1) {
      made.push((await finishedDispatch(origin)).resultId);
      tick(1);
    }
    await claim(origin, { resultIds: [made[1] ?? ''] });
    const first = await call('GET', `/origins/${origin}/inbox?state=pending&limit=1`, undefined, origin);
    expect((first.body.items as Array<{ resultId: string }>).map((item) => item.resultId)).toEqual([made[0]]);
    const second = await call('GET', `/origins/${origin}/inbox?state=pending&limit=1&cursor=${String(first.body.cursor)}`, undefined, origin);
    expect((second.body.items as Array<{ resultId: string }>).map((item) => item.resultId)).toEqual([made[2]]);
    const held = await call('GET', `/origins/${origin}/inbox?state=claimed`, undefined, origin);
    expect(held.body.items).toMatchObject([{ resultId: made[1], state: 'claimed' }]);
    // The claimed list pages by when the leases end (its entries sit apart from the pending ones in the index).
    await claim(origin, { resultIds: [made[0] ?? ''], leaseSeconds: 120 });
    const soonest = await call('GET', `/origins/${origin}/inbox?state=claimed&limit=1`, undefined, origin);
    expect((soonest.body.items as Array<{ resultId: string }>).map((item) => item.resultId)).toEqual([made[1]]);
    const later = await call('GET', `/origins/${origin}/inbox?state=claimed&limit=1&cursor=${String(soonest.body.cursor)}`, undefined, origin);
    expect((later.body.items as Array<{ resultId: string }>).map((item) => item.resultId)).toEqual([made[0]]);
    expect((await call('GET', `/origins/${origin}/inbox?state=pending`, undefined, origin)).body.items).toMatchObject([{ resultId: made[2] }]);
    expect((await call('GET', `/origins/${origin}/inbox?state=pending&cursor=bm90LW91cnM`, undefined, origin)).status).toBe(400);
    expect((await call('GET', `/origins/${origin}/inbox?state=lost`, undefined, origin)).status).toBe(400);
  });
});

describe('API answers: the inbox list and the origin history take only their own cursors', () => {
  it('answers 400 to a history cursor sent to the inbox list, an inbox cursor sent to the history, and a pending list’s cursor sent to the claimed list (was: read from the wrong place, entries skipped unseen)', async () => {
    const origin = uniqueName('o');
    for (let index = 0; index < 3; index += 1) {
      await finishedDispatch(origin);
      tick(1);
    }
    const history = await call('GET', `/origins/${origin}/dispatches?limit=1`, undefined, origin);
    const inbox = await call('GET', `/origins/${origin}/inbox?limit=1`, undefined, origin);
    expect([typeof history.body.cursor, typeof inbox.body.cursor]).toEqual(['string', 'string']);
    // Each cursor still pages its own list.
    expect((await call('GET', `/origins/${origin}/dispatches?limit=1&cursor=${String(history.body.cursor)}`, undefined, origin)).status).toBe(200);
    expect((await call('GET', `/origins/${origin}/inbox?limit=1&cursor=${String(inbox.body.cursor)}`, undefined, origin)).status).toBe(200);
    // The live lists (pending, claimed) read one index: each names its state in its cursor.
    const pending = await call('GET', `/origins/${origin}/inbox?state=pending&limit=1`, undefined, origin);
    expect(typeof pending.body.cursor).toBe('string');
    expect((await call('GET', `/origins/${origin}/inbox?state=pending&limit=1&cursor=${String(pending.body.cursor)}`, undefined, origin)).status).toBe(200);
    const crossed = [
      await call('GET', `/origins/${origin}/inbox?limit=1&cursor=${String(history.body.cursor)}`, undefined, origin),
      await call('GET', `/origins/${origin}/dispatches?limit=1&cursor=${String(inbox.body.cursor)}`, undefined, origin),
      await call('GET', `/origins/${origin}/inbox?state=claimed&limit=1&cursor=${String(pending.body.cursor)}`, undefined, origin),
    ];
    expect(crossed.map((answer) => [answer.status, errorCode(answer)])).toEqual([
      [400, 'malformed'],
      [400, 'malformed'],
      [400, 'malformed'],
    ]);
  });
});

describe('one rail for inject and after_turn', () => {
  it('hands an inject result to an inject claim, never an after_turn result; an unclaimed inject result goes to the next after_turn claim, once', async () => {
    const origin = uniqueName('o');
    const later = await finishedDispatch(origin, { resultDelivery: 'after_turn' });
    tick(1);
    const now = await finishedDispatch(origin, { resultDelivery: 'inject' });
    tick(1);
    const waiting = await finishedDispatch(origin, { resultDelivery: 'inject' });
    const turn = await claim(origin, { mode: 'inject', max: 1 });
    expect(resultIdsOf(turn)).toEqual([now.resultId]);
    expect((turn.body.results as Array<{ resultDelivery: string }>)[0]?.resultDelivery).toBe('inject');
    expect((await claim(origin, { mode: 'inject', resultIds: [later.resultId] })).status).toBe(409);
    // No second inject claim comes: the boundary's claim takes both what is left, oldest first.
    const boundary = await claim(origin, { mode: 'after_turn' });
    expect(resultIdsOf(boundary)).toEqual([later.resultId, waiting.resultId]);
    expect(resultIdsOf(await claim(origin, { mode: 'inject' }))).toEqual([]);
    expect(resultIdsOf(await claim(origin, { mode: 'after_turn' }))).toEqual([]);
  });
});

describe('who gets a result', () => {
  it("answers 404 for another origin's inbox and results; a detached dispatch makes no result", async () => {
    const origin = uniqueName('o');
    const { resultId } = await finishedDispatch(origin);
    expect((await call('POST', `/origins/${origin}/inbox/claim`, { mode: 'after_turn' }, 'someone-else')).status).toBe(404);
    expect((await call('POST', `/origins/someone-else/inbox/${encodeURIComponent(resultId)}/ack`, { claimToken: 'x' }, 'someone-else')).status).toBe(404);
    expect((await call('GET', `/origins/${origin}/inbox`, undefined, 'someone-else')).status).toBe(404);
    const detached = await finishedDispatch(origin, { delivery: { mode: 'detached' } });
    expect((await stateOf(detached.dispatchId)).result).toBeUndefined();
    expect(resultIdsOf(await claim(origin, { max: 50 }))).toEqual([resultId]);
  });

  it('gives a blocked callback dispatch (unknown_target) a result with its reason and no execution', async () => {
    const origin = uniqueName('o');
    const dispatchId = uniqueName('d');
    await takeDispatchMessage(intakeDepsFactory({ store: table, blobs, targetFor: () => target, now: () => clock }), {
      messageId: uniqueName('m'),
      body: JSON.stringify({ dispatchId, origin, target: 'nobody-registered', task: { goal: 'x' }, delivery: { mode: 'callback' } }),
      senderId: 'test',
    });
    const held = await claim(origin);
    expect(held.body.results).toMatchObject([{ resultId: `r1~${dispatchId}`, dispatchId, execution: { status: null }, blockedReason: expect.stringContaining('unknown_target') }]);
  });

  it('makes the result in the final write itself: a crash right after it leaves a claimable result', async () => {
    const origin = uniqueName('o');
    const { dispatchId, runId } = await submittedDispatch(origin);
    const crashing = overriding<LedgerStore>(table, {
      commit: async (from, next, ended) => {
        const written = await table.commit(from, next, ended);
        throw new Error(`process died after writing ${written.kind}`);
      },
    });
    const answer = await call('POST', `/runs/${runId}/events`, { dispatchId, seq: 1, type: 'completed', result: { summary: 'done' } }, origin, apiDeps({ store: crashing }));
    expect(answer.status).toBe(500);
    expect(resultIdsOf(await claim(origin))).toEqual([`r1~${dispatchId}`]);
  });

  it('drops a superseded attempt’s claimed result (its ack answers 409 superseded) and gives the new attempt its own', async () => {
    const origin = uniqueName('o');
    const { dispatchId, resultId } = await finishedDispatch(origin);
    const held = await claim(origin);
    const redispatched = await call('POST', `/dispatches/${dispatchId}/redispatch`, { reason: 'the review was wrong', force: true }, origin);
    expect(redispatched.status).toBe(202);
    const ack = await settle(origin, resultId, 'ack', { claimToken: held.body.claimToken });
    expect(ack.status).toBe(409);
    expect(errorCode(ack)).toBe('superseded');
    const second = await stateOf(dispatchId);
    const done = await call('POST', `/runs/${second.runId}/events`, { dispatchId, seq: 1, type: 'completed', result: { summary: 'second look' } }, origin);
    expect(done.status).toBe(202);
    const next = await claim(origin);
    expect(next.body.results).toMatchObject([{ resultId: `r2~${dispatchId}`, attempt: 2, summary: 'second look' }]);
  });
});

describe('the bounded carrier', () => {
  const big = { report: 'x'.repeat(20_000), sections: Array.from({ length: 20 }, (_, index) => ({ index, text: `section ${index}` })) };

  it('answers 5xx and records nothing when the body cannot be stored; the retry makes one result with a preview and a ref', async () => {
    const origin = uniqueName('o');
    const { dispatchId, runId } = await submittedDispatch(origin);
    const refusing = overriding<BlobStore>(blobs, { put: async () => Promise.reject(new Error('S3 refused: AccessDenied')) });
    const failed = await call('POST', `/runs/${runId}/events`, { dispatchId, seq: 3, type: 'completed', result: { summary: 'big', body: big } }, origin, apiDeps({ blobs: refusing }));
    expect(failed.status).toBeGreaterThanOrEqual(500);
    expect((await stateOf(dispatchId)).execution.status).toBe('running');
    expect(resultIdsOf(await claim(origin))).toEqual([]);
    const retried = await call('POST', `/runs/${runId}/events`, { dispatchId, seq: 3, type: 'completed', result: { summary: 'big', body: big } }, origin);
    expect(retried.status).toBe(202);
    const held = await claim(origin);
    const [result] = held.body.results as Array<{ body?: unknown; preview?: string; bodyRef?: string }>;
    expect(result?.body).toBeUndefined();
    expect(Buffer.byteLength(result?.preview ?? '', 'utf8')).toBeLessThanOrEqual(4096);
    expect(result?.preview?.startsWith('{"report":"xxx')).toBe(true);
    expect(result?.bodyRef).toBe(`/origins/${origin}/inbox/${encodeURIComponent(`r1~${dispatchId}`)}/body`);
    const whole = await call('GET', result?.bodyRef ?? '', undefined, origin);
    expect(whole.body).toEqual(big);
  });

  it('attaches the body of a final report that comes after a lookup recorded the final status (regression: the body was dropped as stale)', async () => {
    const origin = uniqueName('o');
    const { dispatchId, runId } = await submittedDispatch(origin);
    target.lookupAnswer = { kind: 'found', run: { runId, status: 'completed', result: { summary: 'found by lookup' } } };
    try {
      const refreshed = await call('GET', `/dispatches/${dispatchId}?refresh=true`, undefined, origin);
      expect(refreshed.body.execution).toMatchObject({ status: 'completed' });
    } finally {
      target.lookupAnswer = { kind: 'unavailable', reason: 'HTTP 503' };
    }
    const report = await call('POST', `/runs/${runId}/events`, { dispatchId, seq: 4, type: 'completed', result: { summary: 'done', body: { verdict: 'ship it' } } }, origin);
    expect(report.status).toBe(202);
    expect((await claim(origin)).body.results).toMatchObject([{ resultId: `r1~${dispatchId}`, body: { verdict: 'ship it' } }]);
    const repeat = await call('POST', `/runs/${runId}/events`, { dispatchId, seq: 4, type: 'completed', result: { body: { verdict: 'changed' } } }, origin);
    expect(repeat.body).toEqual({ applied: false });
  });

  it('carries a small body inline, and refuses one over 256 KB with 413', async () => {
    const origin = uniqueName('o');
    await finishedDispatch(origin, {}, { summary: 'small', body: { verdict: 'approve', notes: ['ok'] } });
    expect((await claim(origin)).body.results).toMatchObject([{ body: { verdict: 'approve', notes: ['ok'] }, summary: 'small' }]);
    const { dispatchId, runId } = await submittedDispatch(origin);
    const huge = await call('POST', `/runs/${runId}/events`, { dispatchId, seq: 1, type: 'completed', result: { body: { blob: 'y'.repeat(256 * 1024) } } }, origin);
    expect(huge.status).toBe(413);
  });
});

describe('what a claim costs', () => {
  it('reads at most 5 units for an empty 20-second long poll, and validates its bounds', async () => {
    const origin = uniqueName('o');
    const before = meter.snapshot();
    const started = clock.getTime();
    const empty = await claim(origin, { waitSeconds: 20 });
    const spent = meter.since(before);
    expect(empty.body).toEqual({ claimToken: null, leaseExpiresAt: null, results: [] });
    expect(clock.getTime() - started).toBeGreaterThanOrEqual(20_000);
    // 5 passes (0, 5, 10, 15, 20 s) × 2 keys (inject and after_turn, 1 shard), an empty read each; no settings read.
    expect(spent.requests).toBe(10);
    expect(spent.readUnits).toBeGreaterThan(0);
    expect(spent.readUnits).toBeLessThanOrEqual(5);
    expect(spent.writeUnits).toBe(0);
    for (const bad of [{ max: 51 }, { leaseSeconds: 4 }, { waitSeconds: 21 }, { max: 0 }]) expect((await claim(origin, bad)).status).toBe(422);
  });

  it('finds pending results however many are claimed ahead of them (CONTRACT §10 V3: 200 held leases once hid them)', async () => {
    const origin = uniqueName('o');
    const made = await readyResults(origin, 205);
    const held: string[] = [];
    for (let round = 0; round < 4; round += 1) {
      const taken = await claim(origin, { max: 50, leaseSeconds: 900 });
      expect(taken.status).toBe(200);
      held.push(...resultIdsOf(taken));
    }
    expect(held).toEqual(made.slice(0, 200));
    const before = meter.snapshot();
    const rest = await claim(origin, { max: 50, leaseSeconds: 900 });
    const spent = meter.since(before);
    expect(resultIdsOf(rest)).toEqual(made.slice(200));
    // What it read: the five it took, never the 200 held (a read of each held state was ~1 unit apiece).
    expect(spent.readUnits).toBeLessThanOrEqual(20);
    // A renewed lease stays out of the way; leases that lapse are claimable again on their own clock.
    tick(600);
    const [first = ''] = held;
    const token = (await stateOf(first.slice(first.indexOf('~') + 1))).result?.claimToken;
    expect((await settle(origin, first, 'renew', { claimToken: token, leaseSeconds: 900 })).status).toBe(200);
    expect(resultIdsOf(await claim(origin))).toEqual([]);
    tick(301);
    const lapsed = resultIdsOf(await claim(origin, { max: 50 }));
    expect(lapsed).toHaveLength(50);
    expect(lapsed).not.toContain(first);
  });

  it('reads at most 5 units for an empty 20-second long poll with 200 results claimed', async () => {
    const origin = uniqueName('o');
    await readyResults(origin, 200);
    for (let round = 0; round < 4; round += 1) expect(resultIdsOf(await claim(origin, { max: 50, leaseSeconds: 900 }))).toHaveLength(50);
    const before = meter.snapshot();
    const started = clock.getTime();
    const empty = await claim(origin, { waitSeconds: 20 });
    const spent = meter.since(before);
    expect(empty.body).toEqual({ claimToken: null, leaseExpiresAt: null, results: [] });
    expect(clock.getTime() - started).toBeGreaterThanOrEqual(20_000);
    expect(spent.readUnits).toBeLessThanOrEqual(5);
    expect(spent.byOperation.GetItem?.requests ?? 0).toBe(0);
    expect(spent.writeUnits).toBe(0);
  });
});
