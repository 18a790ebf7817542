import { COUNT_SHARDS, DISPATCH, INDEX, ORIGIN_REJECTION_PK, REFUSAL_PK, TTL_ATTRIBUTE, digestOf, pad } from './ledger-keys.js';

/** Run ids longer than this many bytes go into sort keys as their digest (a sort key holds at most 1,024 bytes). */
export const RUN_KEY_MAX_BYTES = 256;

/**
 * A run id as a sort key's part: itself while short, a digest (`~` and 43 characters) when longer — a
 * durable execution's ARN may take 1,024 characters (CONTRACT §17) — or when it starts with `~` itself,
 * so no two run ids ever share a key. The item keeps the run id whole in its fields.
 */
export const runKeyOf = (runId: string): string => (Buffer.byteLength(runId, 'utf8') <= RUN_KEY_MAX_BYTES && !runId.startsWith('~') ? runId : `~${digestOf(runId).toString('base64url')}`);
import { type Check, type Item, expiryOf, isArray, isBoolean, isNumber, isObject, isString, optional } from './item-codec.js';

/**
 * Every kind of item the ledger table holds, each declared once: its key template, the stored keys that
 * are its own, the indexes it is listed in, how long it lives, and the fields a stored item must carry
 * to be read back. The writers (`ledger-items.ts`, `state-item.ts`, `ledger-commands.ts`, the table
 * adapters) build their items from these declarations, the codecs check the declared fields (an operator
 * receipt's and a manual attestation's are checked by their own schemas where they are read; a late
 * event is never read back) and the one decoder (`decodeItem`, `ledger-items.ts`) tells an item's kind by them; `test/unit/item-kinds.test.ts` holds every writer to
 * its declaration. Shards and sort keys of the indexes: `ledger-keys.ts`.
 *
 * Each kind is an export of its own, so a function's bundle carries only the kinds it reads or writes.
 * The field checks are the house's own (`item-codec.ts`), not zod: the stream publisher decodes items and
 * zod would add 17 KB to its bundle (docs/architecture.md "Items").
 */

export type IndexName = (typeof INDEX)[keyof typeof INDEX];

/**
 * How long an item lives (DynamoDB TTL, `expiresAt`):
 * - `after`: the deployment's retention × `factor` after the record's own time `from` (a record that must
 *   outlive the state it belongs to lives twice the retention);
 * - `once final`: the retention after the state's last write, set only once the dispatch is final
 *   (`retentionStarted`, the domain's word): a live dispatch never expires;
 * - `never`: configuration and counters.
 */
export type TtlRule = { readonly kind: 'after'; readonly from: string; readonly factor: 1 | 2 } | { readonly kind: 'once final'; readonly from: 'updatedAt' } | { readonly kind: 'never' };

export type ItemKey = {
  readonly pk: string;
  readonly sk: string;
};

export interface ItemKind<A extends readonly unknown[]> {
  /** The key template. */
  readonly key: (...args: A) => ItemKey;
  /** Its stored keys: the partition key starts with `pk`, the sort key is `sk`, or starts with it when `skPrefix`. */
  readonly pk: string;
  readonly sk: string;
  readonly skPrefix?: boolean;
  /** The indexes an item of this kind may be listed in (sparse: only while the item has the index's keys); none when absent. */
  readonly indexes?: readonly IndexName[];
  readonly ttl: TtlRule;
  /** What a stored item must carry to be read back (a dotted name checks a nested field). */
  readonly fields: Readonly<Record<string, Check>>;
}

/** True when a stored key is one of `kind`'s. */
export const isKeyOf = (kind: Pick<ItemKind<never>, 'pk' | 'sk' | 'skPrefix'>, pk: string, sk: string): boolean => pk.startsWith(kind.pk) && (kind.skPrefix ? sk.startsWith(kind.sk) : sk === kind.sk);

/** The TTL attribute of an item of `kind` written from `record` (none for a kind that never expires, or a state not final yet). */
export function expiryFields(kind: Pick<ItemKind<never>, 'ttl'>, record: object, retentionSeconds: number, final = false): Item {
  const rule = kind.ttl;
  if (rule.kind === 'never' || (rule.kind === 'once final' && !final)) return {};
  const factor = rule.kind === 'after' ? rule.factor : 1;
  return { [TTL_ATTRIBUTE]: expiryOf(String((record as Record<string, unknown>)[rule.from]), retentionSeconds * factor) };
}

