import { STATE_ITEM, expiryFields } from './item-kinds.js';
import { DEFAULT_PRIORITY, DEFAULT_TIMEOUTS, stateOnly, type BlockedCode, type ChangeKind, type DispatchState, type ResultRecord } from '../dispatch/state.js';
import type { StateVersion } from '../events/derive.js';
import type { StoredState } from '../ledger/port.js';
import { retentionStarted } from '../dispatch/state.js';
import { resultIdOf } from '../dispatch/transitions/core.js';
import { attentionKind } from '../dispatch/attention.js';

import { FEED, dispatchIdOfKey, dueShardOf, feedShardOf, inboxKeyOf, inboxSortKey, originKeyOf, originOfKey, recentShardOf, waitKeyOf, waitSortKey } from './ledger-keys.js';

import { type Item, withoutNulls, idHash, isNumber, isString, checked } from './item-codec.js';

/**
 * The dispatch's hot state as a table item (`D#{id}`/`STATE`): its index keys worked out from the state,
 * the fields left out while they hold their defaults, and the checks the item must pass to be read back.
 */

/**
 * The hot state item. Kept small (≤ 1 KB for usual ids): the dispatch id and origin live only in the
 * keys, nulls are not stored, and the history sort key carries a hash of the id rather than the id.
 */
export function stateItem(state: DispatchState, write: WriteOf, retentionSeconds: number, inboxShards = 1): Item {
  const { dispatchId, origin, dueAt, createdAt: _created, sentAt, ...rest } = stateOnly(state);
  // Kept within one write unit: what the codec can restore is not stored (the defaults, the creation
  // time the history key carries, the current run's id its receipts repeat, the result's id and attempt).
  const { timeouts, supersededRuns, deliveryMode, receipts, result: currentResult, ...others } = rest;
  const compact: Record<string, unknown> = {
    ...others,
    // The write's own, beside the state: the version it wrote (the next write's condition) and what it changed (the events it means).
    version: write.version,
    changes: write.changes,
    ...(isDefaultTimeouts(timeouts) ? {} : { timeouts }),
    ...(supersededRuns.length > 0 ? { supersededRuns } : {}),
    ...(deliveryMode === 'callback' ? {} : { deliveryMode }),
    receipts: receipts.map((receipt) => ('runId' in receipt && receipt.attempt === state.attempt && receipt.runId === state.runId ? withoutRunId(receipt) : receipt)),
    ...(currentResult ? { result: storedResult(currentResult) } : {}),
    // Only while it waits: it orders the wait index, and the hot item stays within one write unit after.
    ...(sentAt && state.phase === 'accepted' && state.waitingFor ? { sentAt } : {}),
  };
  const item: Item = {
    ...STATE_ITEM.key(dispatchId),
    ...(withoutNulls(compact) as Item),
    originKey: originKeyOf(origin, dispatchId),
    createdKey: `${state.createdAt}#${idHash(dispatchId)}`,
    // Like originKey and createdKey, the same in every version: only the first write adds an index entry.
    recentShard: recentShardOf(dispatchId),
  };
  if (dueAt) {
    item.dueShard = dueShardOf(dispatchId);
    item.dueAt = dueAt;
  }
  // On the operator's attention list while it needs a person (sparse: out of the index otherwise),
  // ordered by when the problem began — stable while later writes touch the dispatch.
  const attention = attentionKind(state);
  if (attention) {
    item.feedKey = feedShardOf(FEED.attention(attention), dispatchId);
    item.feedAt = `${state.attentionSince ?? state.updatedAt}#${idHash(dispatchId)}`;
  }
  // In its origin's inbox while its result is out (pending, or claimed: a lease may lapse).
  const result = state.result;
  if (result && (result.state === 'pending' || result.state === 'claimed')) {
    item.inboxKey = inboxKeyOf(state.origin, dispatchId, inboxShards, state.resultDelivery ?? 'after_turn');
    item.inboxAt = inboxSortKey(result, idHash(dispatchId));
  }
  // Waiting for a slot of its target, in priority order (CONTRACT §11).
  if (state.phase === 'accepted' && state.waitingFor === 'capacity') {
    item.waitKey = waitKeyOf(state.target, dispatchId);
    item.waitAt = waitSortKey(state.priority ?? DEFAULT_PRIORITY, origin, state.sentAt ?? state.createdAt, idHash(dispatchId));
  }
  // Retention starts when the dispatch is final (the domain's word: `retentionStarted`).
  return { ...item, ...expiryFields(STATE_ITEM, state, retentionSeconds, retentionStarted(state)) };
}

