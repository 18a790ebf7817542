import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventSchemaFiles, SCHEMAS_DIR, schemaFileName } from '../../scripts/write-event-schemas.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import { NO_EXECUTION, stateOnly, type NextState } from '../../shared/dispatch/state.js';
import { cancelledBeforeSubmission } from '../../shared/dispatch/transitions/flow.js';
import { accepted, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { resultClaimed, resultDelivered, resultDropped } from '../../shared/dispatch/transitions/inbox.js';
import { blocked } from '../../shared/dispatch/transitions/core.js';
import { advance } from '../support/states.js';
import { DETAIL_TYPES, EVENT_CATALOG, parseDetail, type LedgerEvent } from '../../shared/events/catalog.js';
import { operatorReceipt } from '../../shared/dispatch/receipts.js';
import { eventForOperatorReceipt, eventForRejection, eventsForState, type StateVersion } from '../../shared/events/derive.js';
import { newDispatchFactory, NOW } from '../support/factories.js';

const later = (seconds: number): Date => new Date(NOW.getTime() + seconds * 1000);

/** A version as the table holds it: the state alone, the version that wrote it and what that write changed. */
const stored = (next: NextState, version: number): StateVersion => ({ state: stateOnly(next), version, changes: next.changes });

/** One life of each kind, version by version: together they publish every detail-type there is. */
function derivedEvents(): LedgerEvent[] {
  const events: LedgerEvent[] = [];
  /** Commits `current` as the version after `previous` (the first when undefined); the next version's transitions start from its stored state. */
  const commit = (previous: StateVersion | undefined, current: NextState): StateVersion => {
    const version = stored(current, (previous?.version ?? 0) + 1);
    events.push(...eventsForState(previous, version));
    return version;
  };
  const pendingApproval = { approvalId: 'a-1', requestedAt: later(5).toISOString() };

  const run = commit(undefined, submitted(accepted(newDispatchFactory(), NOW), { kind: 'accepted', runId: 'r-1', status: 'queued', requestId: 'q-1' }, DEFAULT_RETRY_POLICY, NOW));
  const waiting = commit(run, advance(run.state, 'approval_requested', later(5), { execution: { ...run.state.execution, status: 'waiting_for_approval', nativeStatus: 'waiting_for_approval', pendingApproval } }));
  const expired = commit(waiting, advance(waiting.state, 'approval_wait_expired', later(1900), { execution: { ...waiting.state.execution, monitorStatus: 'approval_wait_expired' } }));
  const decided = commit(expired, advance(expired.state, 'approval_decided', later(1910), { execution: { ...expired.state.execution, status: 'running', nativeStatus: 'running', monitorStatus: null, pendingApproval: null } }));
  const stalled = commit(decided, advance(decided.state, 'stalled', later(2600), { execution: { ...decided.state.execution, status: 'unknown', monitorStatus: 'stalled' } }));
  const lost = commit(stalled, advance(stalled.state, 'unobservable', later(2700), { execution: { ...stalled.state.execution, monitorStatus: 'lookup_unavailable' } }));
  const superseded = commit(lost, advance(lost.state, 'superseded', later(2800), { attempt: 2, runId: null, execution: NO_EXECUTION }));
  const second = commit(superseded, submitted(superseded.state, { kind: 'accepted', runId: 'r-2', status: 'running', requestId: 'q-2' }, DEFAULT_RETRY_POLICY, later(2801)));
  commit(second, advance(second.state, 'recovered', later(3500), { execution: { ...second.state.execution, status: 'completed', nativeStatus: 'completed' } }));

  for (const [index, ending] of (['completed', 'failed', 'cancelled'] as const).entries()) {
    const start = stored(submitted(accepted(newDispatchFactory({ dispatchId: `d-end-${index}` }), NOW), { kind: 'accepted', runId: 'r-1', status: 'running', requestId: 'q' }, DEFAULT_RETRY_POLICY, NOW), 1);
    commit(start, advance(start.state, ending, later(60), { execution: { ...start.state.execution, status: ending, nativeStatus: ending } }));
  }
  // A blocked callback dispatch yields a result (Result Ready): claimed and acked (Result Delivered); another expires (Result Dropped).
  const stopped = commit(undefined, blocked(accepted(newDispatchFactory({ dispatchId: 'd-blocked' }), NOW), 'hop_budget_exceeded', 'hop 5 > maxHops 4', NOW));
  const held = commit(stopped, resultClaimed(stopped.state, { claimToken: 'token-1', leaseSeconds: 60 }, later(1)));
  commit(held, resultDelivered(held.state, 'origin:planner', later(2)));
  const unclaimed = commit(undefined, blocked(accepted(newDispatchFactory({ dispatchId: 'd-unclaimed' }), NOW), 'unknown_target', 'no target "x"', NOW));
  commit(unclaimed, resultDropped(unclaimed.state, 'expired', later(3)));
  // Cancelled before it was ever submitted (Dispatch Cancelled).
  commit(undefined, cancelledBeforeSubmission(accepted(newDispatchFactory({ dispatchId: 'd-cancelled' }), NOW), { reason: 'not needed any more', by: 'local:planner' }, NOW));
  for (const outcome of ['handled', 'orphan_no_delivery'] as const) {
    const start = submitted(accepted(newDispatchFactory({ dispatchId: `d-${outcome}`, expectedCount: 1 }), NOW), { kind: 'accepted', runId: 'r-1', status: 'running', requestId: 'q' }, DEFAULT_RETRY_POLICY, NOW);
    const done = stored(advance(stateOnly(start), 'completed', later(60), { execution: { ...start.execution, status: 'completed', nativeStatus: 'completed', completedAt: later(60).toISOString() } }), 2);
    commit(done, advance(done.state, outcome === 'handled' ? 'handled' : 'orphaned', later(61), { evidence: { ...done.state.evidence, outcome, expected: ['out/a.md'], missing: outcome === 'handled' ? [] : ['out/a.md'] } }));
  }
  events.push(
    eventForOperatorReceipt(
      operatorReceipt({ dispatchId: 'd-receipt', origin: 'planner' }, { receiptId: 'rc-1', runId: 'r-1', kind: 'artifact_acceptance', state: 'accepted', verifiedBy: 'alice' }, NOW),
    ),
    eventForRejection({ messageId: 'm-1', at: NOW.toISOString(), reason: 'not_json', dispatchId: null, origin: null, senderId: null, bodyPreview: '{', bodyRef: null, bodyBytes: 1 }),
  );
  return events;
}

describe('the event JSON Schemas in schemas/events', () => {
  it('are exactly what `npm run schemas` writes now (run it after changing the catalog)', () => {
    const expected = eventSchemaFiles();
    const onDisk = readdirSync(SCHEMAS_DIR).filter((name) => name.endsWith('.schema.json')).sort();

    expect(onDisk).toEqual(expected.map((file) => file.name).sort());
    for (const file of expected) expect(readFileSync(join(SCHEMAS_DIR, file.name), 'utf8'), file.name).toBe(file.content);
  });

  it('give one schema per detail-type, with its $id, title and a strict object', () => {
    for (const detailType of DETAIL_TYPES) {
      const schema = JSON.parse(readFileSync(join(SCHEMAS_DIR, schemaFileName(detailType)), 'utf8')) as Record<string, unknown>;
      expect(schema).toMatchObject({
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        $id: expect.stringMatching(/^urn:dispatch-ledger:events:[a-z-]+$/),
        title: detailType,
        type: 'object',
        additionalProperties: false,
      });
      expect(schema.required).toEqual(expect.arrayContaining(['eventId', 'at']));
    }
  });
});

describe('the event catalog', () => {
  const events = derivedEvents();

  it('validates every event the publisher derives, and the derivations cover every detail-type', () => {
    for (const event of events) expect(parseDetail(event).error, `${event.detailType} ${JSON.stringify(event.detail)}`).toBeUndefined();
    expect(new Set(events.map((event) => event.detailType))).toEqual(new Set(DETAIL_TYPES));
  });

  it('gives every derived event its own eventId', () => {
    expect(new Set(events.map((event) => event.detail.eventId)).size).toBe(events.length);
  });

  it('refuses a detail with a field the catalog does not name', () => {
    const event = events[0] as LedgerEvent;

    expect(EVENT_CATALOG[event.detailType].schema.safeParse({ ...event.detail, extra: true }).success).toBe(false);
  });
});
