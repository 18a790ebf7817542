import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeItem } from '../../shared/adapters/ledger-table.js';
import { operatorReceiptPut, operatorReceiptsQuery } from '../../shared/adapters/ledger-commands.js';
import { ApiError, type ApiRequest } from '../../shared/api/http.js';
import { route, type ApiDeps } from '../../shared/api/routes.js';
import { operatorReceipt, OperatorReceiptBody, type OperatorReceipt } from '../../shared/dispatch/receipts.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import { stateOnly, type DispatchState } from '../../shared/dispatch/state.js';
import { accepted, submitted, type NewDispatch } from '../../shared/dispatch/transitions/lifecycle.js';
import { advance } from '../support/states.js';
import { dispatchView } from '../../shared/dispatch/view.js';
import { parseDetail } from '../../shared/events/catalog.js';
import { eventForOperatorReceipt, eventsForStreamChange, type StreamItem } from '../../shared/events/derive.js';
import { newDispatchFactory, NOW, operatorReceiptBodyFactory } from '../support/factories.js';
import { MemoryBlobs } from '../support/memory-blobs.js';
import { MemoryStore } from '../support/memory-store.js';

const later = (seconds: number): Date => new Date(NOW.getTime() + seconds * 1000);

const submittedState = (overrides: Partial<NewDispatch> = {}): DispatchState =>
  submitted(accepted(newDispatchFactory(overrides), NOW), { kind: 'accepted', runId: 'r-1', status: 'running', requestId: 'req-1' }, DEFAULT_RETRY_POLICY, NOW);

/** A run that completed natively with a result, its expected evidence found: handled, dispatch_completed. */
function handledState(overrides: Partial<NewDispatch> = {}): DispatchState {
  const run = submittedState({ expectedCount: 1, ...overrides });
  const done = advance(stateOnly(run), 'completed', later(10), {
    execution: { ...run.execution, status: 'completed', nativeStatus: 'completed', completedAt: later(10).toISOString(), result: { summary: 'the report is written' } },
  });
  return stateOnly(advance(stateOnly(done), 'handled', later(11), {
    evidence: { ...done.evidence, outcome: 'handled' },
    receipts: [...done.receipts, { event: 'dispatch_completed', at: later(11).toISOString(), attempt: 1, runId: 'r-1', evidenceCount: 1 }],
  }));
}

const receiptOf = (overrides: Partial<OperatorReceiptBody> = {}, at = NOW, dispatch = { dispatchId: 'd-2026-0001', origin: 'planner' }): OperatorReceipt =>
  operatorReceipt(dispatch, operatorReceiptBodyFactory(overrides), at);
const acceptance = (state: 'accepted' | 'rejected' = 'accepted', receiptId = 'rc-accept', at = NOW) => receiptOf({ receiptId, kind: 'artifact_acceptance', state }, at);
const delivery = (state: 'confirmed' | 'failed' = 'confirmed', receiptId = 'rc-deliver', at = NOW) =>
  receiptOf({ receiptId, kind: 'owner_delivery', state, evidenceRef: 'out/report.md' }, at);