const within = (dispatchId: string, sk: string): ItemKey => ({ pk: `${DISPATCH}${dispatchId}`, sk });
const byAttempt = (attempt: number): string => pad(attempt, 6);
const afterItsTime = (from: string, factor: 1 | 2 = 1): TtlRule => ({ kind: 'after', from, factor });
const NEVER: TtlRule = { kind: 'never' };
/**
 * A record of its own in the dispatch's partition, under sort keys `{sk}{tail}`: one kind per prefix,
 * read as a collection by the prefix (`COLLECTION`), listed in no index.
 */
const dispatchRecord = <A extends unknown[]>(sk: string, tail: (...args: A) => string, ttl: TtlRule, fields: Readonly<Record<string, Check>>): ItemKind<[dispatchId: string, ...A]> => ({
  key: (dispatchId, ...args) => within(dispatchId, `${sk}${tail(...args)}`),
  pk: DISPATCH,
  sk,
  skPrefix: true,
  ttl,
  fields,
});

// ——— a dispatch's partition `D#{dispatchId}` ————————————————————————————————————————————————

/** The hot state: listed in every index while it has their keys (`stateItem` works them out). */
export const STATE_ITEM: ItemKind<[dispatchId: string]> = {
  key: (dispatchId) => within(dispatchId, 'STATE'),
  pk: DISPATCH,
  sk: 'STATE',
  indexes: [INDEX.due, INDEX.byOrigin, INDEX.recent, INDEX.feed, INDEX.inbox, INDEX.waiting],
  ttl: { kind: 'once final', from: 'updatedAt' },
  fields: {
    pk: isString,
    originKey: isString,
    target: isString,
    createdAt: optional(isString),
    createdKey: isString,
    updatedAt: isString,
    phase: (value) => value === 'accepted' || value === 'submitted' || value === 'blocked' || value === 'cancelled',
    priority: optional(isNumber),
    slot: optional(isObject),
    'slot.shard': optional(isNumber),
    cancel: optional(isObject),
    attempt: isNumber,
    version: isNumber,
    hop: isNumber,
    maxHops: isNumber,
    deliveryMode: optional(isString),
    timeouts: optional(isObject),
    'timeouts.stallAfterSeconds': optional(isNumber),
    'timeouts.approvalWaitSeconds': optional(isNumber),
    'timeouts.deliveryGraceSeconds': optional(isNumber),
    'submission.attempts': isNumber,
    execution: isObject,
    receipts: isArray,
    runId: optional(isString),
    changes: optional(isArray),
    supersededRuns: optional(isArray),
    result: optional(isObject),
    manual: optional(isObject),
  },
};

/** The accepted message: the idempotency anchor, with the task payload; outlives the state it anchors. */
export const MESSAGE_ITEM: ItemKind<[dispatchId: string]> = {
  key: (dispatchId) => within(dispatchId, 'MSG'),
  pk: DISPATCH,
  sk: 'MSG',
  ttl: afterItsTime('receivedAt', 2),
  fields: { dispatchId: isString, origin: isString, contentHash: isString, messageId: isString, receivedAt: isString, claimUntil: isString, claimBy: optional(isString), 'content.valid': isBoolean },
};
/** What the use cases read of a valid accepted message besides MESSAGE_ITEM's fields: its target, refs and clocks. */
export const VALID_MESSAGE_FIELDS: Readonly<Record<string, Check>> = {
  'content.target': isString,
  'content.expectedEvidence': isArray,
  'content.timeouts.stallAfterSeconds': isNumber,
  'content.timeouts.approvalWaitSeconds': isNumber,
  'content.timeouts.deliveryGraceSeconds': isNumber,
  'content.maxHops': isNumber,
};

/** An owner's verdict on one evidence file (latest wins). */
export const EVIDENCE_MARK_ITEM = /* @__PURE__ */ dispatchRecord('MARK#', (attempt: number, ref: string) => `${byAttempt(attempt)}#${ref}`, afterItsTime('at'), { dispatchId: isString, attempt: isNumber, ref: isString, status: isString, at: isString });

/** The final post-condition outcome of an attempt (files found, with SHA-256), when it does not fit the settled state. */
export const EVIDENCE_CHECK_ITEM = /* @__PURE__ */ dispatchRecord('CHECK#', (attempt: number) => byAttempt(attempt), afterItsTime('checkedAt'), { dispatchId: isString, attempt: isNumber, outcome: isString, expected: isArray, found: isArray, missing: isArray, checkedAt: isString, files: optional(isArray) });

/** Which immutable, hash-named object an evidence ref holds now (latest wins). */
export const EVIDENCE_UPLOAD_ITEM = /* @__PURE__ */ dispatchRecord('UPLOAD#', (attempt: number, ref: string) => `${byAttempt(attempt)}#${ref}`, afterItsTime('at'), { ref: isString, sha256: isString, bytes: isNumber });

