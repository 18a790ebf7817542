import { clipBytes } from '../text.js';
import type { OperatorReceipt } from '../dispatch/receipts.js';
import { type DispatchState } from '../dispatch/state.js';
import type { SlotShard } from '../dispatch/slots.js';
import { CorruptItemError } from '../ledger/port.js';
import { DEFAULT_ORIGIN_SETTINGS, type LambdaFailureRecord, type OriginSettings, type ResultBody, type AcceptedMessage, type EvidenceCheck, type EvidenceMark, type EvidenceUpload, type OriginRejection, type PastAttempt, type Refusal, type Rejection } from '../dispatch/records.js';
import type { Principal } from '../principals/principals.js';
import type { TargetRegistration } from '../targets/port.js';
import type { StreamItem } from '../events/derive.js';

import { DISPATCH, FEED, KEY, OPERATOR_RECEIPT_PREFIX, ORIGIN_REJECTION_PK, REFUSAL_PK, TTL_ATTRIBUTE, feedShardOf, isRejectionItemKey, monthKey, originRejectionKeyOf } from './ledger-keys.js';

import { type Item, withoutNulls, expiryOf, ANCHOR_RETENTION_FACTOR, isString, isNumber, isBoolean, isObject, isArray, optional, keyOf, checked } from './item-codec.js';
import { resultRecordOf, stateOf } from './state-item.js';
/**
 * The ledger table's item codecs: how each record is stored and read back — every stored item is
 * decoded and checked, never cast (a shape its key does not promise is a CorruptItemError). The keys,
 * shards and indexes they are stored under: `ledger-keys.ts`. Kept free of SDK code so the publisher
 * can decode stream images without bundling the DynamoDB client.
 */

export { CorruptItemError };

export function resultBodyItem(body: ResultBody, retentionSeconds: number): Item {
  return { ...KEY.resultBody(body.dispatchId, body.attempt, body.seq, body.digest), ...(withoutNulls(body) as Item), [TTL_ATTRIBUTE]: expiryOf(body.at, retentionSeconds) };
}

export function resultBodyOf(item: Item): ResultBody {
  const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = checked(item, { dispatchId: isString, attempt: isNumber, seq: isNumber, bytes: isNumber, at: isString, json: optional(isString), bodyRef: optional(isString), digest: optional(isString) });
  return { json: null, preview: null, bodyRef: null, ...rest } as unknown as ResultBody;
}

export { DEFAULT_ORIGIN_SETTINGS };

export function lambdaFailureOf(item: Item): LambdaFailureRecord {
  const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = checked(item, { dispatchId: isString, attempt: isNumber, runId: isString, errorType: isString, errorMessage: isString, at: isString });
  return { requestId: '', condition: '', ...rest } as unknown as LambdaFailureRecord;
}

export function originSettingsOf(item: Item): OriginSettings {
  const { maxDeliveryAttempts, resultTtlHours } = checked(item, { maxDeliveryAttempts: optional(isNumber), resultTtlHours: optional(isNumber) });
  return {
    maxDeliveryAttempts: typeof maxDeliveryAttempts === 'number' ? maxDeliveryAttempts : DEFAULT_ORIGIN_SETTINGS.maxDeliveryAttempts,
    resultTtlHours: typeof resultTtlHours === 'number' ? resultTtlHours : DEFAULT_ORIGIN_SETTINGS.resultTtlHours,
  };
}

/**
 * The accepted message item. The task is stored as its canonical JSON text, never as a map: DynamoDB
 * refuses attributes nested deeper than 32 levels, and a task may be nested 64 (CONTRACT §1 v2).
 */
export function messageItem(message: AcceptedMessage, retentionSeconds: number): Item {
  const content = message.content.valid && message.content.task !== null ? { ...message.content, task: null, taskJson: JSON.stringify(message.content.task) } : message.content;
  return {
    ...KEY.message(message.dispatchId),
    ...message,
    content,
    [TTL_ATTRIBUTE]: expiryOf(message.receivedAt, retentionSeconds * ANCHOR_RETENTION_FACTOR),
  };
}

export function messageOf(item: Item): AcceptedMessage {
  const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = checked(item, {
    dispatchId: isString,
    origin: isString,
    contentHash: isString,
    messageId: isString,
    receivedAt: isString,
    claimUntil: isString,
    claimBy: optional(isString),
    'content.valid': isBoolean,
  });
  // What the use cases read of a valid message: its target, refs and clocks.
  if ((rest.content as Item).valid === true) {
    checked(item, {
      'content.target': isString,
      'content.expectedEvidence': isArray,
      'content.timeouts.stallAfterSeconds': isNumber,
      'content.timeouts.approvalWaitSeconds': isNumber,
      'content.timeouts.deliveryGraceSeconds': isNumber,
      'content.maxHops': isNumber,
    });
  }
  const content = rest.content as Item;
  if (content.valid === true && typeof content.taskJson === 'string') {
    const { taskJson, ...others } = content;
    let task: unknown;
    try {
      task = JSON.parse(taskJson);
    } catch {
      throw new CorruptItemError(keyOf(item), 'content.taskJson is not JSON');
    }
    return { ...rest, content: { ...others, task } } as unknown as AcceptedMessage;
  }
  return rest as unknown as AcceptedMessage;
}

