import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import { NO_EXECUTION, stateOnly, type ChangeKind, type DispatchState, type NextState, type ResultRecord } from '../../shared/dispatch/state.js';
import { accepted, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { blocked } from '../../shared/dispatch/transitions/core.js';
import { advance } from '../support/states.js';
import type { Rejection } from '../../shared/dispatch/records.js';
import { parseDetail, type DetailType, type LedgerEvent } from '../../shared/events/catalog.js';
import { publishedDetailTypes } from '../../shared/events/profile.js';
import {
  DETAIL_TYPE_OF_CHANGE,
  eventForRejection,
  eventIdOf,
  eventsForState,
  eventsForStreamChange,
  publishStreamBatch,
  PublishIncompleteError,
  UndescribableChangeError,
  type StateVersion,
  type StreamChange,
} from '../../shared/events/derive.js';
import { newDispatchFactory, NOW } from '../support/factories.js';

const later = (seconds: number): Date => new Date(NOW.getTime() + seconds * 1000);

/** The first stored version of a dispatch the target took: changes ["accepted", "submitted"]. */
const submittedStateFactory = (overrides: Parameters<typeof newDispatchFactory>[0] = {}): NextState =>
  submitted(accepted(newDispatchFactory(overrides), NOW), { kind: 'accepted', runId: 'r-1', status: 'running', requestId: 'req-1' }, DEFAULT_RETRY_POLICY, NOW);

/** A version as the table holds it: the state alone, the version that wrote it and what that write changed. */
const stored = (next: NextState, version: number): StateVersion => ({ state: stateOnly(next), version, changes: next.changes });
/** The same version as a stream record's image of the state item. */
const stateImage = (next: NextState, version: number): StreamChange['newItem'] => ({ kind: 'state', ...stored(next, version) });

const rejectionFactory = (overrides: Partial<Rejection> = {}): Rejection => ({
  messageId: 'm-1',
  at: '2026-03-01T12:00:05.000Z',
  reason: 'conflict',
  dispatchId: 'd-2026-0001',
  origin: 'planner',
  senderId: null,
  bodyPreview: '{}',
  bodyBytes: 2,
  bodyRef: null,
  ...overrides,
});

const pendingApproval = { approvalId: 'a-1', requestedAt: later(30).toISOString() };

function resultRecord(state: ResultRecord['state']): ResultRecord {
  return { id: 'r1~d-2026-0001', attempt: 1, state, readyAt: later(60).toISOString(), deliveryAttempts: 0, claimToken: 't', leaseUntil: null, deliveredAt: null, deliveredBy: null, droppedReason: null, droppedAt: null };
}

/** For each change kind: what the version that records it looks like, and the event it publishes. */
const CHANGES: ReadonlyArray<{ kind: ChangeKind; patch: (state: DispatchState) => Partial<DispatchState>; detailType: DetailType | null }> = [
  { kind: 'accepted', patch: () => ({}), detailType: 'Dispatch Accepted' },
  { kind: 'submitted', patch: () => ({}), detailType: 'Dispatch Submitted' },
  { kind: 'blocked', patch: () => ({ phase: 'blocked', blockedReason: 'target_rejected: HTTP 422' }), detailType: 'Dispatch Blocked' },
  {
    kind: 'approval_requested',
    patch: (state) => ({ execution: { ...state.execution, status: 'waiting_for_approval', nativeStatus: 'waiting_for_approval', pendingApproval } }),
    detailType: 'Approval Requested',
  },
  { kind: 'completed', patch: (state) => ({ execution: { ...state.execution, status: 'completed', nativeStatus: 'completed', completedAt: later(60).toISOString() } }), detailType: 'Run Completed' },
  { kind: 'failed', patch: (state) => ({ execution: { ...state.execution, status: 'failed', nativeStatus: 'failed' } }), detailType: 'Run Failed' },
  { kind: 'cancelled', patch: (state) => ({ execution: { ...state.execution, status: 'cancelled', nativeStatus: 'cancelled' } }), detailType: 'Run Cancelled' },
  { kind: 'recovered', patch: (state) => ({ execution: { ...state.execution, status: 'completed', nativeStatus: 'completed' } }), detailType: 'Run Recovered' },
  { kind: 'stalled', patch: (state) => ({ execution: { ...state.execution, status: 'unknown', monitorStatus: 'stalled' } }), detailType: 'Run Stalled' },
  { kind: 'unobservable', patch: (state) => ({ execution: { ...state.execution, status: 'unknown', monitorStatus: 'target_not_found' } }), detailType: 'Run Unobservable' },
  {
    kind: 'approval_wait_expired',
    patch: (state) => ({
      execution: { ...state.execution, status: 'waiting_for_approval', nativeStatus: 'waiting_for_approval', monitorStatus: 'approval_wait_expired', pendingApproval },
    }),
    detailType: 'Approval Wait Expired',
  },
  { kind: 'superseded', patch: () => ({ attempt: 2, runId: null, execution: NO_EXECUTION }), detailType: 'Run Superseded' },
  { kind: 'retry_scheduled', patch: () => ({}), detailType: null },
  { kind: 'claimed', patch: () => ({}), detailType: null },
  { kind: 'activity', patch: () => ({}), detailType: null },
  { kind: 'approval_decided', patch: () => ({}), detailType: null },
  { kind: 'observed', patch: () => ({}), detailType: null },
  { kind: 'rescheduled', patch: () => ({}), detailType: null },
  // Handled/Orphaned come from the evidence check's own item, never from the state change.
  { kind: 'handled', patch: (s) => ({ evidence: { ...s.evidence, outcome: 'handled', expected: ['out/a.md'], missing: [] } }), detailType: 'Dispatch Handled' },
  { kind: 'orphaned', patch: (s) => ({ evidence: { ...s.evidence, outcome: 'orphan_no_delivery', expected: ['out/a.md'], missing: ['out/a.md'] } }), detailType: 'Dispatch Orphaned' },
  { kind: 'evidence_unverified', patch: () => ({}), detailType: null },
  { kind: 'evidence_recheck', patch: () => ({}), detailType: null },
  { kind: 'redispatched', patch: () => ({ phase: 'accepted', runId: null }), detailType: null },
  { kind: 'result_ready', patch: (s) => ({ execution: { ...s.execution, status: 'failed', nativeStatus: 'failed' }, result: resultRecord('pending') }), detailType: 'Result Ready' },
  { kind: 'result_claimed', patch: () => ({ result: resultRecord('claimed') }), detailType: null },
  { kind: 'result_renewed', patch: () => ({ result: resultRecord('claimed') }), detailType: null },
  { kind: 'result_released', patch: () => ({ result: resultRecord('pending') }), detailType: null },
  { kind: 'result_delivered', patch: () => ({ result: resultRecord('delivered') }), detailType: 'Result Delivered' },
  { kind: 'result_dropped', patch: () => ({ result: { ...resultRecord('dropped'), droppedReason: 'expired' } }), detailType: 'Result Dropped' },
  { kind: 'waiting', patch: () => ({ waitingFor: 'capacity' }), detailType: null },
  {
    kind: 'dispatch_cancelled',
    // A reason as long as the API takes (500): the event's schema takes it too (was: 300, so a longer reason broke it).
    patch: () => ({ phase: 'cancelled', runId: null, cancel: { requestedAt: later(60).toISOString(), reason: 'why '.repeat(125), by: 'local:planner', asks: 0, nextAskAt: null, answer: 'cancelled before submission' } }),
    detailType: 'Dispatch Cancelled',
  },
  { kind: 'cancel_requested', patch: () => ({ cancel: { requestedAt: later(60).toISOString(), reason: 'stop', by: 'local:planner', asks: 0, nextAskAt: later(60).toISOString(), answer: null } }), detailType: null },
  { kind: 'cancel_answered', patch: () => ({ cancel: { requestedAt: later(60).toISOString(), reason: 'stop', by: 'local:planner', asks: 1, nextAskAt: null, answer: 'accepted' } }), detailType: null },
  { kind: 'slot_released', patch: () => ({ slot: null }), detailType: null },
  // Listed in GET /attention; the recorded end stands, so no run event stands for a redrive.
  { kind: 'redriven', patch: (state) => ({ execution: { ...state.execution, redriven: { at: later(90).toISOString(), count: 1 } } }), detailType: null },
  // A person's attestation on a manual dispatch (CONTRACT §13): no runtime event stands for it.
  { kind: 'manual_result_attested', patch: () => ({ manual: { since: later(0).toISOString(), resultAttestation: { attestationId: 'ma-1', at: later(60).toISOString() } } }), detailType: null },
];

const detailTypes = (events: readonly LedgerEvent[]): DetailType[] => events.map((event) => event.detailType);
const eventIds = (events: readonly LedgerEvent[]): string[] => events.map((event) => event.detail.eventId);

describe('eventsForState', () => {
  it('covers every change kind in the mapping', () => {
    expect(CHANGES.map((change) => change.kind).sort()).toEqual(Object.keys(DETAIL_TYPE_OF_CHANGE).sort());
  });

  it.each(CHANGES)('publishes $detailType when a version records "$kind"', ({ kind, patch, detailType }) => {
    const previous = submittedStateFactory();
    const current = advance(stateOnly(previous), kind, later(60), patch(previous));

    const events = eventsForState(stored(previous, 1), stored(current, 2));

    expect(detailTypes(events)).toEqual(detailType ? [detailType] : []);
    for (const event of events) expect(parseDetail(event).error).toBeUndefined();
  });

  it('publishes one Dispatch Submitted, with its runId, standing for the acceptance when the first stored version records both (CONTRACT §3 v2)', () => {
    const state = submittedStateFactory();
    expect(state.changes).toEqual(expect.arrayContaining(['accepted', 'submitted']));

    const events = eventsForState(undefined, stored(state, 1));

    expect(events).toEqual([
      {
        detailType: 'Dispatch Submitted',
        detail: { eventId: expect.any(String), at: NOW.toISOString(), dispatchId: 'd-2026-0001', origin: 'planner', target: 'demo-agent', attempt: 1, runId: 'r-1' },
      },
    ]);
  });

  it('still publishes Dispatch Accepted when the first version does not submit (waiting), and Submitted later on its own', () => {
    const first = accepted(newDispatchFactory(), NOW);
    expect(detailTypes(eventsForState(undefined, stored(first, 1)))).toEqual(['Dispatch Accepted']);
    const later1 = advance(stateOnly(first), 'submitted', later(60), { phase: 'submitted', runId: 'r-1', execution: { ...first.execution, status: 'running', nativeStatus: 'running' } });
    expect(detailTypes(eventsForState(stored(first, 1), stored(later1, 2)))).toEqual(['Dispatch Submitted']);
  });

  it('publishes Dispatch Blocked with the stored reason when a dispatch is blocked before any target contact', () => {
    const state = blocked(accepted(newDispatchFactory(), NOW), 'unknown_target', 'no target "nope"', NOW);

    const events = eventsForState(undefined, stored(state, 1));

    expect(detailTypes(events)).toEqual(['Dispatch Accepted', 'Dispatch Blocked', 'Result Ready']);
    expect(events[1]?.detail).toMatchObject({ reason: 'unknown_target: no target "nope"', attempt: 1 });
    expect(events[1]?.detail).not.toHaveProperty('runId');
  });

  it('describes a stall with status unknown, the last activity and how to check the run', () => {
    const previous = submittedStateFactory();
    const current = advance(stateOnly(previous), 'stalled', later(600), { execution: { ...previous.execution, status: 'unknown', monitorStatus: 'stalled' } });

    expect(eventsForState(stored(previous, 1), stored(current, 2))).toEqual([
      {
        detailType: 'Run Stalled',
        detail: {
          eventId: eventIdOf('d-2026-0001:2:Run Stalled'),
          at: later(600).toISOString(),
          dispatchId: 'd-2026-0001',
          origin: 'planner',
          target: 'demo-agent',
          attempt: 1,
          runId: 'r-1',
          nativeStatus: 'running',
          status: 'unknown',
          monitorStatus: 'stalled',
          lastActivityAt: NOW.toISOString(),
          howToCheck: 'npx ledger check d-2026-0001 --refresh --origin planner',
        },
      },
    ]);
  });

  it('gives the reason of an unobservable run as its monitor status', () => {
    const previous = submittedStateFactory();
    const current = advance(stateOnly(previous), 'unobservable', later(600), { execution: { ...previous.execution, status: 'unknown', monitorStatus: 'lookup_unavailable' } });

    expect(eventsForState(stored(previous, 1), stored(current, 2))[0]?.detail).toMatchObject({ status: 'unknown', monitorStatus: 'lookup_unavailable', reason: 'lookup_unavailable' });
  });

  it('names the still-pending approval when an approval wait expires', () => {
    const previous = submittedStateFactory();
    const current = advance(stateOnly(previous), 'approval_wait_expired', later(1900), {
      execution: { ...previous.execution, status: 'waiting_for_approval', nativeStatus: 'waiting_for_approval', monitorStatus: 'approval_wait_expired', pendingApproval },
    });

    expect(eventsForState(stored(previous, 1), stored(current, 2))[0]?.detail).toMatchObject({
      approvalId: 'a-1',
      requestedAt: pendingApproval.requestedAt,
      status: 'waiting_for_approval',
      monitorStatus: 'approval_wait_expired',
    });
  });

  it('describes the run that was superseded — the previous version’s run and attempt — not the next attempt', () => {
    const previous = advance(stateOnly(submittedStateFactory()), 'activity', later(10), {});
    const current = advance(stateOnly(previous), 'superseded', later(20), { attempt: 2, runId: null, execution: NO_EXECUTION });

    expect(eventsForState(stored(previous, 2), stored(current, 3))).toEqual([
      {
        detailType: 'Run Superseded',
        detail: {
          eventId: eventIdOf('d-2026-0001:3:Run Superseded'),
          at: later(20).toISOString(),
          dispatchId: 'd-2026-0001',
          origin: 'planner',
          target: 'demo-agent',
          attempt: 1,
          runId: 'r-1',
          nativeStatus: 'running',
        },
      },
    ]);
  });

  it('stamps each event with the commit time of its version, never the time it is published', () => {
    vi.useFakeTimers({ now: new Date('2030-01-01T00:00:00.000Z') });
    try {
      const previous = submittedStateFactory();
      const current = advance(stateOnly(previous), 'completed', later(90), { execution: { ...previous.execution, status: 'completed', nativeStatus: 'completed' } });

      expect(eventsForState(stored(previous, 1), stored(current, 2)).map((event) => event.detail.at)).toEqual([later(90).toISOString()]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('gives the same events, ids included, when the same record is derived twice', () => {
    const previous = submittedStateFactory();
    const current = advance(stateOnly(previous), 'stalled', later(600), { execution: { ...previous.execution, status: 'unknown', monitorStatus: 'stalled' } });

    expect(eventsForState(stored(previous, 1), stored(current, 2))).toEqual(eventsForState(structuredClone(stored(previous, 1)), structuredClone(stored(current, 2))));
    expect(eventsForState(undefined, stored(previous, 1))).toEqual(eventsForState(undefined, structuredClone(stored(previous, 1))));
  });

  it('gives different ids to different versions and to different changes of one version', () => {
    fc.assert(
      fc.property(
        fc.stringMatching(/^[A-Za-z0-9._:-]{1,128}$/),
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.integer({ min: 1, max: 1_000_000 }),
        (dispatchId, version, otherVersion) => {
          fc.pre(version !== otherVersion);
          // A first version blocked at once publishes three changes: Accepted, Blocked, Result Ready.
          const at = (v: number) => stored(blocked(accepted(newDispatchFactory({ dispatchId }), NOW), 'unknown_target', 'no target', NOW), v);
          // (Result Ready is one per result, whatever the version: its id is the result's, left out here.)
          const versioned = (v: number) => eventIds(eventsForState(undefined, at(v)).filter((event) => event.detailType !== 'Result Ready'));
          const ids = versioned(version);
          const otherIds = versioned(otherVersion);
          expect(ids).toHaveLength(2);
          expect(new Set([...ids, ...otherIds]).size).toBe(4);
          for (const id of [...ids, ...otherIds]) expect(id).toMatch(/^[0-9a-f]{32}$/);
        },
      ),
    );
  });

  it('publishes nothing when a record does not advance the version', () => {
    const state = submittedStateFactory();
    const stale = advance(stateOnly(state), 'completed', later(60), { execution: { ...state.execution, status: 'completed', nativeStatus: 'completed' } });

    expect(eventsForState(stored(stale, 2), { ...stored(stale, 2) })).toEqual([]);
    expect(eventsForState(stored(stale, 2), stored(state, 1))).toEqual([]);
  });

  it('throws an UndescribableChangeError when a run event has no run to describe', () => {
    const state = accepted(newDispatchFactory(), NOW);
    const current = advance(stateOnly(state), 'completed', later(60), {});

    expect(() => eventsForState(undefined, stored(current, 2))).toThrow(UndescribableChangeError);
  });
});

describe('eventForRejection', () => {
  it('publishes Message Rejected with the readable dispatchId and origin when a conflicting message is rejected', () => {
    const event = eventForRejection(rejectionFactory());

    expect(event).toEqual({
      detailType: 'Message Rejected',
      detail: {
        eventId: eventIdOf('rejection:m-1'),
        at: '2026-03-01T12:00:05.000Z',
        messageId: 'm-1',
        reason: 'conflict',
        dispatchId: 'd-2026-0001',
        origin: 'planner',
      },
    });
    expect(parseDetail(event).error).toBeUndefined();
  });

  it('leaves out what could not be read when a message is unreadable', () => {
    const event = eventForRejection(rejectionFactory({ messageId: 'm-2', reason: 'not_json', dispatchId: null, origin: null }));

    expect(event.detail).toEqual({ eventId: eventIdOf('rejection:m-2'), at: '2026-03-01T12:00:05.000Z', messageId: 'm-2', reason: 'not_json' });
    expect(parseDetail(event).error).toBeUndefined();
  });

  it('gives one rejection one eventId, however often it is derived', () => {
    expect(eventForRejection(rejectionFactory()).detail.eventId).toBe(eventForRejection(rejectionFactory({ at: 'later' })).detail.eventId);
    expect(eventForRejection(rejectionFactory()).detail.eventId).not.toBe(eventForRejection(rejectionFactory({ messageId: 'm-9' })).detail.eventId);
  });
});

const change = (overrides: Partial<StreamChange> & Pick<StreamChange, 'newItem'>): StreamChange => ({
  sequenceNumber: '100',
  eventName: 'MODIFY',
  oldItem: { kind: 'other' },
  ...overrides,
});

describe('eventsForStreamChange', () => {
  const first = submittedStateFactory();
  const second = advance(stateOnly(first), 'failed', later(60), { execution: { ...first.execution, status: 'failed', nativeStatus: 'failed' } });

  it('derives a created state from nothing and a replaced one from its old image', () => {
    expect(detailTypes(eventsForStreamChange(change({ eventName: 'INSERT', newItem: stateImage(first, 1) })))).toEqual(['Dispatch Submitted']);
    expect(detailTypes(eventsForStreamChange(change({ oldItem: stateImage(first, 1), newItem: stateImage(second, 2) })))).toEqual(['Run Failed']);
  });

  it('publishes a rejection when it is inserted', () => {
    expect(detailTypes(eventsForStreamChange(change({ eventName: 'INSERT', newItem: { kind: 'rejection', rejection: rejectionFactory() } })))).toEqual(['Message Rejected']);
  });

  it('publishes nothing for a removal (TTL), a modified rejection, or another item', () => {
    expect(eventsForStreamChange(change({ eventName: 'REMOVE', oldItem: stateImage(second, 2), newItem: { kind: 'other' } }))).toEqual([]);
    expect(eventsForStreamChange(change({ newItem: { kind: 'rejection', rejection: rejectionFactory() } }))).toEqual([]);
    expect(eventsForStreamChange(change({ eventName: 'INSERT', newItem: { kind: 'other' } }))).toEqual([]);
  });
});

describe('publishStreamBatch', () => {
  const first = submittedStateFactory();
  const completed = advance(stateOnly(first), 'completed', later(60), { execution: { ...first.execution, status: 'completed', nativeStatus: 'completed' } });
  const other = submittedStateFactory({ dispatchId: 'd-2026-0002' });
  /** Records 1, 2, 3: one event each (a created and submitted state publishes Dispatch Submitted alone). */
  const batch: StreamChange[] = [
    change({ sequenceNumber: '1', eventName: 'INSERT', newItem: stateImage(first, 1) }),
    change({ sequenceNumber: '2', oldItem: stateImage(first, 1), newItem: stateImage(completed, 2) }),
    change({ sequenceNumber: '3', eventName: 'INSERT', newItem: stateImage(other, 1) }),
  ];

  it('publishes the events of every record in one call and reports no failure when the bus takes them', async () => {
    const publish = vi.fn(async () => {});

    const report = await publishStreamBatch(batch, { publish });

    expect(publish).toHaveBeenCalledTimes(1);
    expect(detailTypes(report.published)).toEqual(['Dispatch Submitted', 'Run Completed', 'Dispatch Submitted']);
    expect(report.derived).toEqual(report.published);
    expect(report.batchItemFailures).toEqual([]);
    expect(report.failure).toBeUndefined();
  });

  it('reports the record of the first unpublished event and every later one when the bus takes only part', async () => {
    const publish = vi.fn(async () => {
      throw new PublishIncompleteError('bus refused', 1);
    });

    const report = await publishStreamBatch(batch, { publish });

    expect(report.batchItemFailures).toEqual([{ itemIdentifier: '2' }, { itemIdentifier: '3' }]);
    expect(detailTypes(report.published)).toEqual(['Dispatch Submitted']);
    expect(report.failure?.sequenceNumber).toBe('2');
  });

  it('reports every record when the publisher fails without saying what it published', async () => {
    const report = await publishStreamBatch(batch, { publish: async () => Promise.reject(new Error('network down')) });

    expect(report.batchItemFailures.map((failure) => failure.itemIdentifier)).toEqual(['1', '2', '3']);
    expect(report.published).toEqual([]);
  });

  it('publishes the records before one it cannot describe, and reports that one and the rest', async () => {
    const broken = advance(stateOnly(accepted(newDispatchFactory({ dispatchId: 'd-broken' }), NOW)), 'completed', later(5), {});
    const publish = vi.fn(async (_events: readonly LedgerEvent[]) => {});

    const report = await publishStreamBatch(
      [batch[0] as StreamChange, change({ sequenceNumber: '9', oldItem: { kind: 'other' }, newItem: stateImage(broken, 2) }), batch[2] as StreamChange],
      { publish },
    );

    expect(publish.mock.calls[0]?.[0].map((event) => event.detailType)).toEqual(['Dispatch Submitted']);
    expect(report.batchItemFailures).toEqual([{ itemIdentifier: '9' }, { itemIdentifier: '3' }]);
    expect(report.failure?.error).toBeInstanceOf(UndescribableChangeError);
  });

  it('calls no bus when the batch has nothing to publish', async () => {
    const publish = vi.fn(async () => {});

    const report = await publishStreamBatch([change({ eventName: 'REMOVE', newItem: { kind: 'other' } })], { publish });

    expect(publish).not.toHaveBeenCalled();
    expect(report).toEqual({ published: [], derived: [], checkpointed: 1, counted: {}, batchItemFailures: [] });
  });
});

describe('publishStreamBatch with an events profile (CONTRACT §3 v2)', () => {
  const first = submittedStateFactory();
  const completed = advance(stateOnly(first), 'completed', later(60), { execution: { ...first.execution, status: 'completed', nativeStatus: 'completed' } });
  const stalledFirst = submittedStateFactory({ dispatchId: 'd-2026-0003' });
  const stalled = advance(stateOnly(stalledFirst), 'stalled', later(700), { execution: { ...stalledFirst.execution, status: 'unknown', monitorStatus: 'stalled' } });
  const batch: StreamChange[] = [
    change({ sequenceNumber: '1', eventName: 'INSERT', newItem: stateImage(first, 1) }),
    change({ sequenceNumber: '2', oldItem: stateImage(first, 1), newItem: stateImage(completed, 2) }),
    change({ sequenceNumber: '3', oldItem: stateImage(stalledFirst, 1), newItem: stateImage(stalled, 2) }),
  ];

  it('puts only the profile\'s detail-types on the bus, and still derives every event (the metrics count those)', async () => {
    const publish = vi.fn(async (_events: readonly LedgerEvent[]) => {});

    const report = await publishStreamBatch(batch, { publish, published: publishedDetailTypes('attention') });

    expect(publish.mock.calls[0]?.[0].map((event) => event.detailType)).toEqual(['Run Stalled']);
    expect(detailTypes(report.published)).toEqual(['Run Stalled']);
    expect(detailTypes(report.derived)).toEqual(['Dispatch Submitted', 'Run Completed', 'Run Stalled']);
    expect(report.checkpointed).toBe(3);
  });

  it('calls no bus when the profile publishes none of the batch, and checkpoints it all', async () => {
    const publish = vi.fn(async () => {});

    const report = await publishStreamBatch(batch.slice(0, 2), { publish, published: publishedDetailTypes(['Dispatch Orphaned']) });

    expect(publish).not.toHaveBeenCalled();
    expect(report).toMatchObject({ published: [], checkpointed: 2, batchItemFailures: [] });
    expect(detailTypes(report.derived)).toEqual(['Dispatch Submitted', 'Run Completed']);
  });

  it('maps a partial publish back to the record of the first published-but-refused event', async () => {
    const publish = vi.fn(async () => {
      throw new PublishIncompleteError('bus refused', 1);
    });

    const report = await publishStreamBatch(batch, { publish, published: publishedDetailTypes(['Dispatch Submitted', 'Run Stalled']) });

    // Published list: [Submitted (record 1), Stalled (record 3)]; the bus took the first only.
    expect(report.batchItemFailures).toEqual([{ itemIdentifier: '3' }]);
    expect(detailTypes(report.published)).toEqual(['Dispatch Submitted']);
    expect(detailTypes(report.derived)).toEqual(['Dispatch Submitted', 'Run Completed']);
  });
});

describe('review findings — states written by the previous version', () => {
  it('publishes Dispatch Handled for a state settled before the refs travelled with it (expected []), not an error that blocks the stream', () => {
    const previous = submittedStateFactory();
    const legacy = advance(stateOnly(previous), 'handled', later(60), { evidence: { outcome: 'handled', expectedCount: 1, deadline: null } });
    const events = eventsForState(stored(previous, 1), stored(legacy, 2));
    expect(detailTypes(events)).toEqual(['Dispatch Handled']);
    expect(events[0]?.detail).toMatchObject({ expected: [], missing: [] });
  });
});
