import { setTimeout as pause } from 'node:timers/promises';
import type { Claim, ClaimedResult, SettledResult } from '@dispatch-ledger/protocol/answers';
import { isLedgerApiError, isLedgerNetworkError } from './errors.js';
import type { CallOptions } from './transport.js';

/**
 * `inbox.deliver`: the settlement order of docs/protocol.md §10 and §15 as a library — claim; renew the
 * lease while the handler runs and until each result is acked; ack only after the handler resolved;
 * release everything if it throws; ack nothing if the lease is lost while it runs.
 */

export interface ClaimOptions extends CallOptions {
  readonly mode?: 'inject' | 'after_turn';
  readonly max?: number;
  readonly leaseSeconds?: number;
  readonly waitSeconds?: number;
  readonly resultIds?: readonly string[];
}
export interface DeliverOutcome {
  /** Results the handler was given. */
  readonly claimed: number;
  /** Acked after the handler resolved. */
  readonly acked: number;
  /**
   * The lease was lost (or ran out, its renewals failing) before every result was acked. If that
   * happened while the handler ran, its signal was aborted and nothing was acked; during the acks, those
   * already through stay acked and the rest are tried (the ledger refuses what it no longer holds).
   */
  readonly leaseLost: boolean;
  /**
   * The results not acked: all of them when the lease was lost while the handler ran; else those the
   * ledger refused (409: superseded by a redispatch, or the lease gone) and those whose ack could not be
   * sent before their lease ended (the ledger down: each comes back to a later claim).
   */
  readonly notAcked: readonly string[];
}
export type DeliverHandler = (results: readonly ClaimedResult[], context: { readonly signal: AbortSignal }) => Promise<unknown>;

/** The inbox calls `deliver` makes. */
export interface InboxCalls {
  claim(options?: ClaimOptions): Promise<Claim>;
  release(resultId: string, claimToken: string, reason?: string): Promise<SettledResult>;
  renew(resultId: string, claimToken: string, leaseSeconds: number, options?: CallOptions): Promise<SettledResult>;
  ack(resultId: string, claimToken: string, options?: CallOptions): Promise<SettledResult>;
}

/**
 * How long a claim's answer is taken to travel, at most, once the ledger took the lease: a long poll
 * (`waitSeconds`) takes it when its wait finds results, up to 20 s after it was asked (a review: timed from
 * the asking, a lease shorter than about 1.5 × the wait ran out before its first renewal).
 */
const CLAIM_ANSWER_MS = 2_000;

/** The longest pause between two tries of an ack. */
const MAX_ACK_PAUSE_MS = 2_000;
/** The least time one try of an ack is given, even once its lease has ended (the ledger may still take it). */
const MIN_ACK_TRY_MS = 2_000;

/**
 * A failure that may not last: no answer, 429, 5xx, or 409 `conflict` (the dispatch kept changing while
 * the ledger wrote). An ack with the same token is idempotent, so it is simply sent again.
 */
const mayPass = (error: unknown): boolean => isLedgerNetworkError(error) || (isLedgerApiError(error) && (error.retryable || error.code === 'conflict'));

/**
 * The lease on one claim's results, kept while anything is left to ack: renewed at a third of its
 * length (one renewal at a time), each result on its own. A result superseded by a redispatch is set
 * aside (its ack would be refused) without touching the others; any other refusal means the lease is
 * lost; a renewal that fails (5xx, no answer) changes nothing, and the lease runs out at its last end.
 */
class Lease {
  readonly handling = new AbortController();
  /** Why the lease was lost, once it was. */
  lost: string | undefined;
  /** Results still held and not yet being acked: what a renewal renews. Each with the end of its lease. */
  readonly #held = new Map<string, number>();
  readonly #ends = new Map<string, number>();
  readonly superseded = new Set<string>();
  #renewal: Promise<void> | undefined;
  #stopped = false;
  readonly #renewing: NodeJS.Timeout;
  /** A renewal is given until the next is due: one that hangs does not keep the next from being sent. */
  readonly #periodMs: number;
  #expires: NodeJS.Timeout | undefined;

