import { createHash, randomBytes } from 'node:crypto';
import { clipBytes } from '../text.js';
import type { OperatorReceipt } from '../dispatch/receipts.js';
import { DEFAULT_PRIORITY, DEFAULT_TIMEOUTS, MAX_PRIORITY, type BlockedCode, type DispatchState, type ResultRecord } from '../dispatch/state.js';
import type { SlotShard, WaitingEntry } from '../dispatch/slots.js';
import { isTerminal } from '../dispatch/state.js';
import { resultIdOf } from '../dispatch/transitions/core.js';
import { attentionKind, type AttentionKind } from '../dispatch/attention.js';
import { CorruptItemError } from '../ledger/port.js';
import { DEFAULT_ORIGIN_SETTINGS, type LambdaFailureRecord, type OriginSettings, type ResultBody, type AcceptedMessage, type EvidenceCheck, type EvidenceMark, type EvidenceUpload, type OriginRejection, type PastAttempt, type Refusal, type Rejection } from '../dispatch/records.js';
import type { Principal } from '../principals/principals.js';
import type { TargetRegistration } from '../targets/port.js';
import type { AttributeDefinition, GlobalSecondaryIndex, KeySchemaElement } from '@aws-sdk/client-dynamodb';

/**
 * The ledger table's items: every key shape and item codec is in this module, every access pattern in
 * `ledger-table.ts` (no other file spells pk, sk or an index name). Kept free of SDK code so the
 * publisher can decode stream images without bundling the DynamoDB client.
 *
 * | item               | pk                | sk          | indexes                                              |
 * | ------------------ | ----------------- | ----------- | ---------------------------------------------------- |
 * | dispatch state     | D#{dispatchId}    | STATE       | due (while something is due), byOrigin, recent (always) |
 * | accepted message   | D#{dispatchId}    | MSG         | —  (the idempotency anchor, with the task payload)   |
 * | evidence mark      | D#{dispatchId}    | MARK#{attempt}#{ref} | —  (an owner's verdict on one file; latest wins) |
 * | evidence check     | D#{dispatchId}    | CHECK#{attempt} | —  (final post-condition outcome; files found, with SHA-256 — only when it does not fit the settled state) |
 * | evidence upload    | D#{dispatchId}    | UPLOAD#{attempt}#{ref} | —  (which immutable, hash-named object a ref holds now; latest wins) |
 * | late run event     | D#{dispatchId}    | LATE#{runId}#{seq} | —  (events of superseded runs, for the record) |
 * | operator receipt   | D#{dispatchId}    | OR#{receiptId} | —  (written once; publishes Receipt Recorded; listed with begins_with) |
 * | manual attestation | D#{dispatchId}    | MA#{attestationId} | —  (a person's word on a manual dispatch, written once; listed with begins_with) |
 * | past attempt       | D#{dispatchId}    | ATT#{attempt}#{version} | —  (what a redispatch ended: run, receipts, execution, result) |
 * | result body        | D#{dispatchId}    | RBODY#{attempt}#{seq}#{digest} | —  (a final event's result.body, or its preview + S3 ref; written before the state) |
 * | origin settings    | OS#{origin}       | ORIGIN      | —  (maxDeliveryAttempts, resultTtlHours)              |
 * | lambda failure     | D#{dispatchId}    | LFAIL#{attempt} | —  (what Lambda's on-failure destination said of the run) |
 * | rejection          | REJ#{messageId}   | REJECTION   | feed: rejections#{yyyy-mm}#{nn}, newest first        |
 * | origin rejection   | OREJ#{messageId}  | ORIGIN      | feed: origin-rejections#{origin}#{nn}, newest first (its origin's own refused message, CONTRACT §15) |
 * | refusal            | REFUSED#{dispatchId} | {origin}#{at}#{messageId} | —  (a refused message of `origin` that named the id: the owner's view reads its own origin's newest 10) |
 * | target             | T#{name}          | TARGET      | —                                                    |
 * | principal          | P#{principalId}   | PRINCIPAL   | —                                                    |
 * | slot shard         | SLOT#{target}#{n} | SLOTS       | —  (cap, held, unknownHeld, lastOrigin, limit: one of a target's concurrency counters) |
 * | limited targets    | LIMITED           | TARGETS     | —  (the names of targets that have or had a limit: the monitor admits for them) |
 * | dispatch counts    | COUNTS#{n}        | COUNTS      | —  (one of COUNT_SHARDS counters the publisher ADDs each batch's deltas to; summed by `GET /counts`) |
 * | due shard claim    | DUECLAIM#{shard}  | CLAIM       | —  (holder, leaseUntil: the monitor tick working on one due shard; released at its end, lapses if it dies) |
 *
 * - `due`: sparse, KEYS_ONLY, partitioned over DUE_SHARDS keys `due#{nn}` so no partition is hot; sorted
 *   by due time. The monitor queries `dueAt <= now` per shard, so its cost follows what is due, never the
 *   size of the history. GSI reads are eventually consistent: the monitor re-reads each item by key.
 * - `byOrigin`: KEYS_ONLY, under `O#{origin}#{nn}` (ORIGIN_SHARDS keys by dispatch id), written once when
 *   the state is created (its keys never change, so later state writes cost no index write); history is
 *   newest-first by `createdKey` (`createdAt#{hash of the id}`), every shard merged.
 * - `recent`: every origin's dispatches (the operator's `GET /dispatches`), KEYS_ONLY, under
 *   `R#{nn}` (RECENT_SHARDS keys by dispatch id), sorted by the same `createdKey` as `byOrigin`.
 *   Written once, at creation, like `byOrigin` (one more write unit per dispatch, none after).
 * - `inbox`: sparse, KEYS_ONLY: a state whose result is pending or claimed, under
 *   `inbox#{origin}#{i|a}#{shard}` (inject or after_turn); pending by when it became ready, claimed
 *   under `~#` by when its lease ends (`inboxSortKey`). A claim reads, of each of the origin's shards,
 *   only the range below `~#{now}` — the pending results oldest first, then the lapsed leases — and
 *   takes results by conditional state writes; held leases are never read. The entry is written when
 *   the result is made, moved by each claim, renewal and release, removed when delivered or dropped.
 * - `waiting`: sparse, KEYS_ONLY: a dispatch waiting for a slot of its target (CONTRACT §11), under
 *   `W#{target}#{shard}` (WAIT_SHARDS keys by dispatch id), sorted by `{9 - priority}#{origin}#{createdAt}#…`:
 *   the highest priority first, the next origin after the last admitted one a query away, oldest first
 *   within an origin. Written when it starts waiting, removed when it is admitted or cancelled.
 * - `feed` (projects ALL: every write of an item on a feed rewrites its entry): rejections by month and
 *   the attention lists by kind, under `{feed}#{nn}` (FEED_SHARDS keys by message or dispatch id), newest
 *   first (attention: by when the problem began, so the order holds while later writes touch it); and
 *   each origin's own rejections under `origin-rejections#{origin}#{nn}` (ORIGIN_SHARDS keys by message id).
 * - Sharded lists are read by one k-way merge (`ledger-feeds.ts`): every partition of the list queried
 *   for at most a page after the cursor's position, merged by the sort key. The unsharded key of each
 *   (`O#{origin}`, `attention#{kind}`, `rejections#{yyyy-mm}`: what stacks deployed before the shards
 *   wrote) is read as one more partition; a state moves to its shard with its next write, keeping its
 *   sort key, so it is listed once either way.
 *
 * Hot keys (CONTRACT §14: 5,000 dispatches/s from one origin to one target; 100,000 retrying in a
 * target outage; no key over 1,000 write units/s). An index entry costs 1 WCU to write (the feed's:
 * the ≤ 1 KB state), 2 to move (a sort key change: delete and put), 1 to remove.
 *
 * | key                        | writes per dispatch                            | at 5,000/s           | shards (why)            |
 * | -------------------------- | ---------------------------------------------- | -------------------- | ----------------------- |
 * | byOrigin `O#{origin}#{nn}` | 1 (at creation)                                | 5,000 → 312/key      | 16                      |
 * | recent `R#{nn}`            | 1 (at creation)                                | 5,000 → 312/key      | 16 (all origins: 5,000/s in all) |
 * | due `due#{nn}`             | put 1, each `dueAt` change 2, removal 1: 4 detached, 6 with a result claimed; a retry 2 | ≤ 30,000 → ≤ 470/key; outage: 5,000 puts + ≤ 4,200 retries/s × 2 → 210/key | 64 (hash of the id: even to a few % at these rates; the monitor queries each shard per tick, 64 queries) |
 * | feed `attention#{kind}#{nn}` | every write while listed (ALL)              | outage: 5,000 new `retrying` + ≤ 4,200 retries/s (100k, first delay 30 s − 20 %) → 290/key | 32 |
 * | feed `rejections#{m}#{nn}` | 1 (a rejection is written once)                | a flood at the intake's 5,000/s → 156/key | 32 (FEED_SHARDS) |
 * | feed `origin-rejections#{origin}#{nn}` | 1 (written once, only for a message its sender may send for that origin) | one origin's flood at 5,000/s → 312/key | 16 (ORIGIN_SHARDS, as the origin's history) |
 * | refusal `REFUSED#{dispatchId}` | 1 per refused message naming the id     | as the anchor `D#{id}`/MSG, whose conditional put each such message already tries | keyed by the id named |
 * | waiting `W#{target}#{nn}`  | put 1 + removal 1, only while the target is full | a saturated limited target: ≤ 10,000 → 625/key; a growing backlog 5,000 → 312 | 16 (admission reads 3 queries per shard) |
 * | inbox `inbox#{origin}#…`   | put 1 + removal 1 per result, a move (2) per claim, renewal or release: 4 for a result claimed once and acked | 20,000 → 1 key at the default | INBOX_SHARDS (default 1: ~250 results/s per origin; CONTRACT §10 caps an empty long poll at 5 read units, which allows 2; an origin taking 5,000 results/s needs 32: 625/key, and an empty long poll then reads 64 units) |
 * | slot `SLOT#{target}#{n}`   | +1 at admission, −1 at release, on one shard   | a shard holds ≤ 8 slots: ≤ 16 / run seconds | slotShardCaps (⌈limit/8⌉ ≤ 32; exact caps, a limit of 1 is one shard of 1): hot only for runs under 16 ms |
 * | `COUNTS#{n}`               | one ADD per publisher batch (≤ 100 records)    | ~15,000 records/s → ~150 batches → ~19/key | COUNT_SHARDS = 8 |
 * | state `D#{id}`, MSG, …     | a dispatch's own few writes                    | —                    | keyed by the dispatch   |
 * | `LIMITED`, `T#`, `P#`, `OS#` | configuration writes                         | —                    | —                       |
 *
 * - TTL (`expiresAt`) on every dispatch record: the retention after the dispatch is final (state), after
 *   the record was written (receipts, marks, uploads, checks, rejections), twice that for the anchor and the
 *   records that must outlive the state (accepted message, past attempts, late events, manual
 *   attestations: a manual dispatch's state lives until a person attests, and its attestations with it).
 */

