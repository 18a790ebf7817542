import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Runs `poll` over and over until stopped: the shared engine of the local event sources. A poll that
 * found nothing waits `idleMs` (long polls wait inside `poll` instead); a failing poll is reported and
 * retried after `errorBackoffMs`. `stop` aborts the signal given to `poll` and waits for the loop.
 */
export class PollLoop {
  private loop: Promise<void> | undefined;
  private abort = new AbortController();

  constructor(
    private readonly poll: (signal: AbortSignal) => Promise<number>,
    private readonly options: { readonly idleMs?: number; readonly errorBackoffMs?: number; readonly onError?: (error: unknown) => void } = {},
  ) {}

  /** The signal of the current run, for a poll made outside the loop. */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  start(): void {
    if (this.loop) return;
    this.abort = new AbortController();
    this.loop = this.run(this.abort.signal);
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop;
    this.loop = undefined;
  }

  private async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        const found = await this.poll(signal);
        if (found === 0 && this.options.idleMs) await sleep(this.options.idleMs, undefined, { signal });
      } catch (error) {
        if (signal.aborted) break;
        this.options.onError?.(error);
        await sleep(this.options.errorBackoffMs ?? 500, undefined, { signal }).catch(() => undefined);
      }
    }
  }
}
