import { createHash } from 'node:crypto';
import type { OperatorReceipt } from '../dispatch/receipts.js';
import { TERMINAL_STATUSES, type DispatchState } from '../dispatch/state.js';
import { attentionKind } from '../dispatch/attention.js';
import type { AcceptedMessage, EvidenceCheck, Rejection } from '../ledger/port.js';
import type { TargetRunStatus } from '../targets/port.js';
import type { AttributeDefinition, GlobalSecondaryIndex, KeySchemaElement } from '@aws-sdk/client-dynamodb';

/**
 * The ledger table's items: every key shape and item codec is in this module, every access pattern in
 * `ledger-table.ts` (no other file spells pk, sk or an index name). Kept free of SDK code so the
 * publisher can decode stream images without bundling the DynamoDB client.
 *
 * | item               | pk                | sk          | indexes                                              |
 * | ------------------ | ----------------- | ----------- | ---------------------------------------------------- |
 * | dispatch state     | D#{dispatchId}    | STATE       | due (while something is due), byOrigin (always)      |
 * | accepted message   | D#{dispatchId}    | MSG         | —  (the idempotency anchor, with the task payload)   |
 * | evidence mark      | D#{dispatchId}    | MARK#{attempt}#{ref} | —  (an owner's verdict on one file; latest wins) |
 * | evidence check     | D#{dispatchId}    | CHECK#{attempt} | —  (final post-condition outcome; publishes Handled/Orphaned) |
 * | late run event     | D#{dispatchId}    | LATE#{runId}#{seq} | —  (events of superseded runs, for the record) |
 * | operator receipt   | D#{dispatchId}    | OR#{receiptId} | —  (written once; publishes Receipt Recorded; listed with begins_with) |
 * | rejection          | REJ#{messageId}   | REJECTION   | feed: rejections#{yyyy-mm}, newest first             |
 * | target             | T#{name}          | TARGET      | —                                                    |
 * | principal          | P#{principalId}   | PRINCIPAL   | —                                                    |
 *
 * - `due`: sparse, KEYS_ONLY, partitioned over DUE_SHARDS keys so no partition is hot; sorted by due
 *   time. The monitor queries `dueAt <= now` per shard, so its cost follows what is due, never the size
 *   of the history. GSI reads are eventually consistent: the monitor re-reads each item by key.
 * - `byOrigin`: KEYS_ONLY, written once when the state is created (its keys never change, so later
 *   state writes cost no index write); history is newest-first by `createdAt#dispatchId`.
 * - `feed`: rejections (and later other operator lists) by month, newest first.
 */

export const DUE_SHARDS = 16;
export const INDEX = { due: 'due', byOrigin: 'byOrigin', feed: 'feed' } as const;
export const TTL_ATTRIBUTE = 'expiresAt';

export const OPERATOR_RECEIPT_PREFIX = 'OR#';

export const KEY = {
  state: (dispatchId: string) => ({ pk: `D#${dispatchId}`, sk: 'STATE' }),
  message: (dispatchId: string) => ({ pk: `D#${dispatchId}`, sk: 'MSG' }),
  rejection: (messageId: string) => ({ pk: `REJ#${messageId}`, sk: 'REJECTION' }),
  evidenceMark: (dispatchId: string, attempt: number, ref: string) => ({ pk: `D#${dispatchId}`, sk: `${markPrefix(attempt)}${ref}` }),
  evidenceCheck: (dispatchId: string, attempt: number) => ({ pk: `D#${dispatchId}`, sk: `CHECK#${String(attempt).padStart(6, '0')}` }),
  lateEvent: (dispatchId: string, runId: string, seq: number) => ({ pk: `D#${dispatchId}`, sk: `LATE#${runId}#${String(seq).padStart(16, '0')}` }),
  operatorReceipt: (dispatchId: string, receiptId: string) => ({ pk: `D#${dispatchId}`, sk: `${OPERATOR_RECEIPT_PREFIX}${receiptId}` }),
  target: (name: string) => ({ pk: `T#${name}`, sk: 'TARGET' }),
  principal: (principalId: string) => ({ pk: `P#${principalId}`, sk: 'PRINCIPAL' }),
} as const;