/**
 * Partitions of the `due` index (sized in the module comment's hot-key table: ≤ 470 WCU/s per key at 5,000 lifecycles/s).
 * Only ever raise it: the keys of a lower count stay among DUE_SHARD_KEYS, so entries written under them
 * are still read, and move to their new shard with the state's next write.
 */
export const DUE_SHARDS = 64;
export const INDEX = { due: 'due', byOrigin: 'byOrigin', feed: 'feed', inbox: 'inbox', waiting: 'waiting', recent: 'recent' } as const;
/** Partitions of the `recent` index (every origin's dispatches, by dispatch id). */
export const RECENT_SHARDS = 16;
/** Counter items of `GET /counts` (CONTRACT §2 v2): each publisher batch adds to one, `GET /counts` sums all. */
export const COUNT_SHARDS = 8;
/**
 * Partitions of one target's wait index (by dispatch id): a backlog's writes spread over them (a full
 * target at 5,000/s: ≤ 10,000 WCU/s, 625 per key). Only ever raise it: a lower count's keys stay among
 * `waitKeysOf`, so what waits under them is still admitted.
 */
export const WAIT_SHARDS = 16;
export const TTL_ATTRIBUTE = 'expiresAt';

/**
 * The state item's write id: random per state write (6 bytes, 8 characters: a few bytes of the hot
 * item's one write unit), so a write whose answer was lost, sent again by the SDK, is told from
 * another writer's — its condition admits the item it wrote itself, at the version it wrote (`statePut`).
 * The codec (`stateOf`) drops it: no state carries it into a later write.
 */
