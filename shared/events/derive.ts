import { createHash } from 'node:crypto';
import { dispatchCommand } from '../dispatch/commands.js';
import { countDelta, sumDeltas, type CountDelta } from '../dispatch/counts.js';
import type { OperatorReceipt } from '../dispatch/receipts.js';
import { nativeStatusOf, type ChangeKind, type DispatchState } from '../dispatch/state.js';
import type { AcceptedMessage, EvidenceCheck, Rejection } from '../dispatch/records.js';
import type { DetailType, LedgerEvent } from './catalog.js';

/**
 * The table's stream is the outbox: every committed version of a dispatch's state says what it changed
 * (`changes`), and each change that has a detail-type becomes exactly one event. Nothing here reads a
 * clock or the environment, so republishing the same stream record yields the same events, ids included.
 */

/** The detail-type each change kind publishes; null: an internal change nobody subscribes to. */
export const DETAIL_TYPE_OF_CHANGE: Readonly<Record<ChangeKind, DetailType | null>> = {
  accepted: 'Dispatch Accepted',
  submitted: 'Dispatch Submitted',
  blocked: 'Dispatch Blocked',
  approval_requested: 'Approval Requested',
  completed: 'Run Completed',
  failed: 'Run Failed',
  cancelled: 'Run Cancelled',
  recovered: 'Run Recovered',
  stalled: 'Run Stalled',
  unobservable: 'Run Unobservable',
  approval_wait_expired: 'Approval Wait Expired',
  superseded: 'Run Superseded',
  retry_scheduled: null,
  claimed: null,
  activity: null,
  approval_decided: null,
  observed: null,
  rescheduled: null,
  // Published from the state change that settles the check (never from the check item: a check whose
  // state write lost to a concurrent redispatch must publish nothing).
  handled: 'Dispatch Handled',
  orphaned: 'Dispatch Orphaned',
  evidence_unverified: null,
  evidence_recheck: null,
  redispatched: null,
  result_ready: 'Result Ready',
  result_claimed: null,
  result_renewed: null,
  result_released: null,
  result_delivered: 'Result Delivered',
  result_dropped: 'Result Dropped',
  waiting: null,
  dispatch_cancelled: 'Dispatch Cancelled',
  cancel_requested: null,
  cancel_answered: null,
  slot_released: null,
  // Listed in GET /attention (kind `redriven`); the recorded end stands, so no run event stands for it.
  redriven: null,
  // A person's attestation on a manual dispatch (CONTRACT §13): no runtime event stands for it.
  manual_result_attested: null,
};

/**
 * The stable id of an event: a hash of what identifies the state change, so the same change published
 * twice (a retried stream batch, a replayed shard) carries the same id and consumers can deduplicate.
 *
 * @example
 * eventIdOf('d-2026-0001:3:Run Stalled') // always the same 32 hex characters
 */
export function eventIdOf(identity: string): string {
  return createHash('sha256').update(identity, 'utf8').digest('hex').slice(0, 32);
}

/** A committed state the publisher cannot describe: a writer broke an invariant of the state machine. */
export class UndescribableChangeError extends Error {
  override readonly name = 'UndescribableChangeError';
  constructor(
    readonly dispatchId: string,
    readonly version: number,
    readonly change: ChangeKind,
    readonly missing: string,
  ) {
    super(`${dispatchId} v${version}: change "${change}" has no ${missing}`);
  }
}

/** The command that looks a run up at its target now (printed in events that need a person). */
export const howToCheck = (state: Pick<DispatchState, 'dispatchId' | 'origin'>): string => dispatchCommand(state, 'check', '--refresh');

/**
 * One version of a dispatch as the table holds it (a stream image): the state, the version that wrote it
 * and what that write changed. The version and the changes are the write's, never the state's own.
 */
export interface StateVersion {
  readonly state: DispatchState;
  readonly version: number;
  readonly changes: readonly ChangeKind[];
}

