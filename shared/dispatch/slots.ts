/**
 * A target's concurrency limit as slot shards (CONTRACT §11): the limit is split over counters of
 * their own, so admissions and releases of a busy target spread over several partition keys (§14),
 * and each counter carries its own cap, which the slot write is conditioned on (`held < cap`).
 *
 * The invariant: every shard's cap is at least what it holds, and the caps sum exactly to the limit.
 * A take raises one shard's `held` only under its cap and a release only lowers it, so while that holds
 * the runs in flight (Σ held) never pass Σ cap = the limit, whichever shard each take lands on.
 *
 * A change of the limit is where static caps break it (old shards end with caps below what they hold,
 * new ones start empty, and each take is checked only against its own shard: a raise 8 → 9 let 12 in).
 * So a change is an *allotment* (`allotSlotCaps`): the store reads what each shard holds and writes every
 * cap in one transaction, each conditioned on the shard holding no more than was read.
 *  - Σ held ≤ limit: each shard gets at least what it holds, the rest towards the even spread of
 *    `slotShardCaps` (exactly it when the holds allow), summing to the limit: the invariant holds at once.
 *  - Σ held > limit (lowered under what is in flight): no allotment can hold it, so the target *drains* —
 *    every cap 0, no shard takes, and the limit in force is kept beside the caps (`limit`) for what
 *    `GET /attention` says. The monitor's tick (every admission pass) allots again as soon as Σ held ≤
 *    limit: nothing new is submitted until the runs in flight are under the limit.
 * Why not one counter: a single item every admission writes is a hot key (§14); why not caps alone,
 * re-spread by a fixed rule: a shard that holds more than its new cap drains while another takes, and
 * the sum passes the limit. The allotment keeps the shards and takes the holds into account, so
 * Σ max(held, cap) ≤ limit whenever any take is possible (property-tested in test/unit/flow-control).
 * A limit of 1 is one shard of cap 1 (or, over existing shards, one cap 1 and the others 0).
 */

/** Slots per shard, at most, before the limit is spread over another shard. */
export const SLOTS_PER_SHARD = 8;
/** Shards of one target, at most (the hottest counter then takes 1/32 of its admissions). */
export const MAX_SLOT_SHARDS = 32;

/**
 * The even spread of `limit` over shards, in shard order: what an allotment gives when the holds allow
 * (`allotSlotCaps`). `existing`: the shards the target already has — a lower limit is spread over them,
 * and those beyond the limit get 0.
 *
 * @example
 * slotShardCaps(1)     // [1]
 * slotShardCaps(20)    // [7, 7, 6]
 * slotShardCaps(8, 3)  // [3, 3, 2]
 * slotShardCaps(2, 3)  // [1, 1, 0]
 */
export function slotShardCaps(limit: number, existing = 0): number[] {
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`a concurrency limit is a whole number ≥ 1, not ${limit}`);
  const shards = Math.min(limit, Math.max(Math.min(MAX_SLOT_SHARDS, Math.ceil(limit / SLOTS_PER_SHARD)), existing));
  const base = Math.floor(limit / shards);
  const caps = Array.from({ length: shards }, (_, shard) => base + (shard < limit % shards ? 1 : 0));
  return [...caps, ...Array.from({ length: Math.max(0, existing - shards) }, () => 0)];
}

/**
 * The caps an allotment gives the shards holding `held` (index = shard) for `limit`, or undefined when
 * they hold more than it (the target drains: no shard may take until an allotment finds them under).
 * Every cap ≥ its shard's held, the caps sum exactly to `limit`, and where the holds allow each cap is
 * `slotShardCaps(limit, held.length)`'s: the remainder goes to the shards with the most room, taken back
 * first from the largest caps. Never fewer shards than `held` has (a shard once made stays).
 *
 * @example
 * allotSlotCaps(9, [8])          // [8, 1]   (8 held on the old shard; the new one takes 1)
 * allotSlotCaps(9, [3])          // [5, 4]   (the even spread)
 * allotSlotCaps(3, [5, 4])       // undefined (9 in flight over 3: drain)
 * allotSlotCaps(3, [1, 1])       // [2, 1]
 */
export function allotSlotCaps(limit: number, held: readonly number[]): number[] | undefined {
  const even = slotShardCaps(limit, held.length);
  const holds = even.map((_, shard) => Math.max(0, held[shard] ?? 0));
  if (holds.reduce((sum, count) => sum + count, 0) > limit) return undefined;
  const caps = even.map((cap, shard) => Math.max(cap, holds[shard] as number));
  // Over the limit by what the holds pushed up: taken back from the largest caps that hold less than their cap.
  for (let excess = caps.reduce((sum, cap) => sum + cap, 0) - limit; excess > 0; excess -= 1) {
    let widest = -1;
    for (let shard = 0; shard < caps.length; shard += 1) {
      if ((caps[shard] as number) > (holds[shard] as number) && (widest < 0 || (caps[shard] as number) >= (caps[widest] as number))) widest = shard;
    }
    caps[widest] = (caps[widest] as number) - 1;
  }
  return caps;
}