  readonly #inbox: InboxCalls;
  readonly #claimToken: string;
  readonly #leaseSeconds: number;

  constructor(inbox: InboxCalls, claimToken: string, results: readonly ClaimedResult[], leaseSeconds: number, endsAt: number) {
    this.#inbox = inbox;
    this.#claimToken = claimToken;
    this.#leaseSeconds = leaseSeconds;
    for (const result of results) {
      this.#held.set(result.resultId, endsAt);
      this.#ends.set(result.resultId, endsAt);
    }
    this.#arm();
    this.#periodMs = Math.max(1_000, Math.ceil((leaseSeconds * 1000) / 3));
    this.#renewing = setInterval(() => {
      this.#renewal ??= this.#renew().finally(() => (this.#renewal = undefined));
    }, this.#periodMs);
  }

  /** When `resultId`'s lease ends, as the ledger last granted it. */
  endOf(resultId: string): number {
    return this.#ends.get(resultId) ?? 0;
  }

  /** `resultId` is being acked: renewed no more (a renewal crossing its ack would read as a lost lease). */
  settling(resultId: string): void {
    this.#held.delete(resultId);
    this.#arm();
  }

  lose(why: string): void {
    if (this.lost !== undefined || this.#stopped) return;
    this.lost = why;
    this.handling.abort(new Error(why));
    this.#quiet();
  }

  /** Whatever a renewal on its way says is heard before anything is acked. */
  async heard(): Promise<void> {
    await this.#renewal;
  }

  async stop(): Promise<void> {
    await this.#renewal;
    this.#stopped = true;
    this.#quiet();
  }

  #quiet(): void {
    clearInterval(this.#renewing);
    clearTimeout(this.#expires);
  }

  /** The expiry timer, at the earliest end among the results still held (none held: none). */
  #arm(): void {
    clearTimeout(this.#expires);
    if (this.#held.size === 0 || this.lost !== undefined || this.#stopped) return;
    const endsAt = Math.min(...this.#held.values());
    this.#expires = setTimeout(() => this.lose('the lease on these results ran out before it could be renewed'), Math.max(0, endsAt - Date.now()));
  }

  async #renew(): Promise<void> {
    const ids = [...this.#held.keys()];
    // A renewed lease ends leaseSeconds after the ledger took it, which is after this moment: timed by this
    // machine's clock alone (regression: the ledger's leaseExpiresAt against this clock — one ahead lost every lease).
    const askedAt = Date.now();
    const signal = AbortSignal.timeout(this.#periodMs);
    const answers = await Promise.allSettled(ids.map((resultId) => this.#inbox.renew(resultId, this.#claimToken, this.#leaseSeconds, { signal })));
    if (this.#stopped || this.lost !== undefined) return;
    answers.forEach((answer, i) => {
      const resultId = ids[i] ?? '';
      // Being acked (or set aside) since the renewal left: its answer no longer speaks for the lease.
      if (!this.#held.has(resultId)) return;
      if (answer.status === 'fulfilled') {
        const endsAt = askedAt + this.#leaseSeconds * 1000;
        this.#held.set(resultId, endsAt);
        this.#ends.set(resultId, endsAt);
      } else if (isLedgerApiError(answer.reason) && answer.reason.code === 'superseded') {
        this.#held.delete(resultId);
        this.superseded.add(resultId);
      } else if (isLedgerApiError(answer.reason) && answer.reason.status === 409 && !mayPass(answer.reason)) {
        this.lose('the lease on these results was lost');
      }
    });
    this.#arm();
  }
}

/**
 * Acks one result, sending it again while the failure may pass and its lease lasts; each try ends by
 * the lease's end (given at least `MIN_ACK_TRY_MS`), so a ledger that stops answering costs each result
 * its lease at most. A 409 is the ledger's refusal (superseded, the lease gone); any other refusal is
 * returned to be thrown once every result has had its try.
 */
async function ack(inbox: InboxCalls, resultId: string, claimToken: string, endsAt: number, caller: AbortSignal | undefined): Promise<{ readonly kind: 'acked' | 'refused' | 'unsent' } | { readonly kind: 'failed'; readonly error: unknown }> {
  for (let pauseMs = 100; ; pauseMs = Math.min(MAX_ACK_PAUSE_MS, pauseMs * 2)) {
    // The caller's signal ends the acks too (a shutdown): what is not acked comes back to a later claim.
    if (caller?.aborted) return { kind: 'unsent' };
    const timeout = AbortSignal.timeout(Math.max(MIN_ACK_TRY_MS, endsAt - Date.now()));
    try {
      await inbox.ack(resultId, claimToken, { signal: caller ? AbortSignal.any([caller, timeout]) : timeout });
      return { kind: 'acked' };
    } catch (error) {
      if (!mayPass(error)) return isLedgerApiError(error) && error.status === 409 ? { kind: 'refused' } : { kind: 'failed', error };
      if (caller?.aborted || Date.now() + pauseMs >= endsAt) return { kind: 'unsent' };
      await pause(pauseMs, undefined, caller ? { signal: caller } : {}).catch(() => undefined);
    }
  }
}

export async function deliver(inbox: InboxCalls, options: ClaimOptions, handle: DeliverHandler): Promise<DeliverOutcome> {
  const leaseSeconds = options.leaseSeconds ?? 60;
  // The lease ends leaseSeconds after the ledger took the claim: timed by this machine's clock (regression:
  // the ledger's leaseExpiresAt read against this clock — one ahead of the ledger's by more than two thirds
  // of the lease lost every lease before its first renewal). The ledger took it after the claim was asked,
  // and — a long poll answering once its wait found results — at most CLAIM_ANSWER_MS before its answer came.
  const askedAt = Date.now();
  const claim = await inbox.claim({ ...options, leaseSeconds });
  const takenAt = Math.max(askedAt, Date.now() - CLAIM_ANSWER_MS);
  const { claimToken, results } = claim;
  if (results.length === 0 || claimToken === null) return { claimed: 0, acked: 0, leaseLost: false, notAcked: [] };
  const lease = new Lease(inbox, claimToken, results, leaseSeconds, takenAt + leaseSeconds * 1000);
  // The caller's own signal ends the handling too: aborted, nothing is acked.
  const callerAborted = (): void => lease.handling.abort(options.signal?.reason ?? new Error('the caller aborted delivery'));
  options.signal?.addEventListener('abort', callerAborted, { once: true });
  // Aborted while the claim was on its way: the handler starts aborted.
  if (options.signal?.aborted) callerAborted();
  try {
    try {
      await handle(results, { signal: lease.handling.signal });
    } catch (error) {
      await lease.stop();
      if (lease.lost === undefined) {
        const reason = error instanceof Error ? error.message : String(error);
        await Promise.allSettled(results.map((result) => inbox.release(result.resultId, claimToken, reason)));
      }
      throw error;
    }
    await lease.heard();
    if (lease.lost !== undefined || lease.handling.signal.aborted) {
      await lease.stop();
      return { claimed: results.length, acked: 0, leaseLost: lease.lost !== undefined, notAcked: results.map((result) => result.resultId) };
    }
    // Each result on its own, the others' lease still renewed: one the ledger refuses (409: superseded,
    // or its lease gone), or cannot be reached for, does not keep the others from their ack.
    let acked = 0;
    const notAcked: string[] = [];
    const failures: unknown[] = [];
    for (const { resultId } of results) {
      lease.settling(resultId);
      const outcome = lease.superseded.has(resultId) ? { kind: 'refused' as const } : await ack(inbox, resultId, claimToken, lease.endOf(resultId), options.signal);
      if (outcome.kind === 'acked') acked += 1;
      else notAcked.push(resultId);
      if (outcome.kind === 'failed') failures.push(outcome.error);
    }
    await lease.stop();
    // Refused otherwise than by a 409 (a 403, a 404, an answer without what the protocol requires): the
    // first such error is thrown, once every other result has had its ack.
    if (failures.length > 0) throw failures[0];
    return { claimed: results.length, acked, leaseLost: lease.lost !== undefined, notAcked };
  } finally {
    await lease.stop();
    options.signal?.removeEventListener('abort', callerAborted);
  }
}