/** An event of a superseded run, kept for the record. */
export const LATE_EVENT_ITEM = /* @__PURE__ */ dispatchRecord('LATE#', (runId: string, seq: number) => `${runKeyOf(runId)}#${pad(seq, 16)}`, afterItsTime('at', 2), { dispatchId: isString, runId: isString, at: isString });

/** An operator's receipt: written once, publishes Receipt Recorded. Its fields are checked by its schema when viewed (`receipts.ts`). */
export const OPERATOR_RECEIPT_ITEM = /* @__PURE__ */ dispatchRecord('OR#', (receiptId: string) => receiptId, afterItsTime('recordedAt'), { recordedAt: isString });

/** A person's word on a manual dispatch, written once; lives as long as the state it may settle. Decoded through its stored schema (`manual.ts`). */
export const MANUAL_ATTESTATION_ITEM = /* @__PURE__ */ dispatchRecord('MA#', (attestationId: string) => attestationId, afterItsTime('recordedAt', 2), { recordedAt: isString });

/** What a redispatch ended (run, receipts, execution, result): by attempt, then by the state version it ended. */
export const PAST_ATTEMPT_ITEM = /* @__PURE__ */ dispatchRecord('ATT#', (attempt: number, stateVersion: number) => `${byAttempt(attempt)}#${pad(stateVersion, 10)}`, afterItsTime('endedAt', 2), {
  dispatchId: isString,
  attempt: isNumber,
  receipts: isArray,
  execution: isObject,
  endedAt: isString,
  superseded: isBoolean,
  stateVersion: isNumber,
});

/**
 * A final event's result body (or its preview and S3 ref), written before the state. Keyed by its
 * digest too: a second report of the seq with another body never overwrites it.
 */
export const RESULT_BODY_ITEM = /* @__PURE__ */ dispatchRecord('RBODY#', (attempt: number, seq: number, digest?: string) => `${byAttempt(attempt)}#${pad(seq, 16)}${digest ? `#${digest}` : ''}`, afterItsTime('at'), {
  dispatchId: isString,
  attempt: isNumber,
  seq: isNumber,
  bytes: isNumber,
  at: isString,
  json: optional(isString),
  bodyRef: optional(isString),
  digest: optional(isString),
});

/** What Lambda's on-failure destination said of a run. */
export const LAMBDA_FAILURE_ITEM = /* @__PURE__ */ dispatchRecord('LFAIL#', (attempt: number) => byAttempt(attempt), afterItsTime('at'), { dispatchId: isString, attempt: isNumber, runId: isString, errorType: isString, errorMessage: isString, at: isString });

/**
 * A state machine's task token for one approval (CONTRACT §17), under the approval id the ledger chose:
 * in a partition of its own, outside the published prefixes (the stream passes it to no publisher) and
 * outside the dispatch's ranges; its token erased once the decision is sent.
 */
export const APPROVAL_TOKEN_ITEM: ItemKind<[dispatchId: string, approvalId: string]> = {
  key: (dispatchId, approvalId) => ({ pk: `TOKEN#${dispatchId}`, sk: `APPROVAL#${approvalId}` }),
  pk: 'TOKEN#',
  sk: 'APPROVAL#',
  skPrefix: true,
  ttl: afterItsTime('at'),
  fields: { dispatchId: isString, attempt: isNumber, runId: isString, approvalId: isString, taskToken: optional(isString), at: isString, decidedAt: optional(isString) },
};

// ——— refused messages ———————————————————————————————————————————————————————————————————

/** A refused message, for the operator: in the month's rejection feed (sharded), newest first. */
export const REJECTION_ITEM: ItemKind<[messageId: string]> = {
  key: (messageId) => ({ pk: `REJ#${messageId}`, sk: 'REJECTION' }),
  pk: 'REJ#',
  sk: 'REJECTION',
  indexes: [INDEX.feed],
  ttl: afterItsTime('at'),
  fields: { messageId: isString, at: isString, reason: isString },
};

/** What a refused message's origin is told of it (CONTRACT §15), in its origin's own feed, newest first. */
export const ORIGIN_REJECTION_ITEM: ItemKind<[messageId: string]> = {
  key: (messageId) => ({ pk: `${ORIGIN_REJECTION_PK}${messageId}`, sk: 'ORIGIN' }),
  pk: ORIGIN_REJECTION_PK,
  sk: 'ORIGIN',
  indexes: [INDEX.feed],
  ttl: afterItsTime('at'),
  fields: { messageId: isString, at: isString, reason: isString, origin: isString, bodyPreview: isString, bodyBytes: isNumber },
};

