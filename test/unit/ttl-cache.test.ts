import { describe, expect, it } from 'vitest';
import { cachedPrincipals, mayActForOrigin, type Principal, type PrincipalRegistry } from '../../shared/principals/principals.js';
import { ttlCache } from '../../shared/ttl-cache.js';

/** A registry that counts its reads, whose entries the test changes. */
function countingRegistry(entries: Map<string, Principal>): PrincipalRegistry & { reads: number } {
  const registry = {
    reads: 0,
    resolve: async (id: string) => {
      registry.reads += 1;
      return entries.get(id);
    },
  };
  return registry;
}

describe('ttlCache: registry reads reused for a while', () => {
  it('keeps a found value for ttlMs, then reads again', async () => {
    let now = 1_000;
    let reads = 0;
    const get = ttlCache(30_000, async (key: string) => ({ read: `${key}#${(reads += 1)}` }), () => now);
    expect(await get('a')).toEqual({ read: 'a#1' });
    now += 29_999;
    expect(await get('a')).toEqual({ read: 'a#1' });
    now += 1;
    expect(await get('a')).toEqual({ read: 'a#2' });
    expect(reads).toBe(2);
  });

  it('keeps at most maxKept values: the expired go first, then the oldest (senders of ever new names cannot grow it; review fix)', async () => {
    let now = 0;
    let reads = 0;
    const get = ttlCache(1_000, async (key: string) => ({ read: `${key}#${(reads += 1)}` }), () => now, 3);
    for (const key of ['a', 'b', 'c']) await get(key);
    now = 500;
    await get('d'); // full, none expired: the oldest (a) makes room
    expect(await get('b')).toEqual({ read: 'b#2' });
    expect(await get('a')).toEqual({ read: 'a#5' });
    now = 1_200; // c (kept since 0) has expired and goes first; d and a, kept at 500, stay
    await get('e');
    expect(reads).toBe(6);
    expect(await get('d')).toEqual({ read: 'd#4' });
  });

  it('never keeps a miss: what is registered later is seen at once', async () => {
    let value: { name: string } | undefined;
    let reads = 0;
    const get = ttlCache(30_000, async () => ((reads += 1), value));
    expect(await get('late')).toBeUndefined();
    value = { name: 'registered' };
    expect(await get('late')).toEqual({ name: 'registered' });
    expect(reads).toBe(2);
  });

  it('shares one load between concurrent reads of a key (a batch of 10 is one read), and none after a failed one', async () => {
    let reads = 0;
    let fail = true;
    // Each load waits until the test lets it finish: all ten reads are asked while it is in flight.
    let finish: () => void = () => undefined;
    const get = ttlCache(30_000, async () => {
      reads += 1;
      await new Promise<void>((resolve) => {
        finish = resolve;
      });
      if (fail) throw new Error('throttled');
      return { reads };
    });
    const failing = Promise.allSettled(Array.from({ length: 10 }, () => get('t')));
    finish();
    const failed = await failing;
    expect(failed.every((result) => result.status === 'rejected')).toBe(true);
    expect(reads).toBe(1);
    fail = false;
    const succeeding = Promise.all(Array.from({ length: 10 }, () => get('t')));
    finish();
    expect(await succeeding).toEqual(Array(10).fill({ reads: 2 }));
    expect(reads).toBe(2);
  });

  it('reads every time with ttlMs 0', async () => {
    let reads = 0;
    const get = ttlCache(0, async () => ({ reads: (reads += 1) }));
    await get('k');
    await get('k');
    expect(reads).toBe(2);
  });
});

describe('cachedPrincipals: intake resolves each sender once per ttl, not once per message', () => {
  it('reuses a resolved principal, sees a removal once ttl has passed, and a new registration at once', async () => {
    let now = 0;
    const entries = new Map<string, Principal>([['AROAPLANNER', { role: 'origin', origin: 'planner' }]]);
    const table = countingRegistry(entries);
    const principals = cachedPrincipals(table, 30_000, () => now);
    for (let message = 0; message < 5; message += 1) expect(await mayActForOrigin(principals, 'enforce', 'AROAPLANNER', 'planner')).toBe(true);
    expect(table.reads).toBe(1);

    entries.delete('AROAPLANNER');
    now += 30_000;
    expect(await mayActForOrigin(principals, 'enforce', 'AROAPLANNER', 'planner')).toBe(false);

    // A role session (as SQS reports a role's messages) is resolved through its role once, then reused.
    now += 1;
    entries.set('AROAPLANNER', { role: 'origin', origin: 'planner' });
    const reads = table.reads;
    for (let message = 0; message < 5; message += 1) expect(await mayActForOrigin(principals, 'enforce', 'AROAPLANNER:planner-1', 'planner')).toBe(true);
    expect(table.reads - reads).toBe(2);

    expect(await mayActForOrigin(principals, 'enforce', 'AROALATER', 'planner')).toBe(false);
    entries.set('AROALATER', { role: 'origin', origin: 'planner' });
    expect(await mayActForOrigin(principals, 'enforce', 'AROALATER', 'planner')).toBe(true);
  });
});