/**
 * The events of one committed version of a dispatch's state, one per change that has a detail-type.
 * `previous` is the version it replaced (the stream's OldImage); undefined when it was created.
 *
 * @example
 * eventsForState(undefined, firstVersion) // [Dispatch Submitted]: it stands for the acceptance too
 */
export function eventsForState(previous: StateVersion | undefined, current: StateVersion): LedgerEvent[] {
  // A version that does not advance is not a committed change (defensive: the table forbids it).
  if (previous && current.version <= previous.version) return [];
  // Items written before versions recorded their changes carry none.
  const kinds = new Set(current.changes);
  // CONTRACT §3 v2: when the first submission commits in the same write as the acceptance, one
  // Dispatch Submitted stands for both (a blocked or waiting first version still says Accepted).
  if (!previous && kinds.has('submitted')) kinds.delete('accepted');
  const events: LedgerEvent[] = [];
  for (const kind of kinds) {
    const event = eventFor(kind, previous?.state, current.state, current.version);
    if (event) events.push(event);
  }
  return events;
}

function eventFor(kind: ChangeKind, previous: DispatchState | undefined, current: DispatchState, version: number): LedgerEvent | undefined {
  const detailType = DETAIL_TYPE_OF_CHANGE[kind];
  if (!detailType) return undefined;
  const need = <T>(value: T | null | undefined, what: string): T => {
    if (value === null || value === undefined) throw new UndescribableChangeError(current.dispatchId, version, kind, what);
    return value;
  };
  // Handled/Orphaned keep the identity they had when the check item published them: one per attempt.
  // A result's events are one per result: acking twice, or a redispatch racing an expiry, never yields two.
  const resultOfEvent = detailType === 'Result Dropped' && kind === 'result_dropped' && current.result?.state !== 'dropped' ? previous?.result : current.result;
  const identity =
    detailType === 'Dispatch Handled' || detailType === 'Dispatch Orphaned'
      ? `check:${current.dispatchId}:${current.attempt}`
      : detailType.startsWith('Result ') && resultOfEvent
        ? `result:${resultOfEvent.id}:${detailType}`
        : `${current.dispatchId}:${version}:${detailType}`;
  const stamp = { eventId: eventIdOf(identity), at: current.updatedAt };
  const dispatch = { ...stamp, dispatchId: current.dispatchId, origin: current.origin, target: current.target, attempt: current.attempt };
  const run = (of: DispatchState = current) => ({
    ...dispatch,
    attempt: of.attempt,
    runId: need(of.runId, 'runId'),
    nativeStatus: need(nativeStatusOf(of.execution), 'execution.nativeStatus'),
  });
  const watch = { lastActivityAt: current.execution.lastActivityAt, howToCheck: howToCheck(current) };

  switch (detailType) {
    case 'Dispatch Accepted':
      return { detailType, detail: dispatch };
    case 'Dispatch Submitted':
      return { detailType, detail: { ...dispatch, runId: need(current.runId, 'runId') } };
    case 'Dispatch Blocked':
      return {
        detailType,
        detail: { ...dispatch, ...(current.runId ? { runId: current.runId } : {}), reason: need(current.blockedReason, 'blockedReason') },
      };
    case 'Dispatch Cancelled':
      return { detailType, detail: { ...dispatch, reason: current.cancel?.reason ?? '' } };
    case 'Run Completed':
    case 'Run Failed':
    case 'Run Cancelled':
    case 'Run Recovered':
      return { detailType, detail: run() };
    case 'Approval Requested': {
      const approvalId = current.execution.pendingApproval?.approvalId;
      return { detailType, detail: { ...run(), ...(approvalId ? { approvalId } : {}) } };
    }
    case 'Run Superseded':
      // The version that supersedes already describes the next attempt: the run it ended is the previous one's.
      return { detailType, detail: run(need(previous, 'previous version')) };
    case 'Run Stalled':
      return { detailType, detail: { ...run(), status: 'unknown', monitorStatus: 'stalled', ...watch } };
    case 'Run Unobservable': {
      const monitorStatus = current.execution.monitorStatus;
      if (monitorStatus !== 'lookup_unavailable' && monitorStatus !== 'target_not_found') {
        throw new UndescribableChangeError(current.dispatchId, version, kind, 'monitorStatus lookup_unavailable or target_not_found');
      }
      return { detailType, detail: { ...run(), status: 'unknown', monitorStatus, reason: monitorStatus, ...watch } };
    }
    case 'Approval Wait Expired': {
      const pending = need(current.execution.pendingApproval, 'execution.pendingApproval');
      return {
        detailType,
        detail: {
          ...run(),
          status: need(current.execution.status, 'execution.status'),
          monitorStatus: 'approval_wait_expired',
          ...watch,
          approvalId: pending.approvalId,
          requestedAt: pending.requestedAt,
        },
      };
    }
    case 'Dispatch Handled':
    case 'Dispatch Orphaned':
      return {
        detailType,
        // A state settled by the previous version carries no refs (its check item published them):
        // the same eventId, with the refs empty, rather than a record the publisher cannot get past.
        detail: { ...dispatch, runId: need(current.runId, 'runId'), expected: [...(current.evidence.expected ?? [])], missing: [...(current.evidence.missing ?? [])] },
      };
    case 'Result Ready':
    case 'Result Delivered':
    case 'Result Dropped': {
      // A redispatch drops the ended attempt's result: described from the version it replaced.
      const result = need(resultOfEvent, 'result');
      const of = result.attempt === current.attempt || !previous ? current : previous;
      const fields = {
        ...dispatch,
        attempt: result.attempt,
        ...(of.runId ? { runId: of.runId } : {}),
        resultId: result.id,
        resultDelivery: current.resultDelivery ?? 'after_turn',
      };
      if (detailType === 'Result Ready') return { detailType, detail: fields };
      if (detailType === 'Result Delivered') return { detailType, detail: { ...fields, deliveryAttempts: result.deliveryAttempts } };
      return { detailType, detail: { ...fields, reason: result.droppedReason ?? 'superseded' } };
    }
    case 'Message Rejected':
    case 'Receipt Recorded':
      // Rejections and operator receipts are items of their own (eventForRejection,
      // eventForOperatorReceipt), never a change of a dispatch's state.
      return undefined;
  }
}

