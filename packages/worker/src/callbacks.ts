import { setMaxListeners } from 'node:events';
import { setTimeout as pause } from 'node:timers/promises';
import { ROUTES, routePath } from '@dispatch-ledger/protocol';
import { readAnswerText } from '@dispatch-ledger/protocol/answer-text';
import { timerDelayMs } from './heartbeat.js';
import { clipForMessage, type Log, type RunEvent } from './model.js';
import { errorCodeOf } from './parse.js';
import type { Signer } from './signer.js';

/**
 * The kit's calls back into the ledger API (CONTRACT §2, §8): run events, evidence uploads, and the
 * read of a spilled task. The ledger may not have recorded the run yet (409 `not_yet_recorded`: its
 * state is written after our answer to `POST /runs`), may be briefly down, or may fail to store a
 * result body (5xx): each of those is retried with capped exponential backoff for a bounded time, a
 * final event for longer. Nothing is given up silently: a refusal or an exhausted budget is logged and
 * returned as an outcome, never thrown.
 */

export interface RetryPolicy {
  /**
   * How long one callback keeps retrying answers that may change (409 not_yet_recorded, 5xx, 429, no
   * answer): a heartbeat, a progress event, a task read. @default 300000 (5 min)
   */
  readonly budgetMs: number;
  /**
   * The same for what a completion rests on: a final event (completed, failed, cancelled), which carries
   * the result, and an evidence upload, its proof. A run is recorded late when the intake that submitted
   * it crashed before writing it down: its message comes back after the queue's visibility timeout, but
   * behind whatever the queue holds, so "not recorded yet" can last as long as a backlog. @default 1800000 (30 min)
   */
  readonly finalBudgetMs: number;
  /** The first pause; each later one doubles. @default 100 */
  readonly firstPauseMs: number;
  /** The longest pause. @default 5000 */
  readonly maxPauseMs: number;
  /** How long one try may take, answer included. @default 10000 */
  readonly tryTimeoutMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = {
  budgetMs: 5 * 60_000,
  finalBudgetMs: 30 * 60_000,
  firstPauseMs: 100,
  maxPauseMs: 5_000,
  tryTimeoutMs: 10_000,
};

/**
 * The policy a worker runs with: the fields it gives over DEFAULT_RETRY (one given as undefined, an unset
 * config value, is the default), each checked — a budget a number of milliseconds ≥ 0, a pause and a
 * try's timeout ≥ 1 — so that no callback retries forever (a NaN give-up time is never reached) or
 * without a pause. Throws a RangeError naming the field.
 */
export function retryPolicyOf(retry: Partial<RetryPolicy> | undefined): RetryPolicy {
  const policy: { -readonly [K in keyof RetryPolicy]: number } = { ...DEFAULT_RETRY };
  for (const [name, value] of Object.entries(retry ?? {}) as Array<[string, unknown]>) {
    if (value === undefined) continue;
    if (!Object.hasOwn(DEFAULT_RETRY, name)) throw new RangeError(`retry.${name.slice(0, 64)} is no retry option (${Object.keys(DEFAULT_RETRY).join(', ')})`);
    const least = name === 'budgetMs' || name === 'finalBudgetMs' ? 0 : 1;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < least) throw new RangeError(`retry.${name} must be a number of milliseconds ≥ ${least}, got ${String(value).slice(0, 64)}`);
    policy[name as keyof RetryPolicy] = value;
  }
  return policy;
}

/** One HTTP exchange; the default is `fetch`. Tests pass a scripted one. */
export type Transport = (
  url: string,
  init: { readonly method: string; readonly headers: Record<string, string>; readonly body?: string | Uint8Array; readonly signal: AbortSignal },
) => Promise<{ readonly status: number; readonly text: string }>;

export const fetchTransport: Transport = async (url, init) => {
  const response = await fetch(url, {
    method: init.method,
    headers: init.headers,
    ...(init.body === undefined ? {} : { body: init.body }),
    signal: init.signal,
    redirect: 'manual',
  });
  // Always read the body: an unread body keeps the connection busy.
  return { status: response.status, text: await boundedText(response) };
};

/**
 * The largest answer a callback reads: the largest the ledger gives is a spilled task, at most a queue
 * message (1 MiB); a larger one (a proxy's page) is no ledger's, and is not held in memory.
 */