describe('OperatorReceiptBody', () => {
  const valid = (overrides: Record<string, unknown>) => OperatorReceiptBody().safeParse({ ...operatorReceiptBodyFactory(), ...overrides }).success;

  it('accepts accepted|rejected for artifact acceptance and confirmed|failed for owner delivery', () => {
    for (const state of ['accepted', 'rejected']) expect(valid({ kind: 'artifact_acceptance', state }), state).toBe(true);
    for (const state of ['confirmed', 'failed']) expect(valid({ kind: 'owner_delivery', state, evidenceRef: 'out/a.md' }), state).toBe(true);
  });

  it('refuses a state of the other kind, or none of them, whatever else is right', () => {
    for (const state of ['confirmed', 'failed', 'done', '']) expect(valid({ kind: 'artifact_acceptance', state }), state).toBe(false);
    for (const state of ['accepted', 'rejected', 'delivered']) expect(valid({ kind: 'owner_delivery', state, evidenceRef: 'out/a.md' }), state).toBe(false);
    expect(valid({ kind: 'acceptance' })).toBe(false);
  });

  it('refuses a confirmed delivery without a non-blank evidenceRef, and allows a failed one without', () => {
    for (const evidenceRef of [undefined, null, '', '   ']) {
      expect(valid({ kind: 'owner_delivery', state: 'confirmed', evidenceRef }), JSON.stringify(evidenceRef)).toBe(false);
    }
    expect(valid({ kind: 'owner_delivery', state: 'failed' })).toBe(true);
    expect(valid({ kind: 'owner_delivery', state: 'confirmed', evidenceRef: 'out/report.md' })).toBe(true);
  });

  it('refuses an unsafe evidenceRef whatever the kind (CONTRACT §6)', () => {
    for (const evidenceRef of ['../x', '/abs', 'a\\b', 'a/./b', '%2e%2e/x', 'a\u0000b', 'a//b', 'x'.repeat(513)]) {
      expect(valid({ kind: 'owner_delivery', state: 'confirmed', evidenceRef }), evidenceRef.slice(0, 20)).toBe(false);
      expect(valid({ kind: 'artifact_acceptance', state: 'accepted', evidenceRef }), evidenceRef.slice(0, 20)).toBe(false);
    }
  });

  it('bounds receiptId, verifiedBy and note, and refuses fields it does not know', () => {
    for (const receiptId of ['', 'a b', 'a/b', 'x'.repeat(129)]) expect(valid({ receiptId }), receiptId.slice(0, 20)).toBe(false);
    expect(valid({ receiptId: 'A-z.0_9:x'.padEnd(128, 'x') })).toBe(true);
    for (const verifiedBy of ['', '   ', 'x'.repeat(129)]) expect(valid({ verifiedBy }), verifiedBy.slice(0, 20)).toBe(false);
    expect(valid({ note: 'x'.repeat(1000) })).toBe(true);
    expect(valid({ note: 'x'.repeat(1001) })).toBe(false);
    expect(valid({ runId: '' })).toBe(false);
    expect(valid({ basis: 'operator_attestation' })).toBe(false);
  });
});

describe('operatorReceipt', () => {
  it('binds the receipt to the dispatch and origin, on the basis of an operator attestation, at the time recorded', () => {
    expect(receiptOf({ note: 'looked at it' })).toEqual({
      receiptId: 'rc-1',
      dispatchId: 'd-2026-0001',
      origin: 'planner',
      runId: 'r-1',
      kind: 'artifact_acceptance',
      state: 'accepted',
      evidenceRef: null,
      verifiedBy: 'alice@ops',
      note: 'looked at it',
      basis: 'operator_attestation',
      recordedAt: NOW.toISOString(),
      payloadHash: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
    });
  });

  it('gives an identical retry the same payload hash, later or with an absent field sent as null', () => {
    const first = receiptOf({}, NOW);
    expect(receiptOf({}, later(60)).payloadHash).toBe(first.payloadHash);
    expect(receiptOf({ note: null, evidenceRef: null }).payloadHash).toBe(first.payloadHash);
  });

  it('gives any change of a submitted field another payload hash', () => {
    const base = receiptOf();
    fc.assert(
      fc.property(
        fc.oneof(
          fc.record({ runId: fc.constantFrom('r-2', 'r-1 ') }),
          fc.record({ state: fc.constant<'rejected'>('rejected') }),
          fc.record({ verifiedBy: fc.string({ minLength: 1, maxLength: 20 }).filter((text) => text !== 'alice@ops') }),
          fc.record({ note: fc.string({ maxLength: 20 }) }),
          fc.record({ evidenceRef: fc.constantFrom('out/a.md', 'b') }),
        ),
        (change) => {
          expect(receiptOf(change).payloadHash).not.toBe(base.payloadHash);
        },
      ),
    );
  });
});

function request(method: string, rawPath: string, origin: string | undefined, body?: unknown): ApiRequest {
  return {
    method,
    rawPath,
    query: {},
    headers: origin ? { 'x-ledger-origin': origin } : {},
    body: body === undefined ? undefined : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)),
    iamUserId: undefined,
  };
}

function apiDeps(store: MemoryStore, now: () => Date = () => NOW): ApiDeps {
  return {
    feeds: store,
    inbox: store,
    store,
    principals: new MemoryStore(),
    principalMode: 'open',
    blobs: new MemoryBlobs(),
    targetFor: () => {
      throw new Error('no target in receipt route tests');
    },
    callbackUrl: 'http://127.0.0.1:9',
    retryPolicy: DEFAULT_RETRY_POLICY,
    now,
    claimSeconds: 60,
  };
}