export function checkOf(item: Item): EvidenceCheck {
  const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = checked(item, {
    dispatchId: isString,
    attempt: isNumber,
    outcome: isString,
    expected: isArray,
    found: isArray,
    missing: isArray,
    checkedAt: isString,
    files: optional(isArray),
  });
  return { ...rest, files: rest.files ?? [], error: rest.error ?? null } as unknown as EvidenceCheck;
}

/** Nulls were left out when it was written (withoutNulls): restored here; validated by the view's audit. */
export function operatorReceiptOf(item: Item): OperatorReceipt {
  return { ...writtenRecordOf(item), note: item.note ?? null } as unknown as OperatorReceipt;
}

/**
 * A manual attestation's item as written, keys and TTL off. The table adapter decodes it through its
 * stored schema (`manualAttestationOf` in ledger-table.ts): this module stays free of zod, so the
 * publisher and retention bundles that decode stream images carry none.
 */
export function writtenAttestationOf(item: Item): { readonly key: string; readonly record: Item } {
  return { key: keyOf(item), record: writtenRecordOf(item) };
}

/** A record people wrote (an operator receipt, a manual attestation) without its keys and TTL, its evidenceRef null when left out. */
function writtenRecordOf(item: Item): Item {
  const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = item;
  return { ...rest, evidenceRef: rest.evidenceRef ?? null };
}

/** A rejection as stored: its own item, in the month's rejection feed (sharded), ordered by when and which message. */
export function rejectionItem(rejection: Rejection, retentionSeconds: number): Item {
  return {
    ...KEY.rejection(rejection.messageId),
    ...rejection,
    feedKey: feedShardOf(FEED.rejections(monthKey(new Date(rejection.at))), rejection.messageId),
    feedAt: `${rejection.at}#${rejection.messageId}`,
    [TTL_ATTRIBUTE]: expiryOf(rejection.at, retentionSeconds),
  };
}

export function rejectionOf(item: Item): Rejection {
  const { pk: _pk, sk: _sk, feedKey: _feed, feedAt: _at, expiresAt: _expires, ...rest } = checked(item, { messageId: isString, at: isString, reason: isString });
  return { dispatchId: null, origin: null, senderId: null, bodyRef: null, ...rest } as unknown as Rejection;
}

/**
 * The keys of what the intake writes besides a rejection (CONTRACT §15 v3), kept out of `KEY` so the API's
 * bundle, which only reads them through their lists, does not carry them:
 * - what the origin of a refused message is told of it, keyed by the message (a redelivery rewrites it);
 * - a refused message of `origin` that named `dispatchId`, in the id's own partition (not the dispatch's:
 *   it may be another origin's, or none yet).
 */
export const REJECTION_LISTING_KEY = {
  originRejection: (messageId: string) => ({ pk: `${ORIGIN_REJECTION_PK}${messageId}`, sk: 'ORIGIN' }),
  refusal: (dispatchId: string, origin: string, at: string, messageId: string) => ({ pk: `${REFUSAL_PK}${dispatchId}`, sk: `${origin}#${at}#${messageId}` }),
} as const;

/** The preview of its own body an origin's rejection entry keeps, in UTF-8 bytes (the entry stays within one write unit). */
export const ORIGIN_REJECTION_PREVIEW_BYTES = 512;

/**
 * What a refused message's origin is told of it (CONTRACT §15 v3), in its origin's list: the message's
 * own id, reason, time, the dispatchId it named and a bounded preview of its own body — never anything
 * of the dispatch that may own that id (its origin, its content).
 */
export function originRejectionItem(rejection: OriginRejection, retentionSeconds: number): Item {
  return {
    ...REJECTION_LISTING_KEY.originRejection(rejection.messageId),
    // Bounded here, whatever the rejection kept inline (up to 8 KB): the entry is one write unit, twice with its index entry.
    ...(withoutNulls({ ...rejection, bodyPreview: clipBytes(rejection.bodyPreview, ORIGIN_REJECTION_PREVIEW_BYTES) }) as Item),
    feedKey: originRejectionKeyOf(rejection.origin, rejection.messageId),
    feedAt: `${rejection.at}#${rejection.messageId}`,
    [TTL_ATTRIBUTE]: expiryOf(rejection.at, retentionSeconds),
  };
}

export function originRejectionOf(item: Item): OriginRejection {
  const { pk: _pk, sk: _sk, feedKey: _feed, feedAt: _at, expiresAt: _expires, ...rest } = checked(item, { messageId: isString, at: isString, reason: isString, origin: isString, bodyPreview: isString, bodyBytes: isNumber });
  return { dispatchId: null, ...rest } as unknown as OriginRejection;
}

/** A refused message of the origin that named a dispatch id: what the owner's view lists as `conflicts`. */
export function refusalItem(dispatchId: string, origin: string, refusal: Refusal, retentionSeconds: number): Item {
  return { ...REJECTION_LISTING_KEY.refusal(dispatchId, origin, refusal.at, refusal.messageId), ...refusal, [TTL_ATTRIBUTE]: expiryOf(refusal.at, retentionSeconds) };
}

