/**
 * Client-side heartbeat coalescing (CONTRACT §12 "heartbeat() (coalesced)").
 *
 * A run may call `ctx.heartbeat()` in a tight loop; the ledger needs to hear at most one heartbeat per
 * fifth of the stall window to know the run is alive. So: the first heartbeat of a window is sent at
 * once; the others in that window are folded into one trailing heartbeat sent when the window closes,
 * so the latest sign of life is never more than one window late (a stall verdict is delayed by
 * coalescing, never advanced) — while the ledger takes them. A heartbeat still on its way (the ledger
 * out of reach, its tries going on) stands for those asked meanwhile: one more goes when it settles,
 * never a queue of them. Any other event sent counts as activity too: a heartbeat right after a
 * progress note says nothing new.
 */

export interface Timer {
  cancel(): void;
}

/** Time as the coalescer sees it; tests pass a hand-driven one. */
export interface Clock {
  now(): number;
  setTimer(ms: number, fire: () => void): Timer;
}

/**
 * The longest delay Node's timers take: 2^31-1 ms (about 24.8 days). A longer one is not refused but
 * fires after 1 ms (TimeoutOverflowWarning), which would turn a long wait into a busy loop.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A delay any kit timer can be given: `ms` clamped into 0..{@link MAX_TIMER_MS} (NaN reads as 0). Every
 * timer the kit sets goes through it, whatever the window it was computed from.
 *
 * @example
 * timerDelayMs(120_000)        // 120000
 * timerDelayMs(10_737_419_000) // 2147483647
 */
export function timerDelayMs(ms: number): number {
  if (!(ms > 0)) return 0;
  return Math.min(ms, MAX_TIMER_MS);
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(ms, fire) {
    const handle = setTimeout(fire, timerDelayMs(ms));
    // A pending trailing heartbeat must not keep a process alive on its own.
    handle.unref();
    return { cancel: () => clearTimeout(handle) };
  },
};

/** What one `request()` did. */
export type HeartbeatDecision = 'sent' | 'deferred' | 'coalesced' | 'stopped';

/** The stall window the ledger applies when a submission names none (CONTRACT §1). */
export const DEFAULT_STALL_AFTER_SECONDS = 600;

/**
 * One fifth of the stall window, in milliseconds: the most often a heartbeat is worth sending. Never
 * more than {@link MAX_TIMER_MS}: a submission's window is at most 30 days (a fifth of it fits), but a
 * `stallHintSeconds` option is not bounded.
 *
 * @example
 * heartbeatIntervalMs(600) // 120000
 * heartbeatIntervalMs(2)   // 400
 */
export function heartbeatIntervalMs(stallAfterSeconds: number): number {
  return Math.max(1, timerDelayMs(Math.floor((stallAfterSeconds * 1000) / 5)));
}

export class HeartbeatCoalescer {
  readonly #intervalMs: number;
  readonly #send: () => Promise<unknown> | void;
  readonly #clock: Clock;
  #lastAt: number | undefined;
  #trailing: Timer | undefined;
  #stopped = false;
  /** A heartbeat `send` returned a promise for has not settled. */
  #onItsWay = false;
  /** One was asked for (or its trailing time came) meanwhile: asked again once the one on its way settles. */
  #owed = false;

  /**
   * `send` sends one heartbeat; when it returns a promise (the event on its way), no other heartbeat is
   * sent until it settles, and what was asked meanwhile is asked again then, once — with the ledger out
   * of reach, heartbeats would otherwise queue up behind each other, each retrying for its budget, and a
   * progress or final event behind them all.
   */
  constructor(intervalMs: number, send: () => Promise<unknown> | void, clock: Clock = systemClock) {
    if (!(intervalMs > 0)) throw new RangeError(`intervalMs must be > 0, got ${intervalMs}`);
    this.#intervalMs = intervalMs;
    this.#send = send;
    this.#clock = clock;
  }

  /**
   * Asks for a heartbeat: sent now when the window since the last activity is over, else folded into
   * the one trailing heartbeat of this window.
   */
  request(): HeartbeatDecision {
    if (this.#stopped) return 'stopped';
    if (this.#onItsWay) {
      this.#owed = true;
      return 'coalesced';
    }
    const now = this.#clock.now();
    if (this.#lastAt === undefined || now - this.#lastAt >= this.#intervalMs) {
      this.#fire(now);
      return 'sent';
    }
    if (this.#trailing) return 'coalesced';
    this.#trailing = this.#clock.setTimer(timerDelayMs(this.#lastAt + this.#intervalMs - now), () => {
      this.#trailing = undefined;
      if (this.#stopped) return;
      if (this.#onItsWay) this.#owed = true;
      else this.#fire(this.#clock.now());
    });
    return 'deferred';
  }

  /** Another event was sent: it shows the run alive, so a trailing heartbeat is no longer needed. */
  activity(): void {
    if (this.#stopped) return;
    this.#lastAt = this.#clock.now();
    this.#owed = false;
    this.#trailing?.cancel();
    this.#trailing = undefined;
  }

  /** The run ended: nothing more is sent, and no timer is left behind. */
  stop(): void {
    this.#stopped = true;
    this.#trailing?.cancel();
    this.#trailing = undefined;
  }

  #fire(now: number): void {
    this.#lastAt = now;
    // A trailing heartbeat still pending is this one.
    this.#trailing?.cancel();
    this.#trailing = undefined;
    const sent = this.#send();
    if (!sent) return;
    this.#onItsWay = true;
    const settled = (): void => {
      this.#onItsWay = false;
      if (!this.#owed) return;
      this.#owed = false;
      try {
        this.request();
      } catch {
        // Deliberately ignored: a send that throws is the sender's to log; nothing may reject here unheard.
      }
    };
    sent.then(settled, settled);
  }
}