/**
 * The event of a rejected message. Its id is derived from the SQS message id, which the table keys
 * the rejection by: one rejection, one eventId.
 */
export function eventForRejection(rejection: Rejection): LedgerEvent {
  return {
    detailType: 'Message Rejected',
    detail: {
      eventId: eventIdOf(`rejection:${rejection.messageId}`),
      at: rejection.at,
      messageId: rejection.messageId,
      reason: rejection.reason,
      ...(rejection.dispatchId ? { dispatchId: rejection.dispatchId } : {}),
      ...(rejection.origin ? { origin: rejection.origin } : {}),
    },
  };
}

/** A ledger table item as the stream shows it, decoded (see `decodeItem` of the table adapter). */
export type StreamItem =
  | ({ readonly kind: 'state' } & StateVersion)
  /** The accepted message, the dispatch's idempotency anchor (publishes nothing; its expiry clears the dispatch's objects). */
  | { readonly kind: 'message'; readonly message: AcceptedMessage }
  | { readonly kind: 'rejection'; readonly rejection: Rejection }
  | { readonly kind: 'check'; readonly check: EvidenceCheck }
  | { readonly kind: 'operator_receipt'; readonly receipt: OperatorReceipt }
  /** An item that failed decoding: published as nothing, reported by the publisher. */
  | { readonly kind: 'corrupt'; readonly key: string; readonly problem: string }
  | { readonly kind: 'other' };

/**
 * Receipt Recorded, from the item of an operator receipt (written once per dispatch and receiptId):
 * one receipt, one eventId, however often its stream record is published.
 */