async function answer(deps: ApiDeps, req: ApiRequest): Promise<{ status: number; body: unknown }> {
  try {
    const response = await route(deps, req);
    return { status: response.statusCode, body: JSON.parse(response.body) as unknown };
  } catch (error) {
    if (error instanceof ApiError) return { status: error.statusCode, body: { code: error.code } };
    throw error;
  }
}

describe('POST /dispatches/{dispatchId}/receipts', () => {
  const path = '/dispatches/d-2026-0001/receipts';
  const withDispatch = (state: DispatchState = submittedState()): MemoryStore => {
    const store = new MemoryStore();
    store.states.set(state.dispatchId, state);
    return store;
  };

  it('records a new receipt (201), answers an identical retry with the stored one (200), and never touches the state', async () => {
    const store = withDispatch();
    const before = store.states.get('d-2026-0001');
    let clock = NOW;
    const deps = apiDeps(store, () => clock);

    const first = await answer(deps, request('POST', path, 'planner', operatorReceiptBodyFactory()));
    clock = later(30);
    const retry = await answer(deps, request('POST', path, 'planner', { ...operatorReceiptBodyFactory(), note: null }));

    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ receiptId: 'rc-1', basis: 'operator_attestation', recordedAt: NOW.toISOString() });
    expect(retry).toEqual({ status: 200, body: first.body });
    expect(store.states.get('d-2026-0001')).toBe(before);
  });

  it('answers 409 to the same receiptId with any change, and keeps the original', async () => {
    const store = withDispatch();
    const deps = apiDeps(store);
    const first = await answer(deps, request('POST', path, 'planner', operatorReceiptBodyFactory()));
    const changed = await answer(deps, request('POST', path, 'planner', operatorReceiptBodyFactory({ state: 'rejected' })));

    expect(changed).toEqual({ status: 409, body: { code: 'conflict' } });
    expect(await store.listOperatorReceipts('d-2026-0001')).toEqual([first.body]);
  });

  it('answers 404 for a run that is not this dispatch’s, and takes a superseded run of it', async () => {
    const superseded: DispatchState = { ...submittedState(), runId: 'r-2', attempt: 2, supersededRuns: ['r-1'] };
    const deps = apiDeps(withDispatch(superseded));

    expect((await answer(deps, request('POST', path, 'planner', operatorReceiptBodyFactory({ runId: 'r-9' })))).status).toBe(404);
    expect((await answer(deps, request('POST', path, 'planner', operatorReceiptBodyFactory({ receiptId: 'rc-old', runId: 'r-1' })))).status).toBe(201);
    expect((await answer(deps, request('POST', path, 'planner', operatorReceiptBodyFactory({ receiptId: 'rc-new', runId: 'r-2' })))).status).toBe(201);
  });

  it('answers the same 404 to another origin, to no origin and for an unknown dispatch, and records nothing', async () => {
    const store = withDispatch();
    const deps = apiDeps(store);
    const answers = await Promise.all([
      answer(deps, request('POST', path, 'billing', operatorReceiptBodyFactory())),
      answer(deps, request('POST', path, undefined, operatorReceiptBodyFactory())),
      answer(deps, request('POST', '/dispatches/d-unknown/receipts', 'planner', operatorReceiptBodyFactory())),
    ]);
    expect(answers).toEqual([0, 1, 2].map(() => ({ status: 404, body: { code: 'not_found' } })));
    expect(store.operatorReceipts.size).toBe(0);
  });

  it('answers 422 for a confirmed delivery without evidenceRef or with an unsafe one, 400 for a body that is not JSON', async () => {
    const store = withDispatch();
    const deps = apiDeps(store);
    const statuses = await Promise.all([
      answer(deps, request('POST', path, 'planner', operatorReceiptBodyFactory({ kind: 'owner_delivery', state: 'confirmed' }))),
      answer(deps, request('POST', path, 'planner', operatorReceiptBodyFactory({ kind: 'owner_delivery', state: 'confirmed', evidenceRef: ' ' }))),
      answer(deps, request('POST', path, 'planner', operatorReceiptBodyFactory({ kind: 'owner_delivery', state: 'confirmed', evidenceRef: '../x' }))),
      answer(deps, request('POST', path, 'planner', operatorReceiptBodyFactory({ kind: 'artifact_acceptance', state: 'confirmed' }))),
      answer(deps, request('POST', path, 'planner', '{"receiptId": ')),
      answer(deps, request('POST', path, 'planner')),
    ]);
    expect(statuses.map(({ status }) => status)).toEqual([422, 422, 422, 422, 400, 400]);
    expect(store.operatorReceipts.size).toBe(0);
  });

  it('shows a recorded receipt in the dispatch view', async () => {
    const store = withDispatch();
    const deps = apiDeps(store);
    const recorded = await answer(deps, request('POST', path, 'planner', operatorReceiptBodyFactory({ kind: 'owner_delivery', state: 'confirmed', evidenceRef: 'out/report.md' })));
    const view = await answer(deps, request('GET', '/dispatches/d-2026-0001', 'planner'));
    expect(view.body).toMatchObject({
      operatorReceipts: [recorded.body],
      ownerDelivery: { state: 'confirmed', receiptId: 'rc-1', basis: 'operator_attestation' },
      artifactAcceptance: { state: 'unverified', receiptId: null, basis: null },
    });
  });
});