export const WRITE_ID_ATTRIBUTE = 'w';
export const newWriteId = (): string => randomBytes(6).toString('base64url');

const DISPATCH = 'D#';
const REJECTION_PK = 'REJ#';
/** Apart from `REJ#`: the published stream records (`PUBLISHED_KEY_PREFIXES`) and the census's rejection count are the operator's rejections alone. */
const ORIGIN_REJECTION_PK = 'OREJ#';
const REFUSAL_PK = 'REFUSED#';
export const OPERATOR_RECEIPT_PREFIX = 'OR#';
const MANUAL_ATTESTATION_PREFIX = 'MA#';
const PAST_ATTEMPT_PREFIX = 'ATT#';
const COUNTS_PK = 'COUNTS#';
/** The counter items' partition keys as an IAM `dynamodb:LeadingKeys` pattern: the publisher may update those alone. */
export const COUNTS_KEY_PATTERN = `${COUNTS_PK}*`;
const pad = (n: number, width: number): string => String(n).padStart(width, '0');
/** Partitions of one origin's `byOrigin` history (by dispatch id): a busy origin's 5,000/s is ~312 WCU/s per key. */
export const ORIGIN_SHARDS = 16;
/**
 * Partitions of each feed (an attention kind, a month of rejections), by the id listed. The feed index
 * projects ALL, so every write of a state on the attention list rewrites its entry: during an outage,
 * 5,000 new `retrying` dispatches/s plus ≤ 4,200 retries/s of 100k (the first delay, 30 s − 20 %)
 * are ~9,200 WCU/s on `attention#retrying` — ~290 per key over 32.
 */
export const FEED_SHARDS = 32;
const ORIGIN_PK = 'O#';
/** Which byte of the id's SHA-256 picks the shard, one per kind of partition, so the choices are independent. */
const DUE_SHARD_BYTE = 0;
const INBOX_SHARD_BYTE = 1;
const WAIT_SHARD_BYTE = 2;
const RECENT_SHARD_BYTE = 3;
const ORIGIN_SHARD_BYTE = 4;
const FEED_SHARD_BYTE = 5;
/** The shard of `id` among `shards` (for a power of two, as every fixed count here is, each shard equally likely). */
const shardOf = (id: string, byte: number, shards: number): number => digestOf(id).readUInt8(byte) % shards;
/**
 * The SHA-256 of an id, the last one kept: writing one state item picks its due, origin, recent, feed,
 * inbox and wait shards and several sort-key tie-breakers from the same id — one hash, not ten.
 */
