import type { Log, RunEvent } from './model.js';

/**
 * The demo agent's calls back into the ledger API (CONTRACT §8): run events and evidence uploads.
 * The ledger may be down or may refuse a call (that is what some tests exercise), so a failed callback
 * is logged and reported as `false`, never thrown.
 */

const DEFAULT_TIMEOUT_MS = 5_000;
const PREVIEW_CHARS = 200;
/** Tries per callback: 100, 200, 400, 800 ms apart. */
const MAX_TRIES = 5;

function base(callbackUrl: string): string {
  return callbackUrl.replace(/\/+$/, '');
}

/**
 * Where a run's events go.
 *
 * @example
 * eventsUrl('http://127.0.0.1:4000/', 'r-1') // 'http://127.0.0.1:4000/runs/r-1/events'
 */
export function eventsUrl(callbackUrl: string, runId: string): string {
  return `${base(callbackUrl)}/runs/${encodeURIComponent(runId)}/events`;
}

/**
 * Where one evidence file goes. Each ref segment is encoded on its own so the `/` between segments
 * survives as a path separator.
 *
 * @example
 * evidenceUrl('http://h', 'd:1', 'out/my report.md', 'r-1')
 * // 'http://h/dispatches/d%3A1/evidence/out/my%20report.md?runId=r-1'
 */
export function evidenceUrl(callbackUrl: string, dispatchId: string, ref: string, runId: string): string {
  const encodedRef = ref.split('/').map(encodeURIComponent).join('/');
  return `${base(callbackUrl)}/dispatches/${encodeURIComponent(dispatchId)}/evidence/${encodedRef}?runId=${encodeURIComponent(runId)}`;
}

export interface CallbackClientOptions {
  readonly log: Log;
  /** Aborted when the agent stops: in-flight callbacks end quietly. */
  readonly stopSignal: AbortSignal;
  readonly timeoutMs?: number;
  /** Tries per callback. @default 5 */
  readonly maxTries?: number;
}

export class CallbackClient {
  readonly #log: Log;
  readonly #stopSignal: AbortSignal;
  readonly #timeoutMs: number;
  readonly #maxTries: number;

  constructor(options: CallbackClientOptions) {
    this.#maxTries = options.maxTries ?? MAX_TRIES;
    this.#log = options.log;
    this.#stopSignal = options.stopSignal;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  /** Posts one run event; `true` when the ledger answered 2xx. */
  postEvent(callbackUrl: string, runId: string, event: RunEvent): Promise<boolean> {
    return this.#send(
      { kind: 'event', runId, dispatchId: event.dispatchId, seq: event.seq, type: event.type },
      eventsUrl(callbackUrl, runId),
      { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(event) },
    );
  }

  /** Uploads one evidence file; `true` when the ledger answered 2xx. */
  putEvidence(callbackUrl: string, dispatchId: string, runId: string, ref: string, content: string): Promise<boolean> {
    return this.#send(
      { kind: 'evidence', runId, dispatchId, ref },
      evidenceUrl(callbackUrl, dispatchId, ref, runId),
      { method: 'PUT', headers: { 'content-type': 'text/plain; charset=utf-8' }, body: content },
    );
  }

  /**
   * Sends one callback, retrying what may succeed later — a 409 (the ledger may not have recorded the
   * run yet: its state is written after our submission answer), 429, 5xx, or no answer — a few times
   * with backoff, as a real target should.
   */
  async #send(context: Record<string, unknown>, url: string, init: RequestInit): Promise<boolean> {
    for (let attempt = 1; attempt <= this.#maxTries; attempt += 1) {
      const outcome = await this.#sendOnce(context, url, init, attempt === this.#maxTries);
      if (outcome !== 'retry') return outcome === 'delivered';
      await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** (attempt - 1)));
      if (this.#stopSignal.aborted) return false;
    }
    return false;
  }

  async #sendOnce(context: Record<string, unknown>, url: string, init: RequestInit, last: boolean): Promise<'delivered' | 'refused' | 'retry'> {
    if (this.#stopSignal.aborted) return 'refused';
    try {
      const response = await fetch(url, {
        ...init,
        signal: AbortSignal.any([this.#stopSignal, AbortSignal.timeout(this.#timeoutMs)]),
      });
      // Always read the body: an unread body keeps the connection busy.
      const text = await response.text();
      if (response.ok) {
        this.#log({ level: 'debug', msg: 'callback_delivered', ...context, status: response.status });
        return 'delivered';
      }
      const retryable = response.status === 409 || response.status === 429 || response.status >= 500;
      if (retryable && !last) return 'retry';
      this.#log({
        level: 'warn',
        msg: 'callback_rejected',
        ...context,
        url,
        status: response.status,
        body: text.slice(0, PREVIEW_CHARS),
      });
      return 'refused';
    } catch (error) {
      if (this.#stopSignal.aborted) return 'refused';
      if (!last) return 'retry';
      this.#log({ level: 'warn', msg: 'callback_failed', ...context, url, error: describeError(error) });
      return 'refused';
    }
  }
}

function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  // fetch wraps the interesting part (ECONNREFUSED, timeout) in `cause`.
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return `${error.message}${cause}`;
}