export const MAX_ANSWER_BYTES = 2 * 1024 * 1024;
/** What is kept of an error answer (its code is near its start); the rest is not read. */
const ERROR_ANSWER_BYTES = 64 * 1024;

/** A 2xx answer up to MAX_ANSWER_BYTES (more: thrown, a failed try); an error answer's first ERROR_ANSWER_BYTES. */
async function boundedText(response: Response): Promise<string> {
  const read = await readAnswerText(response, { okBytes: MAX_ANSWER_BYTES, errorBytes: ERROR_ANSWER_BYTES });
  if (read.kind === 'too_large') throw new Error(`an answer of ${read.bytes} bytes or more: over the ${MAX_ANSWER_BYTES} a callback reads`);
  return read.text;
}

export type CallbackOutcome =
  | { readonly kind: 'delivered'; readonly status: number; readonly text: string; readonly tries: number }
  /** A 4xx retrying cannot change (other than 408, 429 and the two 409 codes that mean "not yet"). */
  | { readonly kind: 'refused'; readonly status: number; readonly code: string | undefined; readonly text: string; readonly tries: number }
  /** Still failing when the budget ran out. */
  | { readonly kind: 'gave_up'; readonly last: string; readonly tries: number }
  /** The worker closed first. */
  | { readonly kind: 'stopped'; readonly tries: number };

export interface CallbackClientOptions {
  readonly log: Log;
  /** Aborted when the worker closes: in-flight callbacks end as `stopped`. */
  readonly stopSignal: AbortSignal;
  readonly signer?: Signer | undefined;
  readonly retry?: Partial<RetryPolicy> | undefined;
  readonly transport?: Transport;
  /** @default Date.now */
  readonly now?: () => number;
  /** @default an abortable timers/promises setTimeout */
  readonly sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /**
   * When retries must have ended, on `now`'s clock (a Lambda invocation's timeout less the margin kept
   * for its last writes): every budget, and each try's timeout while it is ahead, ends by then, whenever
   * the callback starts. A first try past it is still made (a final event's one chance), except a
   * control poll's.
   */
  readonly deadlineAt?: number | undefined;
}

const PREVIEW_CHARS = 300;
const FINAL_TYPES: ReadonlySet<string> = new Set(['completed', 'failed', 'cancelled']);
/** 409 codes that mean "ask again later": the ledger has not recorded the run, or is still creating it. */
const NOT_YET_CODES: ReadonlySet<string> = new Set(['not_yet_recorded', 'in_progress']);

const base = (callbackUrl: string): string => callbackUrl.replace(/\/+$/, '');

/**
 * Where a run's events go.
 *
 * @example
 * eventsUrl('http://127.0.0.1:4000/', 'd-1:1') // 'http://127.0.0.1:4000/runs/d-1%3A1/events'
 */
export function eventsUrl(callbackUrl: string, runId: string): string {
  return `${base(callbackUrl)}${routePath(ROUTES.postRunEvent, { runId })}`;
}

/**
 * Where one evidence file goes. Each ref segment is encoded on its own, so `/` stays a separator and a
 * literal `%` stays a literal `%` once the ledger decodes the path.
 *
 * @example
 * evidenceUrl('http://h', 'd-1', 'out/my report.md', 'd-1:1')
 * // 'http://h/dispatches/d-1/evidence/out/my%20report.md?runId=d-1%3A1'
 */
export function evidenceUrl(callbackUrl: string, dispatchId: string, ref: string, runId: string): string {
  return `${base(callbackUrl)}${routePath(ROUTES.putEvidence, { dispatchId, ref })}?runId=${encodeURIComponent(runId)}`;
}

/** A lambda run's control record (CONTRACT §12): cancel, supersede and the approval decision. */
export function controlUrl(callbackUrl: string, runId: string, dispatchId: string): string {
  return `${base(callbackUrl)}${routePath(ROUTES.getRunControl, { runId })}?dispatchId=${encodeURIComponent(dispatchId)}`;
}

/** Where a spilled task is read (CONTRACT §8 v2). */
export function taskUrl(callbackUrl: string, dispatchId: string, runId: string): string {
  return `${base(callbackUrl)}${routePath(ROUTES.getTask, { dispatchId })}?runId=${encodeURIComponent(runId)}`;
}