/** One slot shard as stored: its cap, the slots held, how many of those are held by runs the ledger lost sight of. */
export interface SlotShard {
  readonly shard: number;
  readonly cap: number;
  /** The limit in force when the caps were last allotted (0: none); absent on shards allotted before it was kept. */
  readonly limit?: number | undefined;
  readonly held: number;
  readonly unknownHeld: number;
  /** The origin of the dispatch admitted last through this shard: admissions go round-robin from it. */
  readonly lastOrigin: string | null;
  /** When a slot was last taken here (ISO); absent on shards no take has stamped yet. */
  readonly takenAt?: string | undefined;
  /** When the caps were last allotted (ISO); absent on shards allotted before it was kept. */
  readonly allottedAt?: string | undefined;
}

/**
 * When a full shard became full: its last take or its last allotment, whichever came later. A take
 * only succeeds under the cap and a release only frees room, so a shard full now was filled by the
 * last of those two writes and has stayed full since (null: neither was stamped).
 */
function filledAt(shard: SlotShard): string | null {
  const times = [shard.takenAt, shard.allottedAt].filter((time): time is string => typeof time === 'string').sort();
  return times.at(-1) ?? null;
}

/** The limit in force over a target's shards: the one the last allotment kept, or (shards allotted before it was kept) the sum of the caps. */
export function slotLimit(shards: readonly SlotShard[]): number {
  const kept = shards.find((shard) => shard.limit !== undefined)?.limit;
  return kept ?? shards.reduce((sum, shard) => sum + shard.cap, 0);
}

/**
 * Whether the shards want an allotment now, and can have one: draining, with no more runs in flight
 * than the limit; or allotted off the even spread (a change's holds pushed some caps up) while the
 * holds now fit the even spread. False otherwise: one allotment per drain, one back to even.
 */
export function wantsAllotment(shards: readonly SlotShard[]): boolean {
  const limit = slotLimit(shards);
  if (limit === 0 || shards.length === 0) return false;
  const caps = shards.map((shard) => shard.cap);
  const held = shards.map((shard) => shard.held);
  if (caps.reduce((sum, cap) => sum + cap, 0) !== limit) return held.reduce((sum, count) => sum + count, 0) <= limit;
  const even = slotShardCaps(limit, shards.length);
  return even.some((cap, shard) => cap !== caps[shard]) && even.every((cap, shard) => (held[shard] ?? 0) <= cap);
}

/**
 * A target's slots, summed over its shards. `draining`: lowered under what is in flight, no shard takes
 * until fewer runs than the limit are (CONTRACT §11 V3); `free` is then 0.
 */
export function slotTotals(shards: readonly SlotShard[]): {
  readonly limit: number;
  readonly held: number;
  readonly unknownHeld: number;
  readonly free: number;
  readonly draining: boolean;
  /** With no slot free: when the last shard filled, i.e. since when the target has been full (CONTRACT §2 `since`); else null. */
  readonly fullSince: string | null;
} {
  const limit = slotLimit(shards);
  const held = shards.reduce((sum, shard) => sum + shard.held, 0);
  const unknownHeld = shards.reduce((sum, shard) => sum + shard.unknownHeld, 0);
  const free = shards.reduce((sum, shard) => sum + Math.max(0, shard.cap - shard.held), 0);
  const draining = limit > 0 && shards.reduce((sum, shard) => sum + shard.cap, 0) !== limit;
  const filled = shards.map(filledAt);
  const fullSince = free > 0 || shards.length === 0 || filled.includes(null) ? null : ((filled as string[]).sort().at(-1) ?? null);
  return { limit, held, unknownHeld, free, draining, fullSince };
}

/** One dispatch waiting for a slot, as the wait index orders it. */
export interface WaitingEntry {
  readonly dispatchId: string;
  readonly origin: string;
  readonly priority: number;
  readonly createdAt: string;
}

/**
 * Which waiting dispatch goes next (CONTRACT §11): the highest priority waiting; within it, the first
 * origin after `lastOrigin` in name order that has one (round-robin, wrapping), and that origin's oldest.
 * Pure: the store finds the same with a few bounded index queries; tests use it as the definition.
 */
export function nextAdmission(waiting: readonly WaitingEntry[], lastOrigin: string | null): WaitingEntry | undefined {
  if (waiting.length === 0) return undefined;
  const top = Math.max(...waiting.map((entry) => entry.priority));
  const band = waiting.filter((entry) => entry.priority === top);
  const origins = [...new Set(band.map((entry) => entry.origin))].sort(compareOrigins);
  const origin = origins.find((candidate) => lastOrigin !== null && compareOrigins(candidate, lastOrigin) > 0) ?? (origins[0] as string);
  return band.filter((entry) => entry.origin === origin).sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.dispatchId < b.dispatchId ? -1 : 1))[0];
}

/** Origins in the order the wait index keeps them (`origin#…`): byte order of the name followed by `#`. */
export const compareOrigins = (a: string, b: string): number => (`${a}#` < `${b}#` ? -1 : `${a}#` > `${b}#` ? 1 : 0);
