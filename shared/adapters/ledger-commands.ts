import { COLLECTION, DUE_SHARD_CLAIM_ITEM, LIMITED_TARGETS_ITEM, MANUAL_ATTESTATION_ITEM, OPERATOR_RECEIPT_ITEM, SLOT_SHARD_ITEM, expiryFields, type ItemKey, type ItemKind } from './item-kinds.js';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import {
  TransactWriteCommand,
  type PutCommandInput,
  type QueryCommandInput,
  type UpdateCommandInput,
} from '@aws-sdk/lib-dynamodb';
import type { OperatorReceipt } from '../dispatch/receipts.js';
import { type ManualAttestation } from '../dispatch/manual.js';
import { CorruptItemError, type StoredState } from '../ledger/port.js';
import type { DispatchState, NextState } from '../dispatch/state.js';
import { writeCondition } from '../ledger/repository.js';
import { withoutNulls, type Item } from './item-codec.js';
import { stateItem } from './state-item.js';
import { INDEX, newWriteId, WRITE_ID_ATTRIBUTE } from './ledger-keys.js';


/**
 * The ledger table's commands, built from the item kinds (item-kinds.ts) and the item codecs (ledger-items.ts,
 * state-item.ts): each conditional put, query and update the table adapters send, and how their
 * failures are told apart (a lost race from a store error).
 */

export type TransactItem = NonNullable<ConstructorParameters<typeof TransactWriteCommand>[0]['TransactItems']>[number];

export const isUnknown = (state: DispatchState): boolean => state.execution.status === 'unknown';

/**
 * The slot counter updates a state write implies (CONTRACT §11), derived from the two versions — never
 * asked for by a caller: a slot taken (conditioned on the shard's own cap: a cached registration can
 * never let a run past it), given back, or its holder lost or regained sight of (the count of slots
 * unknown runs hold). Written in the same transaction as the state: both or neither, so no slot leaks.
 */
export function slotUpdates(tableName: string, from: DispatchState, next: DispatchState): { readonly items: TransactItem[]; readonly takes: boolean } {
  const taken = next.slot && !from.slot ? next.slot : undefined;
  const freed = from.slot && !next.slot ? from.slot : undefined;
  if (taken) {
    return {
      takes: true,
      items: [{
        Update: {
          TableName: tableName,
          Key: SLOT_SHARD_ITEM.key(next.target, taken.shard),
          // `takenAt`: a full shard became full at its last take or allotment (`slotTotals`' `fullSince`).
          UpdateExpression: 'SET lastOrigin = :origin, takenAt = :at ADD held :one',
          ConditionExpression: 'held < cap',
          ExpressionAttributeValues: { ':origin': next.origin, ':at': taken.at, ':one': 1 },
        },
      }],
    };
  }
  if (freed) {
    return {
      takes: false,
      items: [{
        Update: {
          TableName: tableName,
          Key: SLOT_SHARD_ITEM.key(from.target, freed.shard),
          UpdateExpression: isUnknown(from) ? 'ADD held :minus, unknownHeld :minus' : 'ADD held :minus',
          ExpressionAttributeValues: { ':minus': -1 },
        },
      }],
    };
  }
  if (from.slot && next.slot && isUnknown(from) !== isUnknown(next)) {
    return {
      takes: false,
      items: [{ Update: { TableName: tableName, Key: SLOT_SHARD_ITEM.key(next.target, next.slot.shard), UpdateExpression: 'ADD unknownHeld :delta', ExpressionAttributeValues: { ':delta': isUnknown(next) ? 1 : -1 } } }],
    };
  }
  return { takes: false, items: [] };
}

/** A put of one whole item, as `putItem` sends it: an `Item` always, and no legacy `Expected` (conditions are expressions). */
export type SinglePut = Omit<PutCommandInput, 'Expected' | 'Item'> & { readonly Item: Item };

export const unmarshallItem = (item: NonNullable<ConditionalCheckFailedException['Item']>): Item => unmarshall(item);

export const isConditionFailure = (error: unknown): error is ConditionalCheckFailedException => error instanceof ConditionalCheckFailedException;
/**
 * A state write that overlapped a redispatch's transaction on the same item: the SDK does not retry
 * it, and it is nothing but a lost race — a conflict the caller re-reads and decides again.
 */
export const isTransactionConflict = (error: unknown): boolean => error instanceof Error && error.name === 'TransactionConflictException';


/**
 * The write of one operator receipt: one small item beside the state (never the hot state item), once
 * per dispatch and receiptId. First writer wins; a retry or a concurrent writer gets the stored receipt
 * back (ALL_OLD) to compare payload hashes.
 */
export function operatorReceiptPut(tableName: string, receipt: OperatorReceipt, retentionSeconds: number): SinglePut {
  return writtenOnce(tableName, OPERATOR_RECEIPT_ITEM, OPERATOR_RECEIPT_ITEM.key(receipt.dispatchId, receipt.receiptId), receipt, retentionSeconds);
}