export function eventForOperatorReceipt(receipt: OperatorReceipt): LedgerEvent {
  return {
    detailType: 'Receipt Recorded',
    detail: {
      eventId: eventIdOf(`receipt:${receipt.dispatchId}:${receipt.receiptId}`),
      at: receipt.recordedAt,
      dispatchId: receipt.dispatchId,
      origin: receipt.origin,
      receiptId: receipt.receiptId,
      kind: receipt.kind,
      state: receipt.state,
    },
  };
}

/** One stream record, decoded: what the publisher needs of it. */
export interface StreamChange {
  /** The record's SequenceNumber: how a failure is reported back (ReportBatchItemFailures). */
  readonly sequenceNumber: string;
  readonly eventName: 'INSERT' | 'MODIFY' | 'REMOVE';
  readonly oldItem: StreamItem;
  readonly newItem: StreamItem;
  /**
   * A REMOVE made by DynamoDB's TTL, not by a person or a function (the record's `userIdentity` is
   * DynamoDB's own service principal). Absent: not known to be one.
   */
  readonly removedByTtl?: boolean;
}

/**
 * The events of one stream record: a state written (created or replaced), a rejection, a final
 * evidence check or an operator receipt recorded.
 * A removal (TTL expiry) publishes nothing: it is not a state change of the dispatch.
 */
export function eventsForStreamChange(change: StreamChange): LedgerEvent[] {
  const { eventName, oldItem, newItem } = change;
  if (eventName === 'REMOVE') return [];
  if (newItem.kind === 'state') return eventsForState(oldItem.kind === 'state' ? oldItem : undefined, newItem);
  if (newItem.kind === 'rejection' && eventName === 'INSERT') return [eventForRejection(newItem.rejection)];
  if (newItem.kind === 'operator_receipt' && eventName === 'INSERT') return [eventForOperatorReceipt(newItem.receipt)];
  return [];
}

/**
 * The port the publisher needs: puts events on the bus, all or throw. When it throws a
 * PublishIncompleteError, the events before `firstUnpublishedIndex` are known to be on the bus.
 */
export type PublishEvents = (events: readonly LedgerEvent[]) => Promise<void>;