/**
 * A refused message of `origin` that named a dispatch id, in the id's own partition (not the dispatch's:
 * it may be another origin's, or none yet): the owner's view reads its own origin's newest 10.
 */
export const REFUSAL_ITEM: ItemKind<[dispatchId: string, origin: string, at: string, messageId: string]> = {
  key: (dispatchId, origin, at, messageId) => ({ pk: `${REFUSAL_PK}${dispatchId}`, sk: `${origin}#${at}#${messageId}` }),
  pk: REFUSAL_PK,
  sk: '',
  skPrefix: true,
  ttl: afterItsTime('at'),
  fields: { messageId: isString, at: isString, reason: isString },
};

// ——— configuration, capacity and counters (never expire) ——————————————————————————————————

/** A kind keyed by `{pk}{part}#{part}…` under one sort key, which never expires and is listed nowhere. */
const settingsItem = <A extends ReadonlyArray<string | number>>(pk: string, sk: string, fields: Readonly<Record<string, Check>> = {}): ItemKind<A> => ({
  key: (...parts) => ({ pk: `${pk}${parts.join('#')}`, sk }),
  pk,
  sk,
  ttl: NEVER,
  fields,
});

/** An origin's settings (maxDeliveryAttempts, resultTtlHours). */
export const ORIGIN_SETTINGS_ITEM = /* @__PURE__ */ settingsItem<[origin: string]>('OS#', 'ORIGIN', { maxDeliveryAttempts: optional(isNumber), resultTtlHours: optional(isNumber) });

/** A target registered at run time (its kind's own fields are checked by `targetOf`). */
export const TARGET_ITEM = /* @__PURE__ */ settingsItem<[name: string]>('T#', 'TARGET', { name: isString });

export const PRINCIPAL_ITEM = /* @__PURE__ */ settingsItem<[principalId: string]>('P#', 'PRINCIPAL', { role: (value) => value === 'origin' || value === 'target' || value === 'operator' });

/** One of a limited target's concurrency counters (cap, held, unknownHeld, lastOrigin, limit); an absent counter reads as 0. */
export const SLOT_SHARD_ITEM: ItemKind<[target: string, shard: number]> = {
  key: (target, shard) => ({ pk: `SLOT#${target}#${pad(shard, 2)}`, sk: 'SLOTS' }),
  pk: 'SLOT#',
  sk: 'SLOTS',
  ttl: NEVER,
  fields: { cap: optional(isNumber), held: optional(isNumber), unknownHeld: optional(isNumber), lastOrigin: optional(isString), limit: optional(isNumber), takenAt: optional(isString), allottedAt: optional(isString) },
};

/** The names of the targets that have or had a limit: the monitor admits for them. */
export const LIMITED_TARGETS_ITEM = /* @__PURE__ */ settingsItem<[]>('LIMITED', 'TARGETS');

/** One of COUNT_SHARDS counters the publisher ADDs each batch's deltas to; summed by `GET /counts`. */
export const COUNTS_ITEM = /* @__PURE__ */ settingsItem<[shard: number]>('COUNTS#', 'COUNTS');

/** One per due shard (`due#nn`): which monitor tick works on it, until when (released at its end, lapses if it dies). */
export const DUE_SHARD_CLAIM_ITEM = /* @__PURE__ */ settingsItem<[shard: string]>('DUECLAIM#', 'CLAIM');

/** Every kind by its name, for the tests (no function's bundle reads it). */
export const ITEM_KINDS: Readonly<Record<string, ItemKind<never>>> = {
  STATE_ITEM,
  MESSAGE_ITEM,
  EVIDENCE_MARK_ITEM,
  EVIDENCE_CHECK_ITEM,
  EVIDENCE_UPLOAD_ITEM,
  LATE_EVENT_ITEM,
  OPERATOR_RECEIPT_ITEM,
  MANUAL_ATTESTATION_ITEM,
  PAST_ATTEMPT_ITEM,
  RESULT_BODY_ITEM,
  LAMBDA_FAILURE_ITEM,
  APPROVAL_TOKEN_ITEM,
  REJECTION_ITEM,
  ORIGIN_REJECTION_ITEM,
  REFUSAL_ITEM,
  ORIGIN_SETTINGS_ITEM,
  TARGET_ITEM,
  PRINCIPAL_ITEM,
  SLOT_SHARD_ITEM,
  LIMITED_TARGETS_ITEM,
  COUNTS_ITEM,
  DUE_SHARD_CLAIM_ITEM,
} as unknown as Readonly<Record<string, ItemKind<never>>>;

