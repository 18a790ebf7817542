import { setTimeout as pause } from 'node:timers/promises';
import { signedFetch, type SigV4Signing } from '../runtime/sigv4.js';
import type { Log, RunEvent, RunEventType } from './model.js';

/**
 * The demo agent's calls back into the ledger API (CONTRACT §8): run events and evidence uploads.
 * The ledger may be down or may refuse a call (that is what some tests exercise), so a failed callback
 * is logged and reported as `false`, never thrown.
 */

const DEFAULT_TIMEOUT_MS = 5_000;
const PREVIEW_CHARS = 200;
/** Tries per callback: 100, 200, 400, 800 ms apart. */
const MAX_TRIES = 5;
/**
 * How long a callback the ledger answers 409 `not_yet_recorded` is retried: until the ledger has
 * recorded the run. That can take as long as a crashed intake's message takes to come back (the
 * dispatch queue's visibility timeout, 180 s in the stack) plus the claim (60 s): five minutes covers it.
 */
const NOT_YET_RECORDED_MS = 5 * 60_000;
/** The longest pause between two of those tries. */
const NOT_YET_RECORDED_PAUSE_MS = 2_000;
/**
 * How long a run's final event the ledger answers 5xx is retried. The ledger answers 5xx, and records
 * nothing, when it cannot store the result's body (CONTRACT §10): the target is to retry, and the
 * final event is the one that carries the result. Two minutes rides out a blob store's hiccup; after
 * that the ledger's own lookup (which shows the same result) is the way back.
 */
const FINAL_EVENT_SERVER_ERROR_MS = 2 * 60_000;
const FINAL_EVENTS: ReadonlySet<RunEventType> = new Set<RunEventType>(['completed', 'failed', 'cancelled']);

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
  /** How long `not_yet_recorded` is retried (on top of the tries). @default 5 minutes */
  readonly notYetRecordedMs?: number;
  /** How long a 5xx answer to a final event (completed, failed, cancelled) is retried (on top of the tries). @default 2 minutes */
  readonly finalEventServerErrorMs?: number;
  /**
   * Sign every callback with SigV4 as this target (the ledger API's AWS_IAM auth; locally
   * `ledger local up --sigv4`). Each try is signed afresh. @default unsigned
   */
  readonly signing?: SigV4Signing;
}

/** A callback as sent: its body is always in hand, so it can be signed. */
interface CallbackInit {
  readonly method: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/** How long, beyond its tries, one callback keeps retrying the answers that mean "not yet". */
interface Patience {
  readonly notYetRecordedMs: number;
  readonly serverErrorMs: number;
}

export class CallbackClient {
  readonly #log: Log;
  readonly #stopSignal: AbortSignal;
  readonly #timeoutMs: number;
  readonly #maxTries: number;
  readonly #notYetRecordedMs: number;
  readonly #finalEventServerErrorMs: number;
  readonly #signing: SigV4Signing | undefined;

