import { createHash, randomBytes } from 'node:crypto';
import { MAX_PRIORITY, type ResultRecord } from '../dispatch/state.js';
import type { WaitingEntry } from '../dispatch/slots.js';
import { type AttentionKind } from '../dispatch/attention.js';
import type { AttributeDefinition, GlobalSecondaryIndex, KeySchemaElement } from '@aws-sdk/client-dynamodb';

/**
 * The ledger table's index keys and shards: how each index is partitioned and sorted. The item kinds
 * themselves — each one's key template, index membership, TTL rule and stored fields — are declared in
 * `item-kinds.ts`; their codecs are in `ledger-items.ts` and `state-item.ts`; every access pattern in
 * `ledger-table.ts`. Kept free of SDK code so the publisher can decode stream images without bundling
 * the DynamoDB client.
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

export const DISPATCH = 'D#';
/** Apart from the rejections' `REJ#` (REJECTION_ITEM): the published stream records (`PUBLISHED_KEY_PREFIXES`) and the census's rejection count are the operator's rejections alone. */
export const ORIGIN_REJECTION_PK = 'OREJ#';
export const REFUSAL_PK = 'REFUSED#';
export const pad = (n: number, width: number): string => String(n).padStart(width, '0');
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
export function digestOf(id: string): Buffer {
  if (lastDigest?.id !== id) lastDigest = { id, digest: createHash('sha256').update(id).digest() };
  return lastDigest.digest;
}

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
export const originOfKey = (originKey: string): string => originKey.slice(ORIGIN_PK.length).split('#')[0] as string;
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

