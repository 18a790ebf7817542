/**
 * Values read from a registry, reused for `ttlMs` (target registrations, principals): what intake reads
 * for every message and people change rarely. Only a found value is kept — something registered is
 * seen at once, a change or removal within `ttlMs`. Concurrent reads of one key while none is kept share
 * one load (a batch of 10 records for one target is one read, not 10). `ttlMs` 0 keeps nothing.
 */
export class TtlCache<K, V> {
  private readonly kept = new Map<K, { readonly value: V; readonly until: number }>();
  private readonly loading = new Map<K, Promise<V | undefined>>();

  constructor(
    private readonly ttlMs: number,
    private readonly clock: () => number = Date.now,
  ) {}

  async get(key: K, load: (key: K) => Promise<V | undefined>): Promise<V | undefined> {
    if (this.ttlMs <= 0) return load(key);
    const kept = this.kept.get(key);
    if (kept && kept.until > this.clock()) return kept.value;
    const pending = this.loading.get(key);
    if (pending) return pending;
    const loaded = load(key).then(
      (value) => {
        this.loading.delete(key);
        if (value === undefined) this.kept.delete(key);
        else this.kept.set(key, { value, until: this.clock() + this.ttlMs });
        return value;
      },
      (error: unknown) => {
        this.loading.delete(key);
        throw error;
      },
    );
    this.loading.set(key, loaded);
    return loaded;
  }
}
