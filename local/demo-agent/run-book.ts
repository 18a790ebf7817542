import type { AttemptStats, DemoAgentStats, Plan } from './model.js';

/**
 * What the demo agent keeps beside the kit's runs (`server.ts`): each run's plan, the idempotency keys
 * that got a run, and the counts `GET /stats` answers (CONTRACT §8 "The demo agent").
 */

/** A W3C traceparent is 55 characters; what a caller sends beyond this is not kept in the stats. */
const TRACEPARENT_CHARS = 256;

/** A count per field of `T`. */
export type Counts<T> = { -readonly [K in keyof T]: number };

export interface BookedRun {
  /** The target name it was submitted as (the base path it came in on): whose `open` it counts in. */
  readonly target: string;
  /** Undefined for a spilled task (`taskRef`): its run reads the task, and plans it, itself. */
  readonly plan: Plan | undefined;
  readonly expectedEvidence: readonly string[];
  open: boolean;
}

/** The demo agent's own view of its runs, beside the kit's: each run's plan, and the counts of `GET /stats`. */
export class RunBook {
  readonly #runs = new Map<string, BookedRun>();
  /** Idempotency keys that got a run: a repeat goes to the kit (the same run), never refused again. */
  readonly #keys = new Set<string>();
  readonly #submissions = new Map<string, number>();
  readonly #runsCreated = new Map<string, number>();
  readonly #attempts = new Map<string, Counts<AttemptStats>>();
  /** The last `traceparent` header each `{dispatchId}:{attempt}` was submitted with, as received. */
  readonly #traceparents = new Map<string, string>();
  /** `POST /runs/{runId}/cancel` requests received per run (a cancel asked twice must reach it once). */
  readonly #cancels = new Map<string, number>();
  /** dispatchIds whose first `flaky_submit` submission has already been refused. */
  readonly #flaked = new Set<string>();
  /** Runs not yet ended; a counter because census runs hold thousands of runs. */
  #open = 0;
  readonly #openBy = new Map<string, number>();
  readonly #maxOpenBy = new Map<string, number>();

  constructor(targets: readonly string[]) {
    for (const name of targets) {
      this.#openBy.set(name, 0);
      this.#maxOpenBy.set(name, 0);
    }
  }

  plan(runId: string): BookedRun | undefined {
    return this.#runs.get(runId);
  }

  hasKey(key: string): boolean {
    return this.#keys.has(key);
  }

  /** Whether this is the first `flaky_submit` submission of the dispatch (the one refused). */
  flakes(dispatchId: string): boolean {
    if (this.#flaked.has(dispatchId)) return false;
    this.#flaked.add(dispatchId);
    return true;
  }

  submitted(dispatchId: string | undefined, key: string | undefined, traceparent: string | undefined): void {
    if (dispatchId !== undefined) increment(this.#submissions, dispatchId);
    if (key === undefined) return;
    this.#attemptCounts(key).submissions += 1;
    if (traceparent !== undefined && traceparent !== '') this.#traceparents.set(key, traceparent.slice(0, TRACEPARENT_CHARS));
  }

  /** The kit created run `runId` for attempt `key`. */
  created(runId: string, dispatchId: string, key: string, run: Omit<BookedRun, 'open'>): void {
    this.#runs.set(runId, { ...run, open: true });
    this.#keys.add(key);
    increment(this.#runsCreated, dispatchId);
    this.#attemptCounts(key).runs += 1;
    this.#open += 1;
    const open = (this.#openBy.get(run.target) ?? 0) + 1;
    this.#openBy.set(run.target, open);
    this.#maxOpenBy.set(run.target, Math.max(this.#maxOpenBy.get(run.target) ?? 0, open));
  }

  cancelAsked(runId: string): void {
    increment(this.#cancels, runId);
  }

  /** The run ended (its code returned or threw, or it was cancelled): it leaves `open`, once. */
  close(runId: string): void {
    const run = this.#runs.get(runId);
    if (!run?.open) return;
    run.open = false;
    this.#open -= 1;
    this.#openBy.set(run.target, (this.#openBy.get(run.target) ?? 1) - 1);
  }

  stats(): DemoAgentStats {
    return {
      submissions: Object.fromEntries(this.#submissions),
      runs: Object.fromEntries(this.#runsCreated),
      attempts: Object.fromEntries([...this.#attempts].map(([key, counts]) => [key, { ...counts }])),
      open: this.#open,
      maxOpen: Object.fromEntries(this.#maxOpenBy),
      // Absent until a submission carries one, so the stats of a run without tracing read as before.
      ...(this.#traceparents.size > 0 && { traceparents: Object.fromEntries(this.#traceparents) }),
      ...(this.#cancels.size > 0 && { cancels: Object.fromEntries(this.#cancels) }),
    };
  }

  #attemptCounts(key: string): Counts<AttemptStats> {
    let counts = this.#attempts.get(key);
    if (!counts) {
      counts = { submissions: 0, runs: 0 };
      this.#attempts.set(key, counts);
    }
    return counts;
  }
}

function increment(counts: Map<string, number>, key: string): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}