/** The month partition of a feed entry (`2026-12`). */
export const monthKey = (date: Date): string => date.toISOString().slice(0, 7);

export const dispatchIdOfKey = (pk: string): string => pk.slice(2);
export const markPrefix = (attempt: number): string => `MARK#${String(attempt).padStart(6, '0')}#`;

export function dueShardOf(dispatchId: string): string {
  const shard = createHash('sha256').update(dispatchId).digest().readUInt8(0) % DUE_SHARDS;
  return `due#${String(shard).padStart(2, '0')}`;
}

/** The table's key schema, indexes, stream and TTL: used by the CDK construct and the local platform alike. */
export const LEDGER_TABLE_DEFINITION: {
  readonly attributeDefinitions: AttributeDefinition[];
  readonly keySchema: KeySchemaElement[];
  readonly globalSecondaryIndexes: GlobalSecondaryIndex[];
  readonly ttlAttribute: string;
} = {
  attributeDefinitions: ['pk', 'sk', 'dueShard', 'dueAt', 'originKey', 'createdKey', 'feedKey', 'feedAt'].map((name) => ({
    AttributeName: name,
    AttributeType: 'S',
  })),
  keySchema: [
    { AttributeName: 'pk', KeyType: 'HASH' },
    { AttributeName: 'sk', KeyType: 'RANGE' },
  ],
  globalSecondaryIndexes: [
    { IndexName: INDEX.due, KeySchema: [{ AttributeName: 'dueShard', KeyType: 'HASH' }, { AttributeName: 'dueAt', KeyType: 'RANGE' }], Projection: { ProjectionType: 'KEYS_ONLY' } },
    { IndexName: INDEX.byOrigin, KeySchema: [{ AttributeName: 'originKey', KeyType: 'HASH' }, { AttributeName: 'createdKey', KeyType: 'RANGE' }], Projection: { ProjectionType: 'KEYS_ONLY' } },
    { IndexName: INDEX.feed, KeySchema: [{ AttributeName: 'feedKey', KeyType: 'HASH' }, { AttributeName: 'feedAt', KeyType: 'RANGE' }], Projection: { ProjectionType: 'ALL' } },
  ],
  ttlAttribute: TTL_ATTRIBUTE,
};

/** The item a failed condition returns (ALL_OLD) comes back in wire format, even through the document client. */
export type Item = Record<string, unknown>;

/** Null fields are left out of the stored item (they cost bytes on every write) and restored on read. */
export function withoutNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutNulls);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== null).map(([name, field]) => [name, withoutNulls(field)]));
}

/** A short, stable tie-breaker for sort keys, instead of repeating a 128-character id. */
export const idHash = (id: string): string => createHash('sha256').update(id).digest('base64url').slice(0, 10);

/**
 * The hot state item. Kept small (≤ 1 KB for usual ids): the dispatch id and origin live only in the
 * keys, nulls are not stored, and the history sort key carries a hash of the id rather than the id.
 */
export function stateItem(state: DispatchState, retentionSeconds: number): Item {
  const { dispatchId, origin, dueAt, ...rest } = state;
  const item: Item = {
    ...KEY.state(dispatchId),
    ...(withoutNulls(rest) as Item),
    originKey: `O#${origin}`,
    createdKey: `${state.createdAt}#${idHash(dispatchId)}`,
  };
  if (dueAt) {
    item.dueShard = dueShardOf(dispatchId);
    item.dueAt = dueAt;
  }
  // On the operator's attention list while it needs a person (sparse: out of the index otherwise).
  const attention = attentionKind(state);
  if (attention) {
    item.feedKey = `attention#${attention}`;
    item.feedAt = `${state.updatedAt}#${idHash(dispatchId)}`;
  }
  // Retention starts when the dispatch reaches a final state: blocked, or a final run whose evidence is settled.
  const settled = state.phase === 'submitted' && TERMINAL_STATUSES.has(state.execution.status as TargetRunStatus) && state.evidence.outcome !== 'pending';
  if (state.phase === 'blocked' || settled) item[TTL_ATTRIBUTE] = Math.floor(Date.parse(state.updatedAt) / 1000) + retentionSeconds;
  return item;
}