/** The name of the kind a stored key is of, if any. */
export const kindOfKey = (pk: string, sk: string): string | undefined => Object.keys(ITEM_KINDS).find((name) => isKeyOf(ITEM_KINDS[name] as ItemKind<never>, pk, sk));

// ——— reads of several items of a kind ——————————————————————————————————————————————————

/** The item-collection queries: a dispatch's partition and the sort-key prefix of one kind of item. */
export const COLLECTION = {
  operatorReceipts: (dispatchId: string) => ({ pk: `${DISPATCH}${dispatchId}`, prefix: OPERATOR_RECEIPT_ITEM.sk }),
  manualAttestations: (dispatchId: string) => ({ pk: `${DISPATCH}${dispatchId}`, prefix: MANUAL_ATTESTATION_ITEM.sk }),
  evidenceMarks: (dispatchId: string, attempt: number) => ({ pk: `${DISPATCH}${dispatchId}`, prefix: EVIDENCE_MARK_ITEM.key(dispatchId, attempt, '').sk }),
  evidenceUploads: (dispatchId: string, attempt: number) => ({ pk: `${DISPATCH}${dispatchId}`, prefix: EVIDENCE_UPLOAD_ITEM.key(dispatchId, attempt, '').sk }),
  pastAttempts: (dispatchId: string) => ({ pk: `${DISPATCH}${dispatchId}`, prefix: PAST_ATTEMPT_ITEM.sk }),
  /** The refused messages of one origin that named a dispatch id (origins never contain `#`: one origin's prefix is no other's). */
  refusals: (dispatchId: string, origin: string) => ({ pk: `${REFUSAL_PK}${dispatchId}`, prefix: `${origin}#` }),
} as const;

/**
 * Ranges of a dispatch's partition read as one query where one read beats several: a query is charged
 * for the bytes it reads (rounded up to 4 KB once), a get for each item (rounded up each time). Sort keys
 * in order: `ATT#` < `CHECK#` < `LATE#` < `LFAIL#` < `MA#` < `MARK#` < `MSG` < `OR#` < `RBODY#` < `STATE`
 * < `UPLOAD#`.
 *
 * - `evidenceBasis`: from the first attempt's check item to the message: the check, the marks and the
 *   message, and what sits between them — one lambda failure record at most and a manual target's
 *   attestations. Only for attempt 1: a redispatched dispatch may hold any number of late events of its
 *   superseded runs (`LATE#`), which the separate reads skip.
 * - `stateWithUploads`: the state and the upload pointers of every attempt (nothing else sorts between):
 *   a redispatched dispatch's completion also reads its earlier attempts' pointers (≤ 32 small items each).
 */
export const RANGE = {
  evidenceBasis: (dispatchId: string) => ({ pk: `${DISPATCH}${dispatchId}`, from: EVIDENCE_CHECK_ITEM.key(dispatchId, 1).sk, to: MESSAGE_ITEM.sk }),
  stateWithUploads: (dispatchId: string) => ({ pk: `${DISPATCH}${dispatchId}`, from: STATE_ITEM.sk, to: `${EVIDENCE_UPLOAD_ITEM.sk.slice(0, -1)}$` }),
} as const;
/** Which kind of a dispatch's items a sort key names, for the range reads. */
export const isCheckKey = (sk: string, attempt: number): boolean => sk === EVIDENCE_CHECK_ITEM.key('', attempt).sk;
export const isMarkKey = (sk: string, attempt: number): boolean => sk.startsWith(EVIDENCE_MARK_ITEM.key('', attempt, '').sk);
export const isUploadKey = (sk: string, attempt: number): boolean => sk.startsWith(EVIDENCE_UPLOAD_ITEM.key('', attempt, '').sk);

/** The key of a dispatch's state item (a well-formed dispatch id), as the census tells them from the rest. */
export const isStateItemKey = (pk: string, sk: string): boolean => /^D#[\w.:-]{1,128}$/.test(pk) && sk === STATE_ITEM.sk;

/** The counter items' partition keys as an IAM `dynamodb:LeadingKeys` pattern: the publisher may update those alone. */
export const COUNTS_KEY_PATTERN = `${COUNTS_ITEM.pk}*`;
/** The counter items `GET /counts` sums; their attribute names are the buckets of `shared/dispatch/counts.ts`, as they are. */
export const COUNT_KEYS: readonly ItemKey[] = Array.from({ length: COUNT_SHARDS }, (_, shard) => COUNTS_ITEM.key(shard));