let lastDigest: { readonly id: string; readonly digest: Buffer } | undefined;
function digestOf(id: string): Buffer {
  if (lastDigest?.id !== id) lastDigest = { id, digest: createHash('sha256').update(id).digest() };
  return lastDigest.digest;
}

export const markPrefix = (attempt: number): string => `MARK#${pad(attempt, 6)}#`;
const checkSortKey = (attempt: number): string => `CHECK#${pad(attempt, 6)}`;
const UPLOAD_PREFIX = 'UPLOAD#';
const uploadPrefix = (attempt: number): string => `${UPLOAD_PREFIX}${pad(attempt, 6)}#`;

export const KEY = {
  state: (dispatchId: string) => ({ pk: `${DISPATCH}${dispatchId}`, sk: 'STATE' }),
  message: (dispatchId: string) => ({ pk: `${DISPATCH}${dispatchId}`, sk: 'MSG' }),
  rejection: (messageId: string) => ({ pk: `${REJECTION_PK}${messageId}`, sk: 'REJECTION' }),
  evidenceMark: (dispatchId: string, attempt: number, ref: string) => ({ pk: `${DISPATCH}${dispatchId}`, sk: `${markPrefix(attempt)}${ref}` }),
  evidenceCheck: (dispatchId: string, attempt: number) => ({ pk: `${DISPATCH}${dispatchId}`, sk: checkSortKey(attempt) }),
  evidenceUpload: (dispatchId: string, attempt: number, ref: string) => ({ pk: `${DISPATCH}${dispatchId}`, sk: `${uploadPrefix(attempt)}${ref}` }),
  lateEvent: (dispatchId: string, runId: string, seq: number) => ({ pk: `${DISPATCH}${dispatchId}`, sk: `LATE#${runId}#${pad(seq, 16)}` }),
  operatorReceipt: (dispatchId: string, receiptId: string) => ({ pk: `${DISPATCH}${dispatchId}`, sk: `${OPERATOR_RECEIPT_PREFIX}${receiptId}` }),
  manualAttestation: (dispatchId: string, attestationId: string) => ({ pk: `${DISPATCH}${dispatchId}`, sk: `${MANUAL_ATTESTATION_PREFIX}${attestationId}` }),
  /** One per redispatch: by attempt, then by the state version it ended (a blocked attempt may be redispatched again). */
  pastAttempt: (dispatchId: string, attempt: number, stateVersion: number) => ({ pk: `${DISPATCH}${dispatchId}`, sk: `${PAST_ATTEMPT_PREFIX}${pad(attempt, 6)}#${pad(stateVersion, 10)}` }),
  // One per body a final report carried: keyed by its digest too, so a second report of the seq with another body never overwrites it.
  resultBody: (dispatchId: string, attempt: number, seq: number, digest?: string) => ({ pk: `${DISPATCH}${dispatchId}`, sk: `RBODY#${pad(attempt, 6)}#${pad(seq, 16)}${digest ? `#${digest}` : ''}` }),
  originSettings: (origin: string) => ({ pk: `OS#${origin}`, sk: 'ORIGIN' }),
  lambdaFailure: (dispatchId: string, attempt: number) => ({ pk: `${DISPATCH}${dispatchId}`, sk: `LFAIL#${pad(attempt, 6)}` }),
  target: (name: string) => ({ pk: `T#${name}`, sk: 'TARGET' }),
  principal: (principalId: string) => ({ pk: `P#${principalId}`, sk: 'PRINCIPAL' }),
  slotShard: (target: string, shard: number) => ({ pk: `SLOT#${target}#${pad(shard, 2)}`, sk: 'SLOTS' }),
  limitedTargets: () => ({ pk: 'LIMITED', sk: 'TARGETS' }),
  counts: (shard: number) => ({ pk: `${COUNTS_PK}${shard}`, sk: 'COUNTS' }),
  /** One per due shard (`due#nn`, a DUE_SHARD_KEYS entry): which tick works on it, until when. */
  dueShardClaim: (shard: string) => ({ pk: `DUECLAIM#${shard}`, sk: 'CLAIM' }),
} as const;

/** The item-collection queries: a dispatch's partition and the sort-key prefix of one kind of item. */
export const COLLECTION = {
  operatorReceipts: (dispatchId: string) => ({ pk: `${DISPATCH}${dispatchId}`, prefix: OPERATOR_RECEIPT_PREFIX }),
  manualAttestations: (dispatchId: string) => ({ pk: `${DISPATCH}${dispatchId}`, prefix: MANUAL_ATTESTATION_PREFIX }),
  evidenceMarks: (dispatchId: string, attempt: number) => ({ pk: `${DISPATCH}${dispatchId}`, prefix: markPrefix(attempt) }),
  evidenceUploads: (dispatchId: string, attempt: number) => ({ pk: `${DISPATCH}${dispatchId}`, prefix: uploadPrefix(attempt) }),
  pastAttempts: (dispatchId: string) => ({ pk: `${DISPATCH}${dispatchId}`, prefix: PAST_ATTEMPT_PREFIX }),
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
  evidenceBasis: (dispatchId: string) => ({ pk: `${DISPATCH}${dispatchId}`, from: checkSortKey(1), to: KEY.message(dispatchId).sk }),
  stateWithUploads: (dispatchId: string) => ({ pk: `${DISPATCH}${dispatchId}`, from: KEY.state(dispatchId).sk, to: `${UPLOAD_PREFIX.slice(0, -1)}$` }),
} as const;
/** Which kind of a dispatch's items a sort key names, for the range reads. */
export const isCheckKey = (sk: string, attempt: number): boolean => sk === checkSortKey(attempt);
export const isMarkKey = (sk: string, attempt: number): boolean => sk.startsWith(markPrefix(attempt));
export const isUploadKey = (sk: string, attempt: number): boolean => sk.startsWith(uploadPrefix(attempt));

/** The month partition of a feed entry (`2026-12`). */
export const monthKey = (date: Date): string => date.toISOString().slice(0, 7);

/**
 * A feed is named by its unsharded key (`rejections#2026-12`, `attention#blocked`: what a cursor names,
 * and the one partition deployed stacks wrote before the feeds were sharded); its entries are written
 * under `{feed}#{nn}` (FEED_SHARDS keys by dispatch or message id), and listed from all of them.
 */
export const FEED = {
  rejections: (month: string) => `rejections#${month}`,
  attention: (kind: AttentionKind) => `attention#${kind}`,
} as const;
/** The shape of a monthly rejections feed key (a cursor naming another is not one this table issued). */
export const REJECTION_FEED = /^rejections#\d{4}-\d\d$/;
/** The partition a feed entry is written under: its feed's shard by the id it lists. */
export const feedShardOf = (feed: string, id: string): string => `${feed}#${pad(shardOf(id, FEED_SHARD_BYTE, FEED_SHARDS), 2)}`;
/** Every partition of a feed: its shards, and its unsharded key (entries written before the sharding). */
export const feedPartitionsOf = (feed: string): string[] => [...Array.from({ length: FEED_SHARDS }, (_, shard) => `${feed}#${pad(shard, 2)}`), feed];
/**
 * An origin's own rejections (CONTRACT §15): a list of its own, named `origin-rejections#{origin}` (what its
 * cursor names: one of another origin's list is refused), spread over ORIGIN_SHARDS keys by message id.
 * New with v3, so no unsharded key was ever written: its partitions are the shards alone.
 */
export const originRejectionListOf = (origin: string): string => `origin-rejections#${origin}`;
export const originRejectionKeyOf = (origin: string, messageId: string): string => `${originRejectionListOf(origin)}#${pad(shardOf(messageId, FEED_SHARD_BYTE, ORIGIN_SHARDS), 2)}`;
export const originRejectionPartitionsOf = (origin: string): string[] => Array.from({ length: ORIGIN_SHARDS }, (_, shard) => `${originRejectionListOf(origin)}#${pad(shard, 2)}`);
/** An origin's history as a list is named by its unsharded key `O#{origin}`, where states written before the sharding are. */
export const originListOf = (origin: string): string => `${ORIGIN_PK}${origin}`;
/** The history partition a dispatch is listed under in its origin's `byOrigin` history. */
export const originKeyOf = (origin: string, dispatchId: string): string => `${originListOf(origin)}#${pad(shardOf(dispatchId, ORIGIN_SHARD_BYTE, ORIGIN_SHARDS), 2)}`;
/** Every partition of an origin's history: its shards, and its unsharded key. */
export const originPartitionsOf = (origin: string): string[] => [...Array.from({ length: ORIGIN_SHARDS }, (_, shard) => `${originListOf(origin)}#${pad(shard, 2)}`), originListOf(origin)];
/** The origin an `originKey` names, sharded (`O#{origin}#{nn}`) or not (`O#{origin}`): origins never contain `#`. */
const originOfKey = (originKey: string): string => originKey.slice(ORIGIN_PK.length).split('#')[0] as string;
/**
 * The inbox partitions of an origin: inject and after_turn results under keys of their own (an inject
 * claim reads only inject entries), each spread over `shards` keys by dispatch id.
 */
export type InboxKind = 'inject' | 'after_turn';
const INBOX_KIND_CODE: Readonly<Record<InboxKind, string>> = { inject: 'i', after_turn: 'a' };
/**
 * Partitions of each origin's inbox: 1 by default (an empty 20 s long poll then reads 5 units, CONTRACT
 * §10); a deployment whose busiest origin takes more than ~250 results/s sets more (`inboxShards`, up to
 * 32; CONTRACT §14: a result claimed once and acked writes 4 units to its entry — made 1, moved by the
 * claim 2, removed 1 — and a key takes 1,000 WCU/s at most),
 * and an empty poll then reads more. Every writer of a state must use the same number; it may grow, never
 * shrink (a claim reads shards 0..n-1 only).
 */
export const INBOX_SHARDS_MAX = 32;
export const inboxShardCount = (configured: number): number => Math.min(INBOX_SHARDS_MAX, Math.max(1, Math.floor(Number.isFinite(configured) ? configured : 1)));
export const inboxKeysOf = (origin: string, shards: number, kinds: readonly InboxKind[]): string[] =>
  kinds.flatMap((kind) => Array.from({ length: shards }, (_, shard) => `inbox#${origin}#${INBOX_KIND_CODE[kind]}#${pad(shard, 2)}`));
export function inboxKeyOf(origin: string, dispatchId: string, shards: number, kind: InboxKind): string {
  const shard = shardOf(dispatchId, INBOX_SHARD_BYTE, shards);
  return `inbox#${origin}#${INBOX_KIND_CODE[kind]}#${pad(shard, 2)}`;
}
/**
 * The inbox index's sort key: a pending result by when it became ready (`{readyAt}#{hash}`); a claimed
 * one under `~#` by when its lease ends (`~#{leaseUntil}#{hash}`; `~` sorts after every digit). So a
 * claim reads one range, everything below `~#{now}#~`: the pending results, oldest first, then the
 * leases lapsed by then — a lease that lives is above it, and however many are held none is read
 * (CONTRACT §10 V3). A lapsed lease is claimable on its own clock, with no write to bring it back.
 */
const INBOX_HELD = '~#';
export const inboxSortKey = (result: Pick<ResultRecord, 'state' | 'readyAt' | 'leaseUntil'>, tieBreak: string): string =>
  result.state === 'claimed' && result.leaseUntil ? `${INBOX_HELD}${result.leaseUntil}#${tieBreak}` : `${result.readyAt}#${tieBreak}`;
/** The inbox index's sort-key ranges: what a claim may take at `now` (below), the pending list (below), the claimed list (above). */
export const INBOX_RANGE = {
  claimableBelow: (now: Date): string => `${INBOX_HELD}${now.toISOString()}#~`,
  pendingBelow: '~',
  claimedAbove: '~',
} as const;
/** The wait index partitions of a target, and the one a dispatch waits in. */
export const waitKeysOf = (target: string): string[] => Array.from({ length: WAIT_SHARDS }, (_, shard) => `W#${target}#${pad(shard, 2)}`);
export function waitKeyOf(target: string, dispatchId: string): string {
  const shard = shardOf(dispatchId, WAIT_SHARD_BYTE, WAIT_SHARDS);
  return `W#${target}#${pad(shard, 2)}`;
}
/**
 * The wait index's sort key: highest priority first (its band `{9 − priority}#`), then by origin (so
 * the next origin after the last one admitted is one query away: `compareOrigins` is this order), then
 * oldest first within the origin.
 */
export const waitSortKey = (priority: number, origin: string, createdAt: string, tieBreak: string): string => `${waitBandOf(priority)}${origin}#${createdAt}#${tieBreak}`;
const waitBandOf = (priority: number): string => `${MAX_PRIORITY - priority}#`;
/** The wait index's sort-key ranges `nextWaiting` reads: a priority band's entries after `origin`'s, and `origin`'s own. */
export const WAIT_RANGE = {
  afterOrigin: (priority: number, origin: string) => ({ from: `${waitBandOf(priority)}${origin}#~`, to: `${waitBandOf(priority)}~` }),
  ofOrigin: (priority: number, origin: string) => ({ prefix: `${waitBandOf(priority)}${origin}#` }),
} as const;
/** A wait index entry's dispatch, origin, priority and age, read back from its keys (KEYS_ONLY). */
export function waitingEntryOf(pk: string, waitAt: string): WaitingEntry | undefined {
  const match = /^(\d)#([a-z0-9-]{1,64})#([^#]+)#[^#]+$/.exec(waitAt);
  if (!match || !pk.startsWith(DISPATCH)) return undefined;
  return { dispatchId: dispatchIdOfKey(pk), priority: MAX_PRIORITY - Number(match[1]), origin: match[2] as string, createdAt: match[3] as string };
}
export const DUE_SHARD_KEYS: readonly string[] = Array.from({ length: DUE_SHARDS }, (_, shard) => `due#${pad(shard, 2)}`);

export const dispatchIdOfKey = (pk: string): string => pk.slice(DISPATCH.length);

/** The key of a dispatch's state item (a well-formed dispatch id), as the census tells them from the rest. */
export const isStateItemKey = (pk: string, sk: string): boolean => /^D#[\w.:-]{1,128}$/.test(pk) && sk === KEY.state('').sk;
export const isRejectionItemKey = (pk: string, sk: string): boolean => pk.startsWith(REJECTION_PK) && sk === KEY.rejection('').sk;

export function dueShardOf(dispatchId: string): string {
  return DUE_SHARD_KEYS[shardOf(dispatchId, DUE_SHARD_BYTE, DUE_SHARDS)] as string;
}

/** The partitions of the `recent` index, and the one a dispatch is listed under. */
export const RECENT_SHARD_KEYS: readonly string[] = Array.from({ length: RECENT_SHARDS }, (_, shard) => `R#${pad(shard, 2)}`);
export function recentShardOf(dispatchId: string): string {
  return RECENT_SHARD_KEYS[shardOf(dispatchId, RECENT_SHARD_BYTE, RECENT_SHARDS)] as string;
}
/** A sort key that starts with an ISO time, then `#` and a tail of the shape given (a position a cursor may name). */
function isTimedPosition(value: string, tail: RegExp): boolean {
  const at = value.indexOf('#');
  if (at < 0 || !tail.test(value.slice(at + 1))) return false;
  const time = value.slice(0, at);
  return /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)$/.test(time) && !Number.isNaN(Date.parse(time));
}
/**
 * A position in the `recent` or `byOrigin` index as `stateItem` writes it (`createdKey`: an ISO creation
 * time and the hash of the id), or on the attention list (`feedAt`: when the problem began, the same
 * hash): what a cursor of those lists may name, and nothing else.
 */
export const isRecentPosition = (value: string): boolean => isTimedPosition(value, /^[A-Za-z0-9_-]{10}$/);
/** A position in the rejections feed (`feedAt`: when, and the rejected message's id). */
export const isRejectionPosition = (value: string): boolean => isTimedPosition(value, /^[!-~]{1,256}$/);
/** The counter item a stream batch adds to: chosen by the batch (its first sequence number), so batches spread over them. */
export function countShardOf(seed: string): number {
  return shardOf(seed, 0, COUNT_SHARDS);
}
/** The counter items' attribute names are the buckets of `shared/dispatch/counts.ts`, as they are. */
export const COUNT_KEYS: ReadonlyArray<{ readonly pk: string; readonly sk: string }> = Array.from({ length: COUNT_SHARDS }, (_, shard) => KEY.counts(shard));

/**
 * The table's key schema, indexes, stream and TTL: used by the CDK construct and the local platform alike.
 * Built by a call marked pure, so a bundle that never reads it (every function's) leaves it out.
 */
export const LEDGER_TABLE_DEFINITION: {
  readonly attributeDefinitions: AttributeDefinition[];
  readonly keySchema: KeySchemaElement[];
  readonly globalSecondaryIndexes: GlobalSecondaryIndex[];
  readonly ttlAttribute: string;
} = /* @__PURE__ */ (() => ({
  attributeDefinitions: ['pk', 'sk', 'dueShard', 'dueAt', 'originKey', 'createdKey', 'feedKey', 'feedAt', 'inboxKey', 'inboxAt', 'waitKey', 'waitAt', 'recentShard'].map((name) => ({
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
    {
      IndexName: INDEX.inbox,
      KeySchema: [{ AttributeName: 'inboxKey', KeyType: 'HASH' }, { AttributeName: 'inboxAt', KeyType: 'RANGE' }],
      Projection: { ProjectionType: 'KEYS_ONLY' },
    },
    { IndexName: INDEX.waiting, KeySchema: [{ AttributeName: 'waitKey', KeyType: 'HASH' }, { AttributeName: 'waitAt', KeyType: 'RANGE' }], Projection: { ProjectionType: 'KEYS_ONLY' } },
    { IndexName: INDEX.recent, KeySchema: [{ AttributeName: 'recentShard', KeyType: 'HASH' }, { AttributeName: 'createdKey', KeyType: 'RANGE' }], Projection: { ProjectionType: 'KEYS_ONLY' } },
  ],
  ttlAttribute: TTL_ATTRIBUTE,
}))();

/** The item a failed condition returns (ALL_OLD) comes back in wire format, even through the document client. */
export type Item = Record<string, unknown>;

/** Null fields are left out of the stored item (they cost bytes on every write) and restored on read. */
export function withoutNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutNulls);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== null).map(([name, field]) => [name, withoutNulls(field)]));
}