export function stateOf(item: Item): DispatchState {
  const { pk, sk: _sk, dueShard: _shard, originKey, createdKey: _created, expiresAt: _expires, feedKey: _feed, feedAt: _feedAt, dueAt, ...rest } = item;
  const stored = rest as Partial<DispatchState>;
  const execution = (stored.execution ?? {}) as Partial<DispatchState['execution']>;
  const submission = (stored.submission ?? {}) as Partial<DispatchState['submission']>;
  return {
    ...(stored as DispatchState),
    dispatchId: dispatchIdOfKey(String(pk)),
    origin: String(originKey).slice(2),
    blockedReason: stored.blockedReason ?? null,
    runId: stored.runId ?? null,
    lastSeq: stored.lastSeq ?? null,
    supersededRuns: stored.supersededRuns ?? [],
    evidence: { outcome: stored.evidence?.outcome ?? 'unverified', expectedCount: stored.evidence?.expectedCount ?? 0, deadline: stored.evidence?.deadline ?? null },
    parentDispatchId: stored.parentDispatchId ?? null,
    submission: { attempts: submission.attempts ?? 0, nextRetryAt: submission.nextRetryAt ?? null, lastError: submission.lastError ?? null },
    execution: {
      status: execution.status ?? null,
      nativeStatus: execution.nativeStatus ?? null,
      monitorStatus: execution.monitorStatus ?? null,
      lastActivityAt: execution.lastActivityAt ?? null,
      completedAt: execution.completedAt ?? null,
      pendingApproval: execution.pendingApproval ?? null,
      result: execution.result ?? null,
    },
    dueAt: typeof dueAt === 'string' ? dueAt : null,
  };
}

export function messageOf(item: Item): AcceptedMessage {
  const { pk: _pk, sk: _sk, ...rest } = item;
  return rest as unknown as AcceptedMessage;
}

export function checkOf(item: Item): EvidenceCheck {
  const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = item;
  return rest as unknown as EvidenceCheck;
}

/** Nulls were left out when it was written (withoutNulls): restored here, anything else as stored. */
export function operatorReceiptOf(item: Item): OperatorReceipt {
  const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = item;
  return { ...rest, evidenceRef: rest.evidenceRef ?? null, note: rest.note ?? null } as unknown as OperatorReceipt;
}

export function rejectionOf(item: Item): Rejection {
  const { pk: _pk, sk: _sk, feedKey: _feed, feedAt: _at, expiresAt: _expires, ...rest } = item;
  return rest as unknown as Rejection;
}

/** What a stream image of the ledger table holds, decoded (the publisher reads the stream). */
export type DecodedItem =
  | { readonly kind: 'state'; readonly state: DispatchState }
  | { readonly kind: 'rejection'; readonly rejection: Rejection }
  | { readonly kind: 'check'; readonly check: EvidenceCheck }
  | { readonly kind: 'operator_receipt'; readonly receipt: OperatorReceipt }
  | { readonly kind: 'other' };

/** Decodes an unmarshalled item (e.g. a stream record's NewImage/OldImage) by its key shape. */
export function decodeItem(item: Record<string, unknown> | undefined): DecodedItem {
  if (!item) return { kind: 'other' };
  const pk = String(item.pk ?? '');
  const sk = String(item.sk ?? '');
  if (pk.startsWith('D#') && sk === 'STATE') return { kind: 'state', state: stateOf(item) };
  if (pk.startsWith('REJ#') && sk === 'REJECTION') return { kind: 'rejection', rejection: rejectionOf(item) };
  if (pk.startsWith('D#') && sk.startsWith('CHECK#')) return { kind: 'check', check: checkOf(item) };
  if (pk.startsWith('D#') && sk.startsWith(OPERATOR_RECEIPT_PREFIX)) return { kind: 'operator_receipt', receipt: operatorReceiptOf(item) };
  return { kind: 'other' };
}
