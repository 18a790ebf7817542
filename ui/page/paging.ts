/**
 * The overview's list as one contiguous run of the ledger's list (newest first): the newest page is
 * renewed on every refresh, while older pages someone asked for stay loaded below it. Kept contiguous
 * so that no dispatch is ever skipped: a page renewed on its own, with the older pages' cursor kept,
 * would lose whatever the new arrivals pushed off the newest page — it is in neither.
 */
export interface Run<T> {
  /** Newest first, as the ledger lists them; each once. */
  readonly items: readonly T[];
  /** Where the ledger's list goes on after the last item; null: nothing older. */
  readonly cursor: string | null;
}

/**
 * What is loaded once the ledger's newest pages (`fresh`, one or more pages read from the top) are
 * merged into it, by `keyOf`: the fresh items, then the loaded items older than the last one the two
 * share, with the loaded run's cursor. A loaded item the fresh pages pass over is gone from the list
 * (removed, or out of the filter now) and is dropped. Undefined when the two share no item while the
 * ledger has more after `fresh`: read on from `fresh.cursor` and merge again (or keep `fresh` alone,
 * dropping the older pages). When `fresh` is the whole list, it is the answer.
 *
 * @example
 * mergeNewest({ items: [c, b, a], cursor: 'after-a' }, { items: [d, c], cursor: 'after-c' }, key)
 * // → { items: [d, c, b, a], cursor: 'after-a' }
 */
export function mergeNewest<T>(loaded: Run<T>, fresh: Run<T>, keyOf: (item: T) => string): Run<T> | undefined {
  // The whole list fits the newest page: nothing loaded before can be missing from it (or still belong).
  if (fresh.cursor === null) return fresh;
  const position = new Map(loaded.items.map((item, index) => [keyOf(item), index]));
  let lastShared = -1;
  for (const item of fresh.items) lastShared = Math.max(lastShared, position.get(keyOf(item)) ?? -1);
  if (lastShared < 0) return undefined;
  const seen = new Set(fresh.items.map(keyOf));
  return { items: [...fresh.items, ...loaded.items.slice(lastShared + 1).filter((item) => !seen.has(keyOf(item)))], cursor: loaded.cursor };
}

/** The loaded run with the next older page after it (read from `loaded.cursor`). */
export function appendOlder<T>(loaded: Run<T>, older: Run<T>, keyOf: (item: T) => string): Run<T> {
  const seen = new Set(loaded.items.map(keyOf));
  return { items: [...loaded.items, ...older.items.filter((item) => !seen.has(keyOf(item)))], cursor: older.cursor };
}

/**
 * What is loaded after a refresh read the ledger's newest page: `newest` alone when no older page is
 * loaded; else merged (mergeNewest), reading on after `newest` — new dispatches may fill more than a
 * page between two refreshes — until the pages meet what is loaded. After `maxPages` more pages, or a
 * page that could not be read, the older pages are dropped: what was read from the top stands alone,
 * contiguous, its cursor going on from there.
 */
export async function renewed<T>(
  loaded: Run<T>,
  newest: Run<T>,
  olderLoaded: boolean,
  readAfter: (cursor: string) => Promise<Run<T> | undefined>,
  keyOf: (item: T) => string,
  maxPages: number,
): Promise<Run<T>> {
  if (!olderLoaded) return newest;
  let fresh = newest;
  for (let pages = 0; ; pages += 1) {
    const merged = mergeNewest(loaded, fresh, keyOf);
    if (merged !== undefined) return merged;
    if (pages === maxPages || fresh.cursor === null) return fresh;
    const next = await readAfter(fresh.cursor);
    if (next === undefined) return fresh;
    fresh = { items: [...fresh.items, ...next.items], cursor: next.cursor };
  }
}
