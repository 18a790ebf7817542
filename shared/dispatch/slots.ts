/**
 * A target's concurrency limit as slot shards (CONTRACT §11): the limit is split over counters of
 * their own, so admissions and releases of a busy target spread over several partition keys (§14),
 * and each counter carries its own cap, which the slot write is conditioned on. The caps sum exactly to
 * the limit and each is at least 1, so a limit of 1 is one shard of one slot.
 */

/** Slots per shard, at most, before the limit is spread over another shard. */
export const SLOTS_PER_SHARD = 8;
/** Shards of one target, at most (the hottest counter then takes 1/32 of its admissions). */
export const MAX_SLOT_SHARDS = 32;

/**
 * The cap of each shard for `limit`, in shard order. `existing`: the shards the target already has —
 * a lower limit is spread over them (each at most its share, so one that holds more than its new cap
 * only drains: the total never passes the new limit once they have), and those beyond the limit get 0.
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

/** One slot shard as stored: its cap, the slots held, how many of those are held by runs the ledger lost sight of. */
export interface SlotShard {
  readonly shard: number;
  readonly cap: number;
  readonly held: number;
  readonly unknownHeld: number;
  /** The origin of the dispatch admitted last through this shard: admissions go round-robin from it. */
  readonly lastOrigin: string | null;
}

/** A target's slots, summed over its shards (a shard beyond the current limit's has cap 0 and only drains). */
export function slotTotals(shards: readonly SlotShard[]): { readonly limit: number; readonly held: number; readonly unknownHeld: number; readonly free: number } {
  const limit = shards.reduce((sum, shard) => sum + shard.cap, 0);
  const held = shards.reduce((sum, shard) => sum + shard.held, 0);
  const unknownHeld = shards.reduce((sum, shard) => sum + shard.unknownHeld, 0);
  const free = shards.reduce((sum, shard) => sum + Math.max(0, shard.cap - shard.held), 0);
  return { limit, held, unknownHeld, free };
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