const isDefaultTimeouts = (timeouts: DispatchState['timeouts']): boolean =>
  timeouts.stallAfterSeconds === DEFAULT_TIMEOUTS.stallAfterSeconds && timeouts.approvalWaitSeconds === DEFAULT_TIMEOUTS.approvalWaitSeconds && timeouts.deliveryGraceSeconds === DEFAULT_TIMEOUTS.deliveryGraceSeconds;
const withoutRunId = (receipt: DispatchState['receipts'][number]): Record<string, unknown> => {
  const { runId: _runId, ...rest } = receipt as DispatchState['receipts'][number] & { runId?: string };
  return rest;
};
/**
 * The result as the state item stores it, in short names (claims and acks rewrite the hot item: it
 * stays within one write unit); its id and attempt are the state's own, restored on read.
 */
const RESULT_FIELD = {
  state: 's',
  readyAt: 'r',
  deliveryAttempts: 'n',
  claimToken: 't',
  leaseUntil: 'l',
  deliveredAt: 'd',
  deliveredBy: 'b',
  droppedReason: 'x',
  droppedAt: 'y',
} as const satisfies Record<Exclude<keyof ResultRecord, 'id' | 'attempt'>, string>;

function storedResult(result: ResultRecord): Record<string, unknown> {
  return Object.fromEntries(Object.entries(RESULT_FIELD).map(([name, short]) => [short, result[name as keyof typeof RESULT_FIELD]]));
}

function resultFieldsOf(stored: Item): Item {
  // Records written with their full names (before the short ones) read as they are.
  if (!('s' in stored)) return stored;
  return Object.fromEntries(Object.entries(RESULT_FIELD).flatMap(([name, short]) => (stored[short] === undefined ? [] : [[name, stored[short]]])));
}


const BLOCKED_CODES: readonly BlockedCode[] = ['invalid_fields', 'unknown_target', 'unknown_parent', 'hop_budget_exceeded', 'target_rejected', 'retry_budget_spent'];
/** States written before the code had a field of its own carried it only as the reason's prefix. */
function legacyBlockedCode(reason: string | null | undefined): BlockedCode | null {
  return BLOCKED_CODES.find((code) => reason === code || reason?.startsWith(`${code}:`)) ?? null;
}

/** What a write puts beside the state in its item: the version it writes and what it changed. */
export type WriteOf = Pick<StateVersion, 'version' | 'changes'>;

/** A state item as the stream shows it: the state, the version that wrote it and what that write changed. */
export function stateVersionOf(item: Item): StateVersion {
  const { version, changes, ...rest } = checked(item, STATE_ITEM.fields);
  return { state: stateOfChecked(rest), version: version as number, changes: (changes as ChangeKind[] | undefined) ?? [] };
}

/** A state item as a writer reads it: the state, and the version the next write is conditioned on. */
export function storedOf(item: Item): StoredState {
  const { state, version } = stateVersionOf(item);
  return { state, version };
}

/** A state item as a reader reads it: the state alone. */
export const stateOf = (item: Item): DispatchState => stateVersionOf(item).state;