/** The pause before try `tries + 1`: doubling from `firstPauseMs`, capped at `maxPauseMs`. */
export function backoffMs(policy: Pick<RetryPolicy, 'firstPauseMs' | 'maxPauseMs'>, tries: number): number {
  return Math.min(policy.maxPauseMs, policy.firstPauseMs * 2 ** Math.min(Math.max(tries - 1, 0), 30));
}

export class CallbackClient {
  readonly #log: Log;
  readonly #stop: AbortSignal;
  readonly #signer: Signer | undefined;
  readonly #policy: RetryPolicy;
  readonly #transport: Transport;
  readonly #now: () => number;
  readonly #sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  readonly #deadlineAt: number;

  constructor(options: CallbackClientOptions) {
    this.#log = options.log;
    this.#stop = options.stopSignal;
    // Every callback pausing between tries listens on this one signal while it waits (and only then):
    // a worker with more than 10 in flight is not leaking, so Node's warning at 11 is lifted for it.
    setMaxListeners(0, this.#stop);
    this.#signer = options.signer;
    this.#policy = retryPolicyOf(options.retry);
    this.#transport = options.transport ?? fetchTransport;
    this.#now = options.now ?? Date.now;
    this.#sleep = options.sleep ?? ((ms, signal) => pause(ms, undefined, { signal }));
    this.#deadlineAt = options.deadlineAt ?? Number.POSITIVE_INFINITY;
  }

  /** Posts one run event. A final event is retried for `finalBudgetMs`, any other for `budgetMs`. */
  postEvent(callbackUrl: string, runId: string, event: RunEvent): Promise<CallbackOutcome> {
    return this.#send(
      { callback: 'event', runId, dispatchId: event.dispatchId, seq: event.seq, type: event.type },
      { method: 'POST', url: eventsUrl(callbackUrl, runId), headers: { 'content-type': 'application/json' }, body: JSON.stringify(event) },
      FINAL_TYPES.has(event.type) ? this.#policy.finalBudgetMs : this.#policy.budgetMs,
    );
  }