describe('trust boundaries: a receipt records who recorded it (recordedBy, CONTRACT §5 v2)', () => {
  const path = '/dispatches/d-2026-0001/receipts';
  const enforced = (store: MemoryStore): ApiDeps => {
    const principals = new MemoryStore();
    principals.principals.set('AROAPLANNER', { role: 'origin', origin: 'planner' });
    return { ...apiDeps(store), principals, principalMode: 'enforce' };
  };
  const signed = (iamUserId: string, body: unknown): ApiRequest => ({ ...request('POST', path, undefined, body), iamUserId });
  const withDispatch = (): MemoryStore => {
    const store = new MemoryStore();
    store.states.set('d-2026-0001', submittedState());
    return store;
  };

  it('stores the caller\'s IAM principal id in AWS, whatever free text verifiedBy says', async () => {
    const store = withDispatch();
    const first = await answer(enforced(store), signed('AROAPLANNER:alice', operatorReceiptBodyFactory({ verifiedBy: 'the CEO' })));
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ verifiedBy: 'the CEO', recordedBy: 'AROAPLANNER:alice' });
    expect(await store.listOperatorReceipts('d-2026-0001')).toEqual([first.body]);
  });

  it('stores local:<origin> on the local platform, where the origin is the X-Ledger-Origin header', async () => {
    const first = await answer(apiDeps(withDispatch()), request('POST', path, 'planner', operatorReceiptBodyFactory()));
    expect(first.body).toMatchObject({ recordedBy: 'local:planner' });
  });

  it('keeps recordedBy out of the payload hash: a retry from another session is the identical retry, and the first recorder stands', async () => {
    const store = withDispatch();
    const deps = enforced(store);
    const first = await answer(deps, signed('AROAPLANNER:alice', operatorReceiptBodyFactory()));
    const retry = await answer(deps, signed('AROAPLANNER:alice-renewed', operatorReceiptBodyFactory()));
    const changed = await answer(deps, signed('AROAPLANNER:alice-renewed', operatorReceiptBodyFactory({ state: 'rejected' })));
    expect(retry).toEqual({ status: 200, body: first.body });
    expect(changed.status).toBe(409);
    const plain = receiptOf();
    expect(operatorReceipt({ dispatchId: 'd-2026-0001', origin: 'planner' }, operatorReceiptBodyFactory(), NOW, 'AROAPLANNER:alice').payloadHash).toBe(plain.payloadHash);
  });

  it('passes the audit with recordedBy, and without it for receipts stored before v2; a malformed one is an audit failure', () => {
    // As stored: recordedBy beside the fields the hash covers.
    const recorded: OperatorReceipt = { ...receiptOf(), recordedBy: 'AROAPLANNER:alice' };
    const legacy = receiptOf({ receiptId: 'rc-legacy' });
    const view = dispatchView(handledState(), undefined, undefined, [recorded, legacy]);
    expect(view.gate.reasons.filter((reason) => reason.startsWith('audit_failure:'))).toEqual([]);
    expect(view.operatorReceipts).toEqual([recorded, legacy]);
    const blank = dispatchView(handledState(), undefined, undefined, [{ ...recorded, recordedBy: '' }]);
    expect(blank.gate.reasons.some((reason) => reason.startsWith('audit_failure: operator receipt rc-1'))).toBe(true);
  });
});