/** A short, stable tie-breaker for sort keys, instead of repeating a 128-character id. */
export const idHash = (id: string): string => digestOf(id).toString('base64url').slice(0, 10);

/** When an item written at `at` expires: the retention after it (DynamoDB TTL, epoch seconds). */
export const expiryOf = (at: string, retentionSeconds: number): number => Math.floor(Date.parse(at) / 1000) + retentionSeconds;

/**
 * The accepted message outlives the dispatch it anchors: its expiry is counted from when it was
 * received, over twice the retention (a dispatch's clocks are bounded at 30 days each), so a state never
 * outlives the anchor that lets a redelivery resume it.
 */
export const ANCHOR_RETENTION_FACTOR = 2;

// ——— codecs: every stored item is decoded and checked, never cast ——————————————————————————————

export { CorruptItemError };

type Check = (value: unknown) => boolean;
const isString: Check = (value) => typeof value === 'string';
const isNumber: Check = (value) => typeof value === 'number' && Number.isFinite(value);
const isBoolean: Check = (value) => typeof value === 'boolean';
const isObject: Check = (value) => typeof value === 'object' && value !== null && !Array.isArray(value);
const isArray: Check = Array.isArray;
const optional = (check: Check): Check => (value) => value === undefined || value === null || check(value);

/** A stored item's key, as a CorruptItemError names it. */
const keyOf = (item: Item): string => `${String(item.pk)}/${String(item.sk)}`;

