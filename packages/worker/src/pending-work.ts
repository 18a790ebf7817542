/**
 * The work a Lambda invocation has under way — writes, events, uploads — which it must finish before
 * its handler returns: Lambda freezes the process then, and what is left half-sent is lost until the
 * next invocation thaws it (if one ever does).
 */
export class PendingWork {
  readonly #pending = new Set<Promise<unknown>>();

  /** Keeps `work` until it settles (its rejection is the caller's to report: held, it never throws). */
  hold(work: Promise<unknown>): void {
    const held = work.catch(() => undefined);
    this.#pending.add(held);
    void held.finally(() => this.#pending.delete(held));
  }

  /** Waits for everything held, and for what that work held in turn. */
  async drain(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }
}
