import { APPROVAL_TOKEN_ITEM, EVIDENCE_CHECK_ITEM, EVIDENCE_MARK_ITEM, EVIDENCE_UPLOAD_ITEM, LAMBDA_FAILURE_ITEM, MESSAGE_ITEM, OPERATOR_RECEIPT_ITEM, ORIGIN_REJECTION_ITEM, ORIGIN_SETTINGS_ITEM, PAST_ATTEMPT_ITEM, PRINCIPAL_ITEM, REFUSAL_ITEM, REJECTION_ITEM, RESULT_BODY_ITEM, SLOT_SHARD_ITEM, STATE_ITEM, TARGET_ITEM, VALID_MESSAGE_FIELDS, expiryFields, isKeyOf } from './item-kinds.js';
import { clipBytes } from '../text.js';
import type { OperatorReceipt } from '../dispatch/receipts.js';
import type { SlotShard } from '../dispatch/slots.js';
import { CorruptItemError } from '../ledger/port.js';
import { DEFAULT_ORIGIN_SETTINGS, type LambdaFailureRecord, type ApprovalTokenRecord, type OriginSettings, type ResultBody, type AcceptedMessage, type EvidenceCheck, type EvidenceMark, type EvidenceUpload, type OriginRejection, type PastAttempt, type Refusal, type Rejection } from '../dispatch/records.js';
import type { Principal } from '../principals/principals.js';
import type { TargetRegistration } from '../targets/port.js';
import type { StreamItem } from '../events/derive.js';

import { FEED, feedShardOf, monthKey, originRejectionKeyOf } from './ledger-keys.js';

import { type Item, withoutNulls, isString, isNumber, optional, keyOf, checked } from './item-codec.js';
import { resultRecordOf, stateVersionOf } from './state-item.js';
/**
 * The ledger table's item codecs: how each record is stored and read back — every stored item is
 * decoded and checked against its kind's declared fields, never cast (a shape its key does not promise
 * is a CorruptItemError). Each kind's key, indexes, TTL and fields: `item-kinds.ts`. Kept free of SDK code so the publisher
 * can decode stream images without bundling the DynamoDB client.
 */

export { CorruptItemError };

export function resultBodyItem(body: ResultBody, retentionSeconds: number): Item {
  return { ...RESULT_BODY_ITEM.key(body.dispatchId, body.attempt, body.seq, body.digest), ...(withoutNulls(body) as Item), ...expiryFields(RESULT_BODY_ITEM, body, retentionSeconds) };
}

export function resultBodyOf(item: Item): ResultBody {
  const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = checked(item, RESULT_BODY_ITEM.fields);
  return { json: null, preview: null, bodyRef: null, ...rest } as unknown as ResultBody;
}

export { DEFAULT_ORIGIN_SETTINGS };

export function lambdaFailureOf(item: Item): LambdaFailureRecord {
  const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = checked(item, LAMBDA_FAILURE_ITEM.fields);
  return { requestId: '', condition: '', ...rest } as unknown as LambdaFailureRecord;
}

export function approvalTokenOf(item: Item): ApprovalTokenRecord {
  const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = checked(item, APPROVAL_TOKEN_ITEM.fields);
  return rest as unknown as ApprovalTokenRecord;
}

export function originSettingsOf(item: Item): OriginSettings {
  const { maxDeliveryAttempts, resultTtlHours } = checked(item, ORIGIN_SETTINGS_ITEM.fields);
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
    ...MESSAGE_ITEM.key(message.dispatchId),
    ...message,
    content,
    ...expiryFields(MESSAGE_ITEM, message, retentionSeconds),
  };
}

export function messageOf(item: Item): AcceptedMessage {
  const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = checked(item, MESSAGE_ITEM.fields);
  // What the use cases read of a valid message: its target, refs and clocks.
  if ((rest.content as Item).valid === true) checked(item, VALID_MESSAGE_FIELDS);
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
  const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = checked(item, EVIDENCE_CHECK_ITEM.fields);
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
    ...REJECTION_ITEM.key(rejection.messageId),
    ...rejection,
    feedKey: feedShardOf(FEED.rejections(monthKey(new Date(rejection.at))), rejection.messageId),
    feedAt: `${rejection.at}#${rejection.messageId}`,
    ...expiryFields(REJECTION_ITEM, rejection, retentionSeconds),
  };
}

export function rejectionOf(item: Item): Rejection {
  const { pk: _pk, sk: _sk, feedKey: _feed, feedAt: _at, expiresAt: _expires, ...rest } = checked(item, REJECTION_ITEM.fields);
  return { dispatchId: null, origin: null, senderId: null, bodyRef: null, ...rest } as unknown as Rejection;
}

/** The preview of its own body an origin's rejection entry keeps, in UTF-8 bytes (the entry stays within one write unit). */
export const ORIGIN_REJECTION_PREVIEW_BYTES = 512;

/**
 * What a refused message's origin is told of it (CONTRACT §15 v3), in its origin's list: the message's
 * own id, reason, time, the dispatchId it named and a bounded preview of its own body — never anything
 * of the dispatch that may own that id (its origin, its content).
 */
export function originRejectionItem(rejection: OriginRejection, retentionSeconds: number): Item {
  return {
    ...ORIGIN_REJECTION_ITEM.key(rejection.messageId),
    // Bounded here, whatever the rejection kept inline (up to 8 KB): the entry is one write unit, twice with its index entry.
    ...(withoutNulls({ ...rejection, bodyPreview: clipBytes(rejection.bodyPreview, ORIGIN_REJECTION_PREVIEW_BYTES) }) as Item),
    feedKey: originRejectionKeyOf(rejection.origin, rejection.messageId),
    feedAt: `${rejection.at}#${rejection.messageId}`,
    ...expiryFields(ORIGIN_REJECTION_ITEM, rejection, retentionSeconds),
  };
}