/** Checks the named fields of a stored item; throws CorruptItemError naming the first that is wrong. */
function checked(item: Item, fields: Readonly<Record<string, Check>>): Item {
  for (const [field, check] of Object.entries(fields)) {
    const path = field.split('.');
    let value: unknown = item;
    for (const part of path) value = isObject(value) ? (value as Item)[part] : undefined;
    if (!check(value)) throw new CorruptItemError(keyOf(item), `${field} is missing or of the wrong type`);
  }
  return item;
}

/**
 * The hot state item. Kept small (≤ 1 KB for usual ids): the dispatch id and origin live only in the
 * keys, nulls are not stored, and the history sort key carries a hash of the id rather than the id.
 */
export function stateItem(state: DispatchState, retentionSeconds: number, inboxShards = 1): Item {
  const { dispatchId, origin, dueAt, storedDueAt: _transient, createdAt: _created, sentAt, ...rest } = state;
  // Kept within one write unit: what the codec can restore is not stored (the defaults, the creation
  // time the history key carries, the current run's id its receipts repeat, the result's id and attempt).
  const { timeouts, supersededRuns, deliveryMode, receipts, result: currentResult, ...others } = rest;
  const compact: Record<string, unknown> = {
    ...others,
    ...(isDefaultTimeouts(timeouts) ? {} : { timeouts }),
    ...(supersededRuns.length > 0 ? { supersededRuns } : {}),
    ...(deliveryMode === 'callback' ? {} : { deliveryMode }),
    receipts: receipts.map((receipt) => ('runId' in receipt && receipt.attempt === state.attempt && receipt.runId === state.runId ? withoutRunId(receipt) : receipt)),
    ...(currentResult ? { result: storedResult(currentResult) } : {}),
    // Only while it waits: it orders the wait index, and the hot item stays within one write unit after.
    ...(sentAt && state.phase === 'accepted' && state.waitingFor ? { sentAt } : {}),
  };
  const item: Item = {
    ...KEY.state(dispatchId),
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
  // Retention starts when the dispatch reaches a final state: blocked, or a final run whose evidence is settled.
  // (A manual dispatch settles when a person attests its result: nothing else will ever happen to it.)
  const settled = (state.phase === 'submitted' && isTerminal(state.execution.status) && state.evidence.outcome !== 'pending') || (state.phase === 'accepted' && !!state.manual?.resultAttestation);
  if (state.phase === 'blocked' || state.phase === 'cancelled' || settled) item[TTL_ATTRIBUTE] = expiryOf(state.updatedAt, retentionSeconds);
  return item;
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

const STATE_FIELDS: Readonly<Record<string, Check>> = {
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
};

const BLOCKED_CODES: readonly BlockedCode[] = ['invalid_fields', 'unknown_target', 'unknown_parent', 'hop_budget_exceeded', 'target_rejected', 'retry_budget_spent'];
/** States written before the code had a field of its own carried it only as the reason's prefix. */
function legacyBlockedCode(reason: string | null | undefined): BlockedCode | null {
  return BLOCKED_CODES.find((code) => reason === code || reason?.startsWith(`${code}:`)) ?? null;
}

export function stateOf(item: Item): DispatchState {
  const { pk, sk: _sk, w: _write, dueShard: _shard, recentShard: _recent, originKey, createdKey, expiresAt: _expires, feedKey: _feed, feedAt: _feedAt, inboxKey: _inbox, inboxAt: _inboxAt, waitKey: _wait, waitAt: _waitAt, dueAt, ...rest } = checked(item, STATE_FIELDS);
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
    changes: stored.changes ?? [],
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
    },
    dueAt: typeof dueAt === 'string' ? dueAt : null,
    ...(stored.result ? { result: resultRecordOf({ ...resultFieldsOf(stored.result as unknown as Item), id: resultIdOf(dispatchId, attempt, stored.resultRound ?? 0), attempt }, `${String(pk)}/STATE`) } : {}),
    ...(stored.redispatch ? { redispatch: { ...stored.redispatch, supersededRunId: stored.redispatch.supersededRunId ?? null, cancel: stored.redispatch.cancel ?? null } } : {}),
  };
}

