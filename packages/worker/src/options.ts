import { retryPolicyOf, type RetryPolicy, type Transport } from './callbacks.js';
import type { Clock } from './heartbeat.js';
import type { Log, LogLine } from './model.js';
import type { RunFunction } from './run-api.js';
import type { Signer } from './signer.js';

const WORKER_NAME = /^[A-Za-z0-9._-]{1,64}$/;

/** What a worker is, served over HTTP (`createWorker`) or as a Lambda function (`createLambdaWorker`). */
export interface CommonWorkerOptions {
  /** The worker's name: in its log lines, and the default store's directory. 1..64 of [A-Za-z0-9._-]. */
  readonly name: string;
  /** The work: called once per dispatch attempt with the task and the run's context. */
  readonly run: RunFunction;
  /** Signs every callback, upload and task read (e.g. `sigv4Signer`). @default unsigned */
  readonly signer?: Signer;
  /** The stall window (seconds) heartbeats are coalesced for when a submission names none. @default 600, the ledger's default */
  readonly stallHintSeconds?: number;
  /** Structured log lines. @default warn and error lines as JSON on stderr */
  readonly log?: Log;
  /** How callbacks are retried. @default 5 min per callback, 30 min for a final event or an evidence upload, 100 ms doubling to 5 s */
  readonly retry?: Partial<RetryPolicy>;
  /** How callbacks are sent. @default fetch */
  readonly transport?: Transport;
  /** Time for heartbeat coalescing and record stamps. @default the system clock */
  readonly clock?: Clock;
}

/** Refuses options no worker can run with, naming the one at fault. */
export function checkWorkerOptions(options: Pick<CommonWorkerOptions, 'name' | 'stallHintSeconds' | 'retry'> & { readonly run: unknown }, caller: string): void {
  if (!WORKER_NAME.test(options.name)) throw new RangeError(`worker name must be 1..64 characters of [A-Za-z0-9._-], got ${JSON.stringify(options.name)}`);
  if (typeof options.run !== 'function') throw new TypeError(`${caller} needs a run function`);
  const { stallHintSeconds } = options;
  if (stallHintSeconds !== undefined && !(Number.isFinite(stallHintSeconds) && stallHintSeconds > 0)) {
    throw new RangeError(`stallHintSeconds must be a number of seconds > 0, got ${stallHintSeconds}`);
  }
  // Refused when the worker is made, not at its first callback.
  retryPolicyOf(options.retry);
}

/** The worker's log: stamped and named, and never throwing into the work (logging is best effort). */
export function safeLog(worker: string, log: Log | undefined): Log {
  const sink: Log =
    log ??
    ((line: LogLine) => {
      if (line.level === 'warn' || line.level === 'error') process.stderr.write(`${JSON.stringify(line)}\n`);
    });
  return (line) => {
    try {
      sink({ at: new Date().toISOString(), worker, ...line });
    } catch {
      // Deliberately ignored: logging is best effort.
    }
  };
}