export function refusalOf(item: Item): Refusal {
  const { messageId, at, reason } = checked(item, { messageId: isString, at: isString, reason: isString });
  return { messageId, at, reason } as Refusal;
}

export function markOf(item: Item): EvidenceMark {
  const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = checked(item, { dispatchId: isString, attempt: isNumber, ref: isString, status: isString, at: isString });
  return { reason: '', ...rest } as unknown as EvidenceMark;
}

export function uploadOf(item: Item): EvidenceUpload {
  const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = checked(item, { ref: isString, sha256: isString, bytes: isNumber });
  return rest as unknown as EvidenceUpload;
}

export function targetOf(item: Item): TargetRegistration {
  if (item.kind === 'manual') return { name: checked(item, { name: isString }).name as string, kind: 'manual' };
  if (item.kind === 'lambda') {
    const { pk: _pk, sk: _sk, registrationRev: _rev, ...rest } = checked(item, { name: isString, functionArn: isString, timeoutSeconds: isNumber, stateTable: optional(isString), maxConcurrentRuns: optional(isNumber) });
    return rest as unknown as TargetRegistration;
  }
  const { pk: _pk, sk: _sk, registrationRev: _rev, ...rest } = checked(item, { name: isString, kind: (value) => value === 'http', baseUrl: isString, secretRef: optional(isString), maxConcurrentRuns: optional(isNumber) });
  return rest as unknown as TargetRegistration;
}

export function principalOf(item: Item): Principal {
  const { pk: _pk, sk: _sk, principalId: _id, ...rest } = checked(item, { role: (value) => value === 'origin' || value === 'target' || value === 'operator' });
  return rest as unknown as Principal;
}

export function pastAttemptItem(past: PastAttempt, retentionSeconds: number): Item {
  return { ...KEY.pastAttempt(past.dispatchId, past.attempt, past.stateVersion), ...(withoutNulls(past) as Item), [TTL_ATTRIBUTE]: expiryOf(past.endedAt, retentionSeconds * ANCHOR_RETENTION_FACTOR) };
}

export function pastAttemptOf(item: Item): PastAttempt {
  const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = checked(item, { dispatchId: isString, attempt: isNumber, receipts: isArray, execution: isObject, endedAt: isString, superseded: isBoolean, stateVersion: isNumber });
  const past = { runId: null, reason: '', ...rest } as unknown as PastAttempt;
  return past.result ? { ...past, result: resultRecordOf(past.result, keyOf(item)) } : past;
}

/** Decodes an unmarshalled item (e.g. a stream record's NewImage/OldImage) by its key shape, as the domain's `StreamItem` (events/derive.ts). */
export function decodeItem(item: Record<string, unknown> | undefined): StreamItem {
  if (!item) return { kind: 'other' };
  const pk = String(item.pk ?? '');
  const sk = String(item.sk ?? '');
  try {
    if (pk.startsWith(DISPATCH) && sk === 'STATE') return { kind: 'state', state: stateOf(item) };
    if (pk.startsWith(DISPATCH) && sk === 'MSG') return { kind: 'message', message: messageOf(item) };
    if (isRejectionItemKey(pk, sk)) return { kind: 'rejection', rejection: rejectionOf(item) };
    if (pk.startsWith(DISPATCH) && sk.startsWith('CHECK#')) return { kind: 'check', check: checkOf(item) };
    if (pk.startsWith(DISPATCH) && sk.startsWith(OPERATOR_RECEIPT_PREFIX)) return { kind: 'operator_receipt', receipt: operatorReceiptOf(item) };
  } catch (error) {
    if (error instanceof CorruptItemError) return { kind: 'corrupt', key: error.key, problem: error.problem };
    throw error;
  }
  return { kind: 'other' };
}

/** A slot shard as stored (an absent counter reads as 0; a shard never written has cap 0). */
export function slotShardOf(shard: number, item: Item | undefined): SlotShard {
  if (!item) return { shard, cap: 0, held: 0, unknownHeld: 0, lastOrigin: null };
  const { cap, held, unknownHeld, lastOrigin, limit, takenAt, allottedAt } = checked(item, {
    cap: optional(isNumber),
    held: optional(isNumber),
    unknownHeld: optional(isNumber),
    lastOrigin: optional(isString),
    limit: optional(isNumber),
    takenAt: optional(isString),
    allottedAt: optional(isString),
  });
  return {
    shard,
    cap: typeof cap === 'number' ? cap : 0,
    held: typeof held === 'number' ? held : 0,
    unknownHeld: typeof unknownHeld === 'number' ? unknownHeld : 0,
    lastOrigin: typeof lastOrigin === 'string' ? lastOrigin : null,
    // The limit in force, kept beside the caps by every allotment (CONTRACT §11: a drain's caps are 0).
    ...(typeof limit === 'number' ? { limit } : {}),
    ...(typeof takenAt === 'string' ? { takenAt } : {}),
    ...(typeof allottedAt === 'string' ? { allottedAt } : {}),
  };
}