/** A stored result record, checked and with its nulls restored. */
function resultRecordOf(value: unknown, key: string): ResultRecord {
  const record = checked({ pk: key, sk: 'result', ...(value as Item) }, { id: isString, attempt: isNumber, state: (v) => v === 'pending' || v === 'claimed' || v === 'delivered' || v === 'dropped', readyAt: isString, deliveryAttempts: isNumber });
  const { pk: _pk, sk: _sk, ...stored } = record;
  const nulls = { claimToken: null, leaseUntil: null, deliveredAt: null, deliveredBy: null, droppedReason: null, droppedAt: null };
  return { ...nulls, ...stored } as unknown as ResultRecord;
}

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

/** What a stream image of the ledger table holds, decoded (the publisher and the retention function read the stream). */
export type DecodedItem =
  | { readonly kind: 'state'; readonly state: DispatchState }
  | { readonly kind: 'message'; readonly message: AcceptedMessage }
  | { readonly kind: 'rejection'; readonly rejection: Rejection }
  | { readonly kind: 'check'; readonly check: EvidenceCheck }
  | { readonly kind: 'operator_receipt'; readonly receipt: OperatorReceipt }
  | { readonly kind: 'corrupt'; readonly key: string; readonly problem: string }
  | { readonly kind: 'other' };

/** Decodes an unmarshalled item (e.g. a stream record's NewImage/OldImage) by its key shape. */
export function decodeItem(item: Record<string, unknown> | undefined): DecodedItem {
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