describe('the three claims in the dispatch view', () => {
  it('keeps a completed run with a result and callback delivery unverified and unconfirmed', () => {
    const view = dispatchView(handledState({ deliveryMode: 'callback' }), undefined, undefined, []);
    expect(view.execution).toMatchObject({ status: 'completed', result: { summary: 'the report is written' } });
    expect(view.artifactAcceptance).toEqual({ state: 'unverified', receiptId: null, basis: null });
    expect(view.ownerDelivery).toEqual({ state: 'unconfirmed', receiptId: null, basis: null });
  });

  it('leaves delivery unconfirmed when the artifact is accepted', () => {
    const view = dispatchView(handledState(), undefined, undefined, [acceptance('accepted')]);
    expect(view.artifactAcceptance).toEqual({ state: 'accepted', receiptId: 'rc-accept', basis: 'operator_attestation' });
    expect(view.ownerDelivery).toEqual({ state: 'unconfirmed', receiptId: null, basis: null });
  });

  it('leaves acceptance unverified when delivery is confirmed', () => {
    const view = dispatchView(handledState(), undefined, undefined, [delivery('confirmed')]);
    expect(view.ownerDelivery).toEqual({ state: 'confirmed', receiptId: 'rc-deliver', basis: 'operator_attestation' });
    expect(view.artifactAcceptance).toEqual({ state: 'unverified', receiptId: null, basis: null });
  });

  it('reports delivery not_required for a detached dispatch, whatever a delivery receipt says', () => {
    const view = dispatchView(handledState({ deliveryMode: 'detached' }), undefined, undefined, [delivery('failed'), acceptance('rejected')]);
    expect(view.ownerDelivery).toEqual({ state: 'not_required', receiptId: null, basis: null });
    expect(view.artifactAcceptance).toMatchObject({ state: 'rejected', receiptId: 'rc-accept' });
    expect(view.operatorReceipts).toHaveLength(2);
  });

  it('reads each claim from the latest receipt of its kind, and lists every receipt oldest first', () => {
    const receipts = [acceptance('rejected', 'rc-b', later(20)), delivery('failed', 'rc-d', later(30)), acceptance('accepted', 'rc-a', later(10)), delivery('confirmed', 'rc-c', later(5))];
    const view = dispatchView(handledState(), undefined, undefined, receipts);
    expect(view.operatorReceipts.map((receipt) => receipt.receiptId)).toEqual(['rc-c', 'rc-a', 'rc-b', 'rc-d']);
    expect(view.artifactAcceptance).toMatchObject({ state: 'rejected', receiptId: 'rc-b' });
    expect(view.ownerDelivery).toMatchObject({ state: 'failed', receiptId: 'rc-d' });
  });

  it('never lets an operator receipt change execution, evidence or the gate', () => {
    const state = handledState();
    const without = dispatchView(state, undefined, undefined, []);
    const withReceipts = dispatchView(state, undefined, undefined, [acceptance('rejected'), delivery('failed')]);
    expect(withReceipts.execution).toEqual(without.execution);
    expect(withReceipts.evidence).toEqual(without.evidence);
    expect(withReceipts.gate).toEqual(without.gate);
    expect(withReceipts.receipts).toEqual(without.receipts);
  });
});

describe('the audit of stored operator receipts', () => {
  it('reports an audit failure and lists the receipt when a stored one was tampered with (its hash no longer matches)', () => {
    const tampered: OperatorReceipt = { ...acceptance('rejected'), state: 'accepted' };
    const view = dispatchView(handledState(), undefined, undefined, [tampered]);
    expect(view.gate.satisfied).toBe(false);
    expect(view.gate.reasons).toHaveLength(1);
    expect(view.gate.reasons[0]).toMatch(/^audit_failure: operator receipt rc-accept failed validation: payloadHash/);
    expect(view.operatorReceipts).toEqual([tampered]);
    // A claim is never read from a receipt that fails validation.
    expect(view.artifactAcceptance.state).toBe('unverified');
    expect(view.unknowns.join(' ')).toContain('failed validation');
  });

  it('reports an audit failure for every kind of corruption, never skipping one', () => {
    const good = delivery('confirmed');
    const corrupted: OperatorReceipt[] = [
      { ...good, receiptId: 'rc-no-ref', evidenceRef: null },
      { ...good, receiptId: 'rc-kind', kind: 'artifact_acceptance' },
      { ...good, receiptId: 'rc-when', recordedAt: 'yesterday' },
      { ...good, receiptId: 'rc-other', dispatchId: 'd-other' },
    ];
    const view = dispatchView(handledState(), undefined, undefined, [good, ...corrupted]);
    const audits = view.gate.reasons.filter((reason) => reason.startsWith('audit_failure:'));
    expect(audits).toHaveLength(corrupted.length);
    for (const receipt of corrupted) expect(audits.some((reason) => reason.includes(`operator receipt ${receipt.receiptId} `)), receipt.receiptId).toBe(true);
    expect(view.operatorReceipts).toHaveLength(5);
    expect(view.ownerDelivery).toMatchObject({ state: 'confirmed', receiptId: 'rc-deliver' });
  });
});