function stateOfChecked(item: Item): DispatchState {
  const { pk, sk: _sk, w: _write, dueShard: _shard, recentShard: _recent, originKey, createdKey, expiresAt: _expires, feedKey: _feed, feedAt: _feedAt, inboxKey: _inbox, inboxAt: _inboxAt, waitKey: _wait, waitAt: _waitAt, dueAt, ...rest } = item;
  const stored = rest as Partial<DispatchState>;
  const dispatchId = dispatchIdOfKey(String(pk));
  const attempt = stored.attempt as number;
  const runId = stored.runId ?? null;
  const execution = (stored.execution ?? {}) as Partial<DispatchState['execution']>;
  const submission = (stored.submission ?? {}) as Partial<DispatchState['submission']>;
  return {
    ...(stored as DispatchState),
    dispatchId,
    origin: originOfKey(String(originKey)),
    // Items written before the compact codec carried these themselves.
    createdAt: stored.createdAt ?? String(createdKey).slice(0, String(createdKey).lastIndexOf('#')),
    timeouts: stored.timeouts ?? { ...DEFAULT_TIMEOUTS },
    deliveryMode: stored.deliveryMode ?? 'callback',
    receipts: (stored.receipts ?? []).map((receipt) =>
      (receipt.event === 'dispatch_submitted' || receipt.event === 'dispatch_completed') && !('runId' in receipt && receipt.runId) && receipt.attempt === attempt && runId !== null ? { ...receipt, runId } : receipt,
    ),
    blockedCode: stored.blockedCode ?? legacyBlockedCode(stored.blockedReason),
    blockedReason: stored.blockedReason ?? null,
    runId: stored.runId ?? null,
    lastSeq: stored.lastSeq ?? null,
    supersededRuns: stored.supersededRuns ?? [],
    // What the check settled (expected, missing, its record) as stored; absent before it settles.
    evidence: { ...stored.evidence, outcome: stored.evidence?.outcome ?? 'unverified', expectedCount: stored.evidence?.expectedCount ?? 0, deadline: stored.evidence?.deadline ?? null },
    parentDispatchId: stored.parentDispatchId ?? null,
    submission: { attempts: submission.attempts ?? 0, nextRetryAt: submission.nextRetryAt ?? null, lastError: submission.lastError ?? null },
    execution: {
      status: execution.status ?? null,
      nativeStatus: execution.nativeStatus ?? null,
      ...(execution.nativeDetail ? { nativeDetail: execution.nativeDetail } : {}),
      monitorStatus: execution.monitorStatus ?? null,
      lastActivityAt: execution.lastActivityAt ?? null,
      completedAt: execution.completedAt ?? null,
      pendingApproval: execution.pendingApproval ?? null,
      result: execution.result ?? null,
      ...(execution.unknownLookups ? { unknownLookups: execution.unknownLookups } : {}),
      ...(execution.lastDecision ? { lastDecision: execution.lastDecision } : {}),
      ...(execution.redriven ? { redriven: execution.redriven } : {}),
    },
    dueAt: typeof dueAt === 'string' ? dueAt : null,
    ...(stored.result ? { result: resultRecordOf({ ...resultFieldsOf(stored.result as unknown as Item), id: resultIdOf(dispatchId, attempt, stored.resultRound ?? 0), attempt }, `${String(pk)}/STATE`) } : {}),
    ...(stored.redispatch ? { redispatch: { ...stored.redispatch, supersededRunId: stored.redispatch.supersededRunId ?? null, cancel: stored.redispatch.cancel ?? null } } : {}),
  };
}

/** A stored result record, checked and with its nulls restored. */
export function resultRecordOf(value: unknown, key: string): ResultRecord {
  const record = checked({ pk: key, sk: 'result', ...(value as Item) }, { id: isString, attempt: isNumber, state: (v) => v === 'pending' || v === 'claimed' || v === 'delivered' || v === 'dropped', readyAt: isString, deliveryAttempts: isNumber });
  const { pk: _pk, sk: _sk, ...stored } = record;
  const nulls = { claimToken: null, leaseUntil: null, deliveredAt: null, deliveredBy: null, droppedReason: null, droppedAt: null };
  return { ...nulls, ...stored } as unknown as ResultRecord;
}