/** A record people wrote (an operator receipt, a manual attestation) as its own item, once per key; the stored one back when it exists. */
export function writtenOnce(tableName: string, kind: Pick<ItemKind<never>, 'ttl'>, key: ItemKey, record: { readonly recordedAt: string }, retentionSeconds: number): SinglePut {
  return onceOnly(tableName, { ...key, ...(withoutNulls(record) as Item), ...expiryFields(kind, record, retentionSeconds) });
}

/** A put of an item that is written once: refused when its key exists, with the stored item back (ALL_OLD). */
export const onceOnly = (tableName: string, item: Item): SinglePut => ({ TableName: tableName, Item: item, ConditionExpression: 'attribute_not_exists(pk)', ReturnValuesOnConditionCheckFailure: 'ALL_OLD' });

/** Every operator receipt of a dispatch: its partition, sort keys with the receipt prefix, strongly consistent. */
export function operatorReceiptsQuery(tableName: string, dispatchId: string, startKey?: Record<string, unknown>): QueryCommandInput {
  return collectionQuery(tableName, COLLECTION.operatorReceipts(dispatchId), startKey);
}

/**
 * A manual attestation (CONTRACT §13), written once per dispatch and attestationId; the existing one
 * back when it was not. It must outlive the state it moved (whose retention starts only when a person
 * ends the wait), so it expires like the anchor: twice the retention.
 */
export function manualAttestationPut(tableName: string, attestation: ManualAttestation, retentionSeconds: number): SinglePut {
  return writtenOnce(tableName, MANUAL_ATTESTATION_ITEM, MANUAL_ATTESTATION_ITEM.key(attestation.dispatchId, attestation.attestationId), attestation, retentionSeconds);
}

/** One kind of item of a dispatch's partition, in sort-key order, strongly consistent. */
export function collectionQuery(tableName: string, collection: { readonly pk: string; readonly prefix: string }, startKey?: Record<string, unknown>): QueryCommandInput {
  return {
    TableName: tableName,
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
    ExpressionAttributeValues: { ':pk': collection.pk, ':prefix': collection.prefix },
    ConsistentRead: true,
    ExclusiveStartKey: startKey,
  };
}

/** Items read along with others, decoded; undefined when one is corrupt (its own read reports it where it is handled). */
export function decodedOrUndefined<T>(items: readonly Item[], decode: (item: Item) => T): T[] | undefined {
  try {
    return items.map(decode);
  } catch (error) {
    if (error instanceof CorruptItemError) return undefined;
    throw error;
  }
}

/** A range of a dispatch's partition (`RANGE`), both ends included, strongly consistent. */
export function rangeQuery(tableName: string, range: { readonly pk: string; readonly from: string; readonly to: string }): QueryCommandInput {
  return {
    TableName: tableName,
    KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
    ExpressionAttributeValues: { ':pk': range.pk, ':from': range.from, ':to': range.to },
    ConsistentRead: true,
  };
}

/**
 * The write of a state transition. Its condition is the state machine's (`writeCondition`): the version
 * and phase read, or, for a state never stored, that none exists — an illegal move throws before any
 * request is sent. Or the item is this very write (its write id): a write DynamoDB applied but whose
 * answer was lost is sent again by the SDK, and must succeed, not meet itself as another's conflict.
 */
