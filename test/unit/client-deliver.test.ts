import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isLedgerApiError, type LedgerClient } from '@dispatch-ledger/client';
import { startFakeLedger, type FakeLedger, type PlannedAnswer } from '../support/fake-ledger.js';

/**
 * `inbox.deliver` (docs/protocol.md §10, §15) against a ledger that misbehaves on purpose: each way its
 * settlement can end — a lease lost or run out, a result superseded, acks that fail on their way, the
 * caller aborting — counted by the requests the ledger saw, on a fake ledger of loopback HTTP.
 */

let fake: FakeLedger;
let client: LedgerClient;
/** Per test: the answer to each request by its path (and a delay). */
let respond: ((path: string) => PlannedAnswer) | undefined;
beforeAll(async () => {
  fake = await startFakeLedger((path) => respond?.(path) ?? { status: 404, body: { error: { code: 'not_found', message: 'no plan for this request' } } });
  client = fake.client;
});
afterAll(() => fake.stop());

describe('inbox.deliver against a ledger that misbehaves on purpose', () => {
  const result = (resultId: string) => ({ resultId, dispatchId: `d-${resultId}`, attempt: 1, deliveryAttempts: 0, execution: { status: 'completed' } });
  const claimOf = (ids: string[], leaseMs: number) => ({ claimToken: 'ct-1', leaseExpiresAt: new Date(Date.now() + leaseMs).toISOString(), results: ids.map(result) });
  const settled = (resultId: string, state: string) => ({ resultId, state, deliveryAttempts: 0, leaseExpiresAt: new Date(Date.now() + 5_000).toISOString() });
  const conflict = (code: string) => ({ error: { code, message: code } });
  /** The first renewal the ledger is sent, as a sentinel: `orAbort` ends when it arrived or when `signal` aborts. */
  function renewalSentinel(): { seen: (answer: PlannedAnswer) => PlannedAnswer; orAbort: (signal: AbortSignal) => Promise<void> } {
    let arrived = (): void => undefined;
    const first = new Promise<void>((resolve) => (arrived = resolve));
    return {
      seen: (answer) => {
        arrived();
        return answer;
      },
      orAbort: (signal) => Promise.race([first, new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })))]),
    };
  }
  afterEach(() => {
    respond = undefined;
    fake.seen.length = 0;
  });

  it('hears a renewal still on its way when the handler ends: its 409 means nothing is acked', async () => {
    // The handler ends the moment the ledger has the first renewal, whose 409 is still on its way.
    let renewalArrived = (): void => undefined;
    const renewalSeen = new Promise<void>((resolve) => (renewalArrived = resolve));
    respond = (path) => {
      if (path.endsWith('/claim')) return { status: 200, body: claimOf(['a'], 5_000) };
      if (path.endsWith('/renew')) {
        renewalArrived();
        return { status: 409, body: conflict('lease_lost'), delayMs: 300 };
      }
      return { status: 200, body: settled('a', 'delivered') };
    };
    const outcome = await client.inbox.deliver({ mode: 'inject', leaseSeconds: 5 }, () => renewalSeen);
    expect(outcome).toEqual({ claimed: 1, acked: 0, leaseLost: true, notAcked: ['a'] });
    expect(fake.seen.filter((seen) => seen.endsWith('/ack'))).toEqual([]);
  });

  it('stops the handler when the lease runs out with every renewal failing (5xx), and acks nothing', { timeout: 15_000 }, async () => {
    respond = (path) => (path.endsWith('/claim') ? { status: 200, body: claimOf(['a'], 2_000) } : path.endsWith('/renew') ? { status: 503, body: conflict('unavailable') } : { status: 200, body: settled('a', 'delivered') });
    let aborted = false;
    const outcome = await client.inbox.deliver({ mode: 'inject', leaseSeconds: 5 }, (_results, { signal }) =>
      new Promise<void>((resolve) => {
        // Ends only when aborted: the lease running out is what must stop it.
        signal.addEventListener('abort', () => {
          aborted = true;
          resolve();
        });
      }),
    );
    expect(aborted).toBe(true);
    expect(outcome).toMatchObject({ acked: 0, leaseLost: true });
    expect(fake.seen.filter((seen) => seen.endsWith('/ack'))).toEqual([]);
  });

  // Regression: the lease's end was the ledger's leaseExpiresAt read against this machine's clock, so a
  // clock ahead of the ledger's by more than two thirds of the lease lost every lease before its first
  // renewal: nothing was ever acked, and each abandoned claim counted towards the origin's drop limit.
  it("times the lease by this machine's clock from when it asked, whatever the ledger's clock says", async () => {
    const hourBehind = (ids: string[]) => ({ ...claimOf(ids, 5_000 - 3_600_000) });
    const renewal = renewalSentinel();
    respond = (path) => (path.endsWith('/claim') ? { status: 200, body: hourBehind(['a']) } : path.endsWith('/renew') ? renewal.seen({ status: 200, body: { ...settled('a', 'claimed'), leaseExpiresAt: new Date(Date.now() + 5_000 - 3_600_000).toISOString() } }) : { status: 200, body: settled('a', 'delivered') });
    // The handler runs until the lease's first renewal reached the ledger, or until it is aborted (a lease taken for lost).
    let aborted = false;
    const outcome = await client.inbox.deliver({ mode: 'inject', leaseSeconds: 5 }, async (_results, { signal }) => {
      await renewal.orAbort(signal);
      aborted = signal.aborted;
    });
    expect(aborted).toBe(false);
    expect(outcome).toEqual({ claimed: 1, acked: 1, leaseLost: false, notAcked: [] });
  });

  it('times a long poll\'s lease from when its answer came, not from when it was asked (a review: a 4 s wait left a 5 s lease 1 s, and it ran out before its first renewal)', async () => {
    const renewal = renewalSentinel();
    respond = (path) => (path.endsWith('/claim') ? { status: 200, body: claimOf(['a'], 5_000), delayMs: 4_000 } : path.endsWith('/renew') ? renewal.seen({ status: 200, body: settled('a', 'claimed') }) : { status: 200, body: settled('a', 'delivered') });
    // Timed from the asking, the lease's end came 1 s into the handler, before its first renewal (at a third of the lease).
    let aborted = false;
    const outcome = await client.inbox.deliver({ mode: 'inject', leaseSeconds: 5, waitSeconds: 5 }, async (_results, { signal }) => {
      await renewal.orAbort(signal);
      aborted = signal.aborted;
    });
    expect(aborted).toBe(false);
    expect(outcome).toEqual({ claimed: 1, acked: 1, leaseLost: false, notAcked: [] });
  }, 15_000);

  it('acks the others when the ledger refuses one (superseded), and names it', async () => {
    respond = (path) =>
      path.endsWith('/claim') ? { status: 200, body: claimOf(['a', 'b', 'c'], 60_000) } : path.includes('/b/ack') ? { status: 409, body: conflict('superseded') } : { status: 200, body: settled('x', 'delivered') };
    const outcome = await client.inbox.deliver({ mode: 'inject' }, async () => undefined);
    expect(outcome).toEqual({ claimed: 3, acked: 2, leaseLost: false, notAcked: ['b'] });
    expect(fake.seen.filter((seen) => seen.endsWith('/ack'))).toHaveLength(3);
  });

  it('keeps renewing, and acks the others, when one result is superseded while the handler runs: that 409 is the result’s, not the lease’s (was: the handler was aborted and nothing acked)', async () => {
    let bRenewals = 0;
    let renewedTwice = (): void => undefined;
    const twice = new Promise<void>((resolve) => (renewedTwice = resolve));
    respond = (path) => {
      if (path.endsWith('/claim')) return { status: 200, body: claimOf(['a', 'b'], 5_000) };
      if (path.endsWith('/a/renew')) return { status: 409, body: conflict('superseded') };
      if (path.endsWith('/b/renew')) {
        bRenewals += 1;
        if (bRenewals === 2) renewedTwice();
        return { status: 200, body: settled('b', 'claimed') };
      }
      return { status: 200, body: settled('b', 'delivered') };
    };
    let aborted = true;
    const outcome = await client.inbox.deliver({ mode: 'inject', leaseSeconds: 5 }, async (_results, { signal }) => {
      await twice;
      aborted = signal.aborted;
    });
    expect(aborted).toBe(false);
    expect(outcome).toEqual({ claimed: 2, acked: 1, leaseLost: false, notAcked: ['a'] });
    expect(fake.seen.filter((seen) => seen.endsWith('/ack'))).toEqual([expect.stringMatching(/\/b\/ack$/)]);
    // Set aside once its 409 was heard: renewed no more.
    expect(fake.seen.filter((seen) => seen.endsWith('/a/renew'))).toHaveLength(1);
  });

  it('sends an ack again when it failed on its way (5xx, 409 conflict): the same token is idempotent; one that cannot get through before its lease ends keeps no other from its ack (was: the first failed ack threw, and the rest were never acked)', async () => {
    const tries = new Map<string, number>();
    respond = (path) => {
      if (path.endsWith('/claim')) return { status: 200, body: claimOf(['a', 'b', 'c'], 3_000) };
      // No renewal moves c's lease end (a slow start would otherwise let one through).
      if (path.endsWith('/renew')) return { status: 503, body: conflict('unavailable') };
      const resultId = /\/inbox\/([^/]+)\/ack$/.exec(path)?.[1] ?? '';
      const n = (tries.get(resultId) ?? 0) + 1;
      tries.set(resultId, n);
      if ((resultId === 'a' && n === 1) || resultId === 'c') return { status: 503, body: conflict('unavailable') };
      if (resultId === 'b' && n === 1) return { status: 409, body: conflict('conflict') };
      return { status: 200, body: settled(resultId, 'delivered') };
    };
    const outcome = await client.inbox.deliver({ mode: 'inject', leaseSeconds: 5 }, async () => undefined);
    expect(outcome).toEqual({ claimed: 3, acked: 2, leaseLost: false, notAcked: ['c'] });
    expect([tries.get('a'), tries.get('b')]).toEqual([2, 2]);
    // Tried again and again, then given up by its lease's end (3 s: 100 ms doubling to 2 s is at most 5 tries).
    expect(tries.get('c')).toBeGreaterThanOrEqual(3);
    expect(tries.get('c')).toBeLessThanOrEqual(6);
  });

  it('stops sending acks when the caller aborts (a shutdown): what is not acked comes back to a later claim (was: tried on until the lease ended)', async () => {
    const caller = new AbortController();
    let ackTries = 0;
    respond = (path) => {
      if (path.endsWith('/claim')) return { status: 200, body: claimOf(['a', 'b'], 60_000) };
      if (path.endsWith('/ack')) {
        ackTries += 1;
        // The ledger is down; the third try is when the process is told to stop.
        if (ackTries === 3) caller.abort();
        return { status: 503, body: conflict('unavailable') };
      }
      return { status: 200, body: settled('x', 'claimed') };
    };
    const outcome = await client.inbox.deliver({ mode: 'inject', signal: caller.signal }, async () => undefined);
    expect(outcome).toEqual({ claimed: 2, acked: 0, leaseLost: false, notAcked: ['a', 'b'] });
    expect(ackTries).toBe(3);
  });

  it('throws a refusal other than a 409 (a 403), once every other result has had its ack', async () => {
    respond = (path) =>
      path.endsWith('/claim') ? { status: 200, body: claimOf(['a', 'b'], 60_000) } : path.endsWith('/a/ack') ? { status: 403, body: conflict('forbidden') } : { status: 200, body: settled('b', 'delivered') };
    const error = await client.inbox.deliver({ mode: 'inject' }, async () => undefined).catch((thrown: unknown) => thrown);
    expect(isLedgerApiError(error) && error.status).toBe(403);
    expect(fake.seen.filter((seen) => seen.endsWith('/ack'))).toEqual([expect.stringMatching(/\/a\/ack$/), expect.stringMatching(/\/b\/ack$/)]);
  });

  it('renews what is not acked yet while the acks go out, and never what is being acked (was: renewals stopped before the first ack, so slow acks outlived the lease)', async () => {
    respond = (path) => {
      if (path.endsWith('/claim')) return { status: 200, body: claimOf(['a', 'b'], 10_000) };
      if (path.endsWith('/renew')) return { status: 200, body: settled('b', 'claimed') };
      // The first ack is slow: longer than a renewal period (5 s / 3).
      return path.endsWith('/a/ack') ? { status: 200, body: settled('a', 'delivered'), delayMs: 3_000 } : { status: 200, body: settled('b', 'delivered') };
    };
    const outcome = await client.inbox.deliver({ mode: 'inject', leaseSeconds: 5 }, async () => undefined);
    expect(outcome).toEqual({ claimed: 2, acked: 2, leaseLost: false, notAcked: [] });
    expect(fake.seen.filter((seen) => seen.endsWith('/b/renew')).length).toBeGreaterThanOrEqual(1);
    expect(fake.seen.filter((seen) => seen.endsWith('/a/renew'))).toEqual([]);
  });

  it('aborts the handler’s signal and acks nothing when the caller aborts delivery', async () => {
    respond = () => ({ status: 200, body: { claimToken: 'ct-1', leaseExpiresAt: 'later', results: [{ resultId: 'r-1', dispatchId: 'd-1', attempt: 1, deliveryAttempts: 0, execution: { status: 'completed' } }] } });
    const before = fake.seen.length;
    const caller = new AbortController();
    let seen = false;
    const outcome = await client.inbox.deliver({ mode: 'inject', signal: caller.signal }, async (_results, { signal }) => {
      caller.abort();
      seen = signal.aborted;
    });
    expect(seen).toBe(true);
    expect(outcome).toEqual({ claimed: 1, acked: 0, leaseLost: false, notAcked: ['r-1'] });
    // The claim, and nothing after it: no ack, no release.
    expect(fake.seen.length - before).toBe(1);
  });
});