  /**
   * Uploads one evidence file (the ref already checked by the caller), retried for `finalBudgetMs`: a
   * completion without its files is an orphan, so the proof is kept going as long as the claim it proves.
   */
  putEvidence(callbackUrl: string, dispatchId: string, runId: string, ref: string, bytes: string | Uint8Array, contentType: string): Promise<CallbackOutcome> {
    return this.#send(
      { callback: 'evidence', runId, dispatchId, ref },
      { method: 'PUT', url: evidenceUrl(callbackUrl, dispatchId, ref, runId), headers: { 'content-type': contentType }, body: bytes },
      this.#policy.finalBudgetMs,
    );
  }

  /** Reads a spilled task. */
  getTask(callbackUrl: string, dispatchId: string, runId: string): Promise<CallbackOutcome> {
    return this.#send(
      { callback: 'task', runId, dispatchId },
      { method: 'GET', url: taskUrl(callbackUrl, dispatchId, runId), headers: { accept: 'application/json' } },
      this.#policy.budgetMs,
    );
  }

  /** Reads a lambda run's control record, within `budgetMs` (a poll is worth little once late) and never past the client's deadline. */
  getControl(callbackUrl: string, runId: string, dispatchId: string, budgetMs = this.#policy.budgetMs): Promise<CallbackOutcome> {
    return this.#send(
      { callback: 'control', runId, dispatchId },
      { method: 'GET', url: controlUrl(callbackUrl, runId, dispatchId), headers: { accept: 'application/json' } },
      Math.min(budgetMs, this.#policy.budgetMs),
      // A poll is worth nothing once the invocation is ending: none is made past the deadline.
      { noTryPastDeadline: true },
    );
  }

  async #send(
    context: Record<string, unknown>,
    request: { readonly method: string; readonly url: string; readonly headers: Record<string, string>; readonly body?: string | Uint8Array },
    budgetMs: number,
    options: { readonly noTryPastDeadline?: boolean } = {},
  ): Promise<CallbackOutcome> {
    const started = this.#now();
    // Whichever ends first: this call's budget, or the client's deadline (an invocation's end).
    const endsAt = Math.min(started + budgetMs, this.#deadlineAt);
    let last = 'no try made';
    for (let tries = 1; ; tries += 1) {
      if (this.#stop.aborted) return this.#stopped(context, tries - 1);
      // The first try is made even past the deadline (a final event's one chance, in the margin kept for
      // the last writes; a budget of 0: one try, no retry) — except a control poll's.
      if (tries === 1 && options.noTryPastDeadline && this.#now() >= this.#deadlineAt) {
        this.#log({ level: 'debug', msg: 'callback_skipped', ...context, reason: 'past the deadline' });
        return { kind: 'gave_up', last, tries: 0 };
      }
      const answer = await this.#once(request);
      if (answer.kind === 'answered') {
        const { status, text } = answer;
        if (status >= 200 && status < 300) {
          this.#log({ level: 'debug', msg: 'callback_delivered', ...context, status, tries });
          return { kind: 'delivered', status, text, tries };
        }
        const code = errorCodeOf(text);
        if (!isRetryable(status, code)) {
          this.#log({ level: 'warn', msg: 'callback_refused', ...context, url: request.url, status, code, body: text.slice(0, PREVIEW_CHARS), tries });
          return { kind: 'refused', status, code, text, tries };
        }
        last = `HTTP ${status}${code ? ` ${clipForMessage(code)}` : ''}`;
        this.#log({ level: 'debug', msg: 'callback_retry', ...context, status, code, tries });
      } else {
        if (this.#stop.aborted) return this.#stopped(context, tries);
        last = answer.reason;
        this.#log({ level: 'debug', msg: 'callback_retry', ...context, error: answer.reason, tries });
      }
      const wait = backoffMs(this.#policy, tries);
      if (this.#now() + wait > endsAt) {
        this.#log({ level: 'error', msg: 'callback_gave_up', ...context, url: request.url, last, tries, budgetMs });
        return { kind: 'gave_up', last, tries };
      }
      try {
        await this.#sleep(timerDelayMs(wait), this.#stop);
      } catch {
        return this.#stopped(context, tries);
      }
    }
  }

  /**
   * A try's timeout, worked out as it is sent (after signing): it ends by the deadline while the deadline
   * is ahead, so one slow answer never overruns it; a try made past it has its own timeout.
   */
  #tryTimeoutMs(): number {
    const left = this.#deadlineAt - this.#now();
    return left > 0 ? Math.min(this.#policy.tryTimeoutMs, left) : this.#policy.tryTimeoutMs;
  }

  #stopped(context: Record<string, unknown>, tries: number): CallbackOutcome {
    this.#log({ level: 'warn', msg: 'callback_stopped', ...context, tries });
    return { kind: 'stopped', tries };
  }

  async #once(request: {
    readonly method: string;
    readonly url: string;
    readonly headers: Record<string, string>;
    readonly body?: string | Uint8Array;
  }): Promise<{ readonly kind: 'answered'; readonly status: number; readonly text: string } | { readonly kind: 'failed'; readonly reason: string }> {
    let headers = request.headers;
    if (this.#signer) {
      try {
        // Signed per try: a signature carries its time, and credentials may have been refreshed.
        headers = await this.#signer(request);
      } catch (error) {
        return { kind: 'failed', reason: `could not sign the request: ${describe(error)}` };
      }
    }
    // fetch derives `host` from the URL (the same value a signer signed) and refuses to be told it.
    const { host: _host, ...sent } = headers;
    try {
      const answer = await this.#transport(request.url, {
        method: request.method,
        headers: sent,
        ...(request.body === undefined ? {} : { body: request.body }),
        signal: AbortSignal.any([this.#stop, AbortSignal.timeout(timerDelayMs(this.#tryTimeoutMs()))]),
      });
      return { kind: 'answered', ...answer };
    } catch (error) {
      return { kind: 'failed', reason: describe(error) };
    }
  }
}

/**
 * Whether an answer may change if asked again: a server error, a throttle or timeout, or the ledger
 * saying it has not recorded the run yet.
 */
export function isRetryable(status: number, code: string | undefined): boolean {
  if (status >= 500 || status === 408 || status === 429) return true;
  if (status === 409) return code !== undefined && NOT_YET_CODES.has(code);
  // A 3xx is never followed (credentials only go where they were meant to) and never becomes a 2xx.
  return false;
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  // fetch wraps the interesting part (ECONNREFUSED, a timeout) in `cause`.
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return `${error.name}: ${error.message}${cause}`;
}