export function statePut(tableName: string, from: StoredState, next: NextState, retentionSeconds: number, inboxShards = 1): SinglePut {
  const condition = writeCondition(from, next);
  const w = newWriteId();
  const version = from.version + 1;
  return {
    TableName: tableName,
    Item: { ...stateItem(next, { version, changes: next.changes }, retentionSeconds, inboxShards), [WRITE_ID_ATTRIBUTE]: w },
    // The write itself, still as it wrote it: its id and its version (a writer of an earlier release keeps
    // an id it read, so the id alone could put this version back over that writer's newer one).
    ...(condition.create
      ? { ConditionExpression: 'attribute_not_exists(pk) OR (w = :w AND version = :n)', ExpressionAttributeValues: { ':w': w, ':n': version }, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' }
      : { ConditionExpression: '(version = :v AND phase = :p) OR (w = :w AND version = :n)', ExpressionAttributeValues: { ':w': w, ':n': version, ':v': condition.version, ':p': condition.phase } }),
  };
}

/** A state write (`statePut`) inside a transaction: the same item, condition and values. */
export const transactPut = ({ TableName, Item, ConditionExpression, ExpressionAttributeValues }: SinglePut): TransactItem => ({ Put: { TableName, Item, ConditionExpression, ExpressionAttributeValues } });

/**
 * One page of a due shard: `dueAt <= now`, the longest due first, from where the last page ended. The
 * index is eventually consistent; the monitor re-reads each entry by key. An entry the tick moves out
 * of the range does not move the position: a page never returns what an earlier page of the tick did.
 */
export function duePageQuery(tableName: string, shard: string, now: Date, pageSize: number, startKey?: Record<string, unknown>): QueryCommandInput {
  return {
    TableName: tableName,
    IndexName: INDEX.due,
    KeyConditionExpression: 'dueShard = :shard AND dueAt <= :now',
    ExpressionAttributeValues: { ':shard': shard, ':now': now.toISOString() },
    Limit: pageSize,
    ExclusiveStartKey: startKey,
  };
}

/**
 * A monitor tick's claim on a due shard (CONTRACT §14: a tick never overlaps its own work on a shard).
 * Timeline: tick A claims (until its invocation's end) → tick B's claim fails the condition and B skips
 * the shard → A releases (REMOVE holder) → the next claim succeeds. If A dies, its lease lapses: a claim
 * whose `now` (the clock at that write, never a tick's start) is past `leaseUntil` takes it over.
 */
export function dueShardClaimUpdate(tableName: string, shard: string, holder: string, now: Date, until: Date): UpdateCommandInput {
  return {
    TableName: tableName,
    Key: DUE_SHARD_CLAIM_ITEM.key(shard),
    UpdateExpression: 'SET holder = :holder, leaseUntil = :until',
    // The holder's own claim too: a claim whose answer was lost is sent again and must not meet itself as another's.
    ConditionExpression: 'attribute_not_exists(holder) OR leaseUntil < :now OR holder = :holder',
    ExpressionAttributeValues: { ':holder': holder, ':until': until.toISOString(), ':now': now.toISOString() },
  };
}

/** Ends a due shard's claim, only the holder's own (one taken over after a lapse is another tick's). */
export function dueShardReleaseUpdate(tableName: string, shard: string, holder: string): UpdateCommandInput {
  return {
    TableName: tableName,
    Key: DUE_SHARD_CLAIM_ITEM.key(shard),
    UpdateExpression: 'REMOVE holder, leaseUntil',
    ConditionExpression: 'holder = :holder',
    ExpressionAttributeValues: { ':holder': holder },
  };
}

/**
 * One slot allotment's cap writes, one per shard (CONTRACT §11). Caps allotted from the holds (`held`:
 * what each shard held when read) are each conditioned on the shard holding no more than that, so at
 * commit each cap is ≥ what its shard holds; caps of 0 (a drain, or no limit: `held` undefined) are
 * right whatever is held and are conditioned on nothing. A settle also keeps the limit it read.
 */
export function slotCapUpdates(table: string, target: string, allotment: { readonly caps: readonly number[]; readonly limit: number | undefined; readonly held: readonly number[] | undefined; readonly settle: boolean; readonly at: string }): TransactItem[] {
  const { caps, limit, held, settle, at } = allotment;
  return caps.map((cap, shard) => ({
    Update: {
      TableName: table,
      Key: SLOT_SHARD_ITEM.key(target, shard),
      UpdateExpression: 'SET cap = :cap, #limit = :limit, allottedAt = :at, held = if_not_exists(held, :zero), unknownHeld = if_not_exists(unknownHeld, :zero)',
      ExpressionAttributeNames: { '#limit': 'limit' },
      ...(held === undefined
        ? { ExpressionAttributeValues: { ':cap': cap, ':limit': limit ?? 0, ':zero': 0, ':at': at } }
        : {
            ConditionExpression: `(attribute_not_exists(held) OR held <= :held)${settle ? ' AND (attribute_not_exists(#limit) OR #limit = :limit)' : ''}`,
            ExpressionAttributeValues: { ':cap': cap, ':limit': limit ?? 0, ':zero': 0, ':at': at, ':held': held[shard] ?? 0 },
          }),
    },
  }));
}

/** The limited targets' count of a target's shards: never shrinks under another allotment's; a registration's caps never replace a newer one's (`rev`). */
export function shardCountUpdate(table: string, target: string, write: { readonly count: number; readonly rev: number | undefined; readonly onlyIfNone: boolean }): TransactItem {
  const { count, rev, onlyIfNone } = write;
  const countCondition = onlyIfNone ? 'attribute_not_exists(#count)' : '(attribute_not_exists(#count) OR #count <= :count)';
  return {
    Update: {
      TableName: table,
      Key: LIMITED_TARGETS_ITEM.key(),
      ...(rev === undefined
        ? {
            UpdateExpression: 'SET #count = :count',
            ConditionExpression: countCondition,
            ExpressionAttributeNames: { '#count': `shards:${target}` },
            ExpressionAttributeValues: { ':count': count },
          }
        : {
            UpdateExpression: 'SET #count = :count, #rev = :rev',
            ConditionExpression: `${countCondition} AND (attribute_not_exists(#rev) OR #rev <= :rev)`,
            ExpressionAttributeNames: { '#count': `shards:${target}`, '#rev': `rev:${target}` },
            ExpressionAttributeValues: { ':count': count, ':rev': rev },
          }),
    },
  };
}
