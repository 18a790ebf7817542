/**
 * `load` with what it finds reused for `ttlMs` (target registrations, principals): what intake reads
 * for every message and people change rarely. Only a found value is kept — something registered is
 * seen at once, a change or removal within `ttlMs`. Concurrent reads of one key share one load (a batch
 * of 10 records for one target is one read, not 10). `ttlMs` 0 keeps nothing. At most `maxKept`
 * values are kept (senders may be role sessions of ever new names): the expired go first, then the oldest.
 */
export function ttlCache<K, V extends object>(ttlMs: number, load: (key: K) => Promise<V | undefined>, clock: () => number = Date.now, maxKept = 1_000): (key: K) => Promise<V | undefined> {
  const kept = new Map<K, readonly [value: V, until: number]>();
  const loading = new Map<K, Promise<V | undefined>>();
  return async (key) => {
    const found = kept.get(key);
    if (found && found[1] > clock()) return found[0];
    let pending = loading.get(key);
    if (!pending) {
      pending = load(key)
        .then((value) => {
          if (value && ttlMs > 0) {
            if (kept.size >= maxKept) {
              const now = clock();
              for (const [old, [, until]] of kept) if (until <= now) kept.delete(old);
              // Still full: the oldest kept (a Map iterates in insertion order) makes room.
              if (kept.size >= maxKept) kept.delete(kept.keys().next().value as K);
            }
            kept.set(key, [value, clock() + ttlMs]);
          }
          return value;
        })
        .finally(() => loading.delete(key));
      loading.set(key, pending);
    }
    return pending;
  };
}