/** Some events could not be put on the bus; those before `firstUnpublishedIndex` were. */
export class PublishIncompleteError extends Error {
  override readonly name: string = 'PublishIncompleteError';
  constructor(
    message: string,
    readonly firstUnpublishedIndex: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface PublishReport {
  /** The events put on the bus, in order. */
  readonly published: readonly LedgerEvent[];
  /**
   * Every event the checkpointed records derive, published or left off the bus by the events profile
   * (CONTRACT §3 v2): the metrics count these, so a profile never silences an alarm.
   */
  readonly derived: readonly LedgerEvent[];
  /** How many records, from the first, the batch checkpoints: all of them, or those before the failed one. */
  readonly checkpointed: number;
  /** The count deltas of those records, summed (applied by `deps.count` when given). */
  readonly counted: CountDelta;
  /** Sequence numbers of the first record whose events are not all on the bus, and of every later one. */
  readonly batchItemFailures: ReadonlyArray<{ readonly itemIdentifier: string }>;
  /** Why the batch stopped, when it did. */
  readonly failure?: { readonly sequenceNumber: string; readonly error: unknown };
}

/**
 * How a stream record moves `GET /counts`: a dispatch state's buckets from its old image to its new one
 * (an INSERT from none, a REMOVE — TTL expiry included — to none); any other item, none. An image that
 * fails decoding counts as no state, both when it is written and when it is replaced, so the sum stays
 * the count of the states that decode.
 */
export function countDeltaOf(change: StreamChange): CountDelta {
  const stateIn = (item: StreamItem) => (item.kind === 'state' ? item.state : undefined);
  return countDelta(stateIn(change.oldItem), change.eventName === 'REMOVE' ? undefined : stateIn(change.newItem));
}

/** Adds a batch's summed count deltas to the counters; `seed` (the batch's first sequence number) spreads batches over them. */
export type CountChanges = (delta: CountDelta, seed: string) => Promise<void>;

/**
 * Publishes the events of a stream batch, records in order. On the first record that cannot be
 * described or published, it and every later record are reported as failed, so the stream retries from
 * there: at least once, never skipped. Events of records before it are on the bus.
 *
 * Then, with `deps.count`, the count deltas of the records the batch checkpoints (those before the
 * failed one: the stream retries the rest) go to the counters in one write, before the batch is
 * answered. Approximate in one way only: a crash after that write and before Lambda checkpoints the
 * batch delivers it again, and it is counted twice (its events are published twice the same way —
 * at least once). A counter write that fails throws: the whole batch is retried, nothing counted.
 *
 * @example
 * const report = await publishStreamBatch(changes, { publish: (events) => publish(events, bus), count });
 * return { batchItemFailures: [...report.batchItemFailures] };
 *
 * `published`: the detail-types the deployment's events profile puts on the bus (all when absent).
 */
export async function publishStreamBatch(
  changes: readonly StreamChange[],
  deps: { readonly publish: PublishEvents; readonly count?: CountChanges; readonly published?: ReadonlySet<DetailType> },
): Promise<PublishReport> {
  const report = await publishEvents(changes, deps.publish, deps.published);
  if (deps.count && Object.keys(report.counted).length > 0) await deps.count(report.counted, changes[0]?.sequenceNumber ?? '');
  return report;
}

async function publishEvents(changes: readonly StreamChange[], publishAll: PublishEvents, profile: ReadonlySet<DetailType> | undefined): Promise<PublishReport> {
  const derived: LedgerEvent[] = [];
  /** For each derived event, the index of the record it came from. */
  const derivedFrom: number[] = [];
  let stoppedAt: { index: number; error: unknown } | undefined;
  for (const [index, change] of changes.entries()) {
    try {
      for (const event of eventsForStreamChange(change)) {
        derived.push(event);
        derivedFrom.push(index);
      }
    } catch (error) {
      stoppedAt = { index, error };
      break;
    }
  }
  // The deployment's events profile (CONTRACT §3 v2): what is not published is still derived and counted.
  const events = profile ? derived.filter((event) => profile.has(event.detailType)) : derived;
  const recordOf = profile ? derivedFrom.filter((_, index) => profile.has((derived[index] as LedgerEvent).detailType)) : derivedFrom;

  let publishedCount = events.length;
  if (events.length > 0) {
    try {
      await publishAll(events);
    } catch (error) {
      // Without a trustworthy index, nothing of this call is known to be on the bus.
      const known = error instanceof PublishIncompleteError ? error.firstUnpublishedIndex : 0;
      publishedCount = known >= 0 && known < events.length ? known : 0;
      // The first record with an event not on the bus; a failure before this one (derivation) wins.
      const index = recordOf[publishedCount] ?? 0;
      if (!stoppedAt || index < stoppedAt.index) stoppedAt = { index, error };
    }
  }

  const counted = (checkpointed: number) => sumDeltas(changes.slice(0, checkpointed).map(countDeltaOf));
  if (!stoppedAt) return { published: events, derived, checkpointed: changes.length, counted: counted(changes.length), batchItemFailures: [] };
  const failedFrom = stoppedAt.index;
  // Only events of records before the failed one count as published: later ones are retried.
  const published = events.filter((_, eventIndex) => eventIndex < publishedCount && (recordOf[eventIndex] ?? 0) < failedFrom);
  return {
    published,
    derived: derived.filter((_, eventIndex) => (derivedFrom[eventIndex] ?? 0) < failedFrom),
    checkpointed: failedFrom,
    counted: counted(failedFrom),
    batchItemFailures: changes.slice(failedFrom).map((change) => ({ itemIdentifier: change.sequenceNumber })),
    failure: { sequenceNumber: changes[failedFrom]?.sequenceNumber ?? '', error: stoppedAt.error },
  };
}