describe('Receipt Recorded', () => {
  const receipt = delivery('confirmed');
  const stored = decodeItem(operatorReceiptPut('ledger', receipt, 86_400).Item);
  const other: StreamItem = { kind: 'other' };

  it('is published once, valid against its schema, from the insert of a receipt item', () => {
    const events = eventsForStreamChange({ sequenceNumber: '1', eventName: 'INSERT', oldItem: other, newItem: stored });
    expect(events).toEqual([
      {
        detailType: 'Receipt Recorded',
        detail: {
          eventId: expect.stringMatching(/^[0-9a-f]{32}$/),
          at: receipt.recordedAt,
          dispatchId: receipt.dispatchId,
          origin: 'planner',
          receiptId: 'rc-deliver',
          kind: 'owner_delivery',
          state: 'confirmed',
        },
      },
    ]);
    for (const event of events) expect(parseDetail(event).error).toBeUndefined();
  });

  it('keeps one eventId per receipt, however often it is derived, and another for another receipt', () => {
    expect(eventForOperatorReceipt(receipt).detail.eventId).toBe(eventForOperatorReceipt({ ...receipt }).detail.eventId);
    expect(eventForOperatorReceipt(acceptance()).detail.eventId).not.toBe(eventForOperatorReceipt(receipt).detail.eventId);
    const elsewhere = receiptOf({ receiptId: 'rc-deliver' }, NOW, { dispatchId: 'd-other', origin: 'planner' });
    expect(eventForOperatorReceipt(elsewhere).detail.eventId).not.toBe(eventForOperatorReceipt(receipt).detail.eventId);
  });

  it('publishes nothing for a modified or removed receipt item', () => {
    expect(eventsForStreamChange({ sequenceNumber: '2', eventName: 'MODIFY', oldItem: stored, newItem: stored })).toEqual([]);
    expect(eventsForStreamChange({ sequenceNumber: '3', eventName: 'REMOVE', oldItem: stored, newItem: other })).toEqual([]);
  });
});

describe('the operator receipt item of the ledger table', () => {
  it('is written once per dispatch and receiptId, returning the stored item when it exists', () => {
    const params = operatorReceiptPut('ledger', acceptance(), 86_400);
    expect(params).toMatchObject({
      TableName: 'ledger',
      Item: { pk: 'D#d-2026-0001', sk: 'OR#rc-accept', expiresAt: Math.floor(NOW.getTime() / 1000) + 86_400 },
      ConditionExpression: 'attribute_not_exists(pk)',
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    });
    // Null fields cost bytes on every write: left out, restored on read.
    expect(params.Item).not.toHaveProperty('note');
    expect(params.Item).not.toHaveProperty('evidenceRef');
  });

  it('decodes back to the receipt it was written from (stream image or read)', () => {
    for (const receipt of [acceptance(), delivery(), receiptOf({ note: 'checked by hand' })]) {
      expect(decodeItem(operatorReceiptPut('ledger', receipt, 86_400).Item)).toEqual({ kind: 'operator_receipt', receipt });
    }
  });

  it('is listed by one strongly consistent query of the dispatch’s partition', () => {
    expect(operatorReceiptsQuery('ledger', 'd-2026-0001')).toMatchObject({
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
      ExpressionAttributeValues: { ':pk': 'D#d-2026-0001', ':prefix': 'OR#' },
      ConsistentRead: true,
    });
  });
});