  constructor(options: CallbackClientOptions) {
    this.#signing = options.signing;
    this.#maxTries = options.maxTries ?? MAX_TRIES;
    this.#notYetRecordedMs = options.notYetRecordedMs ?? NOT_YET_RECORDED_MS;
    this.#finalEventServerErrorMs = options.finalEventServerErrorMs ?? FINAL_EVENT_SERVER_ERROR_MS;
    this.#log = options.log;
    this.#stopSignal = options.stopSignal;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  /** Posts one run event; `true` when the ledger answered 2xx. A final event also rides out 5xx answers for a while. */
  postEvent(callbackUrl: string, runId: string, event: RunEvent): Promise<boolean> {
    return this.#send(
      { kind: 'event', runId, dispatchId: event.dispatchId, seq: event.seq, type: event.type },
      eventsUrl(callbackUrl, runId),
      { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(event) },
      { notYetRecordedMs: this.#notYetRecordedMs, serverErrorMs: FINAL_EVENTS.has(event.type) ? this.#finalEventServerErrorMs : 0 },
    );
  }

  /** Uploads one evidence file; `true` when the ledger answered 2xx. */
  putEvidence(callbackUrl: string, dispatchId: string, runId: string, ref: string, content: string): Promise<boolean> {
    return this.#send(
      { kind: 'evidence', runId, dispatchId, ref },
      evidenceUrl(callbackUrl, dispatchId, ref, runId),
      { method: 'PUT', headers: { 'content-type': 'text/plain; charset=utf-8' }, body: content },
      { notYetRecordedMs: this.#notYetRecordedMs, serverErrorMs: 0 },
    );
  }

  /**
   * Sends one callback, retrying what may succeed later — 429, 5xx, another 409, or no answer — a few
   * times with backoff, as a real target should; and, for as long as `patience` says, a 409
   * `not_yet_recorded` (the ledger has not recorded the run yet: its state is written after our
   * submission answer, or after a crashed delivery of the dispatch comes back), so no evidence is lost
   * to it, and a 5xx to a final event (the ledger could not store its result and recorded nothing).
   */
  async #send(context: Record<string, unknown>, url: string, init: CallbackInit, patience: Patience): Promise<boolean> {
    const started = Date.now();
    let waits = 0;
    for (let attempt = 1; ; ) {
      const answer = await this.#sendOnce(context, url, init);
      if (answer.kind === 'delivered') return true;
      if (this.#stopSignal.aborted) return false;
      // Waiting for the ledger to record the run, or to store the result, does not use up the tries.
      const elapsed = Date.now() - started;
      const waiting =
        (answer.kind === 'not_yet_recorded' && elapsed < patience.notYetRecordedMs) ||
        (answer.kind === 'server_error' && elapsed < patience.serverErrorMs);
      if (answer.kind === 'refused' || (!waiting && attempt >= this.#maxTries)) {
        this.#log({ level: 'warn', msg: answer.kind === 'failed' ? 'callback_failed' : 'callback_rejected', ...context, url, ...answer.detail });
        return false;
      }
      if (!waiting) attempt += 1;
      waits += 1;
      const ms = waiting ? Math.min(NOT_YET_RECORDED_PAUSE_MS, 100 * 2 ** Math.min(waits - 1, 10)) : 100 * 2 ** (attempt - 2);
      try {
        await pause(ms, undefined, { signal: this.#stopSignal });
      } catch {
        return false; // the agent is stopping: in-flight callbacks end quietly
      }
    }
  }

  async #sendOnce(
    context: Record<string, unknown>,
    url: string,
    init: CallbackInit,
  ): Promise<{ readonly kind: 'delivered' | 'refused' | 'retry' | 'server_error' | 'not_yet_recorded' | 'failed'; readonly detail?: Record<string, unknown> }> {
    if (this.#stopSignal.aborted) return { kind: 'refused', detail: { reason: 'agent stopping' } };
    try {
      const signal = AbortSignal.any([this.#stopSignal, AbortSignal.timeout(this.#timeoutMs)]);
      const response = this.#signing ? await signedFetch(url, { ...init, signal }, this.#signing) : await fetch(url, { ...init, signal });
      // Always read the body: an unread body keeps the connection busy.
      const text = await response.text();
      if (response.ok) {
        this.#log({ level: 'debug', msg: 'callback_delivered', ...context, status: response.status });
        return { kind: 'delivered' };
      }
      const detail = { status: response.status, body: text.slice(0, PREVIEW_CHARS) };
      if (response.status === 409 && errorCode(text) === 'not_yet_recorded') return { kind: 'not_yet_recorded', detail };
      if (response.status >= 500) return { kind: 'server_error', detail };
      const retryable = response.status === 409 || response.status === 429;
      return { kind: retryable ? 'retry' : 'refused', detail };
    } catch (error) {
      return { kind: 'failed', detail: { error: describeError(error) } };
    }
  }
}

/** The ledger's error code (`{"error":{"code"}}`), if the body is one. */
function errorCode(text: string): string | undefined {
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown } };
    return typeof body.error?.code === 'string' ? body.error.code : undefined;
  } catch {
    return undefined;
  }
}

function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  // fetch wraps the interesting part (ECONNREFUSED, timeout) in `cause`.
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return `${error.message}${cause}`;
}