export function originRejectionOf(item: Item): OriginRejection {
  const { pk: _pk, sk: _sk, feedKey: _feed, feedAt: _at, expiresAt: _expires, ...rest } = checked(item, ORIGIN_REJECTION_ITEM.fields);
  return { dispatchId: null, ...rest } as unknown as OriginRejection;
}

/** A refused message of the origin that named a dispatch id: what the owner's view lists as `conflicts`. */
export function refusalItem(dispatchId: string, origin: string, refusal: Refusal, retentionSeconds: number): Item {
  return { ...REFUSAL_ITEM.key(dispatchId, origin, refusal.at, refusal.messageId), ...refusal, ...expiryFields(REFUSAL_ITEM, refusal, retentionSeconds) };
}

export function refusalOf(item: Item): Refusal {
  const { messageId, at, reason } = checked(item, REFUSAL_ITEM.fields);
  return { messageId, at, reason } as Refusal;
}

export function markOf(item: Item): EvidenceMark {
  const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = checked(item, EVIDENCE_MARK_ITEM.fields);
  return { reason: '', ...rest } as unknown as EvidenceMark;
}

export function uploadOf(item: Item): EvidenceUpload {
  const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = checked(item, EVIDENCE_UPLOAD_ITEM.fields);
  return rest as unknown as EvidenceUpload;
}

export function targetOf(item: Item): TargetRegistration {
  if (item.kind === 'manual') return { name: checked(item, TARGET_ITEM.fields).name as string, kind: 'manual' };
  if (item.kind === 'lambda') {
    const { pk: _pk, sk: _sk, registrationRev: _rev, ...rest } = checked(item, { name: isString, functionArn: isString, timeoutSeconds: isNumber, stateTable: optional(isString), maxConcurrentRuns: optional(isNumber) });
    return rest as unknown as TargetRegistration;
  }
  if (item.kind === 'durable') {
    const { pk: _pk, sk: _sk, registrationRev: _rev, ...rest } = checked(item, { name: isString, functionArn: isString, maxConcurrentRuns: optional(isNumber) });
    return rest as unknown as TargetRegistration;
  }
  if (item.kind === 'stepfunctions') {
    const { pk: _pk, sk: _sk, registrationRev: _rev, ...rest } = checked(item, { name: isString, stateMachineArn: isString, roleId: optional(isString), maxConcurrentRuns: optional(isNumber) });
    return rest as unknown as TargetRegistration;
  }
  const { pk: _pk, sk: _sk, registrationRev: _rev, ...rest } = checked(item, { name: isString, kind: (value) => value === 'http', baseUrl: isString, secretRef: optional(isString), maxConcurrentRuns: optional(isNumber) });
  return rest as unknown as TargetRegistration;
}

export function principalOf(item: Item): Principal {
  const { pk: _pk, sk: _sk, principalId: _id, ...rest } = checked(item, PRINCIPAL_ITEM.fields);
  return rest as unknown as Principal;
}

export function pastAttemptItem(past: PastAttempt, retentionSeconds: number): Item {
  return { ...PAST_ATTEMPT_ITEM.key(past.dispatchId, past.attempt, past.stateVersion), ...(withoutNulls(past) as Item), ...expiryFields(PAST_ATTEMPT_ITEM, past, retentionSeconds) };
}

export function pastAttemptOf(item: Item): PastAttempt {
  const { pk: _pk, sk: _sk, expiresAt: _expires, ...rest } = checked(item, PAST_ATTEMPT_ITEM.fields);
  const past = { runId: null, reason: '', ...rest } as unknown as PastAttempt;
  return past.result ? { ...past, result: resultRecordOf(past.result, keyOf(item)) } : past;
}

/**
 * The one decoder of the items a stream carries: an unmarshalled item (a stream record's NewImage or
 * OldImage) told by its key as one of the kinds the domain reads from the stream (`StreamItem`,
 * events/derive.ts), decoded by that kind's codec. The table's own reads decode the kind they asked for
 * with the same codecs.
 */
const STREAM_KINDS: ReadonlyArray<readonly [Parameters<typeof isKeyOf>[0], (item: Item) => StreamItem]> = [
  [STATE_ITEM, (item) => ({ kind: 'state', ...stateVersionOf(item) })],
  [MESSAGE_ITEM, (item) => ({ kind: 'message', message: messageOf(item) })],
  [REJECTION_ITEM, (item) => ({ kind: 'rejection', rejection: rejectionOf(item) })],
  [EVIDENCE_CHECK_ITEM, (item) => ({ kind: 'check', check: checkOf(item) })],
  [OPERATOR_RECEIPT_ITEM, (item) => ({ kind: 'operator_receipt', receipt: operatorReceiptOf(item) })],
];

export function decodeItem(item: Record<string, unknown> | undefined): StreamItem {
  if (!item) return { kind: 'other' };
  const pk = String(item.pk ?? '');
  const sk = String(item.sk ?? '');
  const decode = STREAM_KINDS.find(([kind]) => isKeyOf(kind, pk, sk))?.[1];
  if (!decode) return { kind: 'other' };
  try {
    return decode(item);
  } catch (error) {
    if (error instanceof CorruptItemError) return { kind: 'corrupt', key: error.key, problem: error.problem };
    throw error;
  }
}

/** A slot shard as stored (an absent counter reads as 0; a shard never written has cap 0). */
export function slotShardOf(shard: number, item: Item | undefined): SlotShard {
  if (!item) return { shard, cap: 0, held: 0, unknownHeld: 0, lastOrigin: null };
  const { cap, held, unknownHeld, lastOrigin, limit, takenAt, allottedAt } = checked(item, SLOT_SHARD_ITEM.fields);
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
