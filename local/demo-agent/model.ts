import { z } from 'zod';

/**
 * The demo agent's own model: which behaviours exist, what a task asks of one, what `GET /stats`
 * answers and what a fault schedule says. Statuses, run ids, events and the protocol itself are the
 * worker kit's (`@dispatch-ledger/worker`) and the protocol's; `behaviors.ts` is the kit's `run`,
 * `server.ts` the layer in front of the kit.
 */

/** The behaviours of CONTRACT §8, chosen by `task.behavior`. */
export const BEHAVIORS = [
  'complete',
  'complete_without_evidence',
  'stall',
  'lose_callback',
  'vanish',
  'lookup_unavailable',
  'await_approval',
  'fail',
  'slow',
  'reject',
  'flaky_submit',
  'large_result',
] as const;
export type Behavior = (typeof BEHAVIORS)[number];

/** A task without `behavior` is an ordinary task: the demo agent simply completes it. */
export const DEFAULT_BEHAVIOR: Behavior = 'complete';

/** Upper bound on any wait a task may ask for, so a typo cannot park a run for days. */
const MAX_TASK_SECONDS = 3600;
const taskSeconds = z.number().min(0).max(MAX_TASK_SECONDS);

/** Behaviour-specific task parameters; unknown task fields are the origin's business and ignored. */
const StallParamsSchema = z.object({ resumeAfterSeconds: taskSeconds.optional() });
const SlowParamsSchema = z.object({ seconds: taskSeconds.default(3) });

/** `large_result`: how big its `result.body` is by default, and the bounds a task's `resultBytes` is clamped to. */
export const DEFAULT_RESULT_BYTES = 20_000;
/** Under the ledger's 256 KB limit on `result.body` (CONTRACT §2), with room for the rest of the event. */
export const MAX_RESULT_BYTES = 250_000;
const LargeResultParamsSchema = z.object({ resultBytes: z.number().default(DEFAULT_RESULT_BYTES) });

/** What a run does, resolved once at submission so a run never re-reads its task. */
export type Plan =
  | { readonly behavior: 'stall'; readonly resumeAfterSeconds?: number }
  | { readonly behavior: 'slow'; readonly seconds: number }
  | { readonly behavior: 'large_result'; readonly resultBytes: number }
  | { readonly behavior: Exclude<Behavior, 'stall' | 'slow' | 'large_result'> };

export type PlanOutcome =
  | { readonly kind: 'plan'; readonly plan: Plan }
  | { readonly kind: 'invalid'; readonly code: 'unknown_behavior' | 'invalid_task'; readonly message: string };

function isBehavior(value: unknown): value is Behavior {
  return typeof value === 'string' && (BEHAVIORS as readonly string[]).includes(value);
}

/**
 * Reads `task.behavior` and its parameters.
 *
 * @example
 * planFor({ behavior: 'stall', resumeAfterSeconds: 1 }) // { kind: 'plan', plan: { behavior: 'stall', resumeAfterSeconds: 1 } }
 * planFor({ behavior: 'dance' })                        // { kind: 'invalid', code: 'unknown_behavior', ... }
 */
export function planFor(task: Readonly<Record<string, unknown>>): PlanOutcome {
  const behavior = task['behavior'] ?? DEFAULT_BEHAVIOR;
  if (!isBehavior(behavior)) {
    return {
      kind: 'invalid',
      code: 'unknown_behavior',
      message: `task.behavior ${JSON.stringify(behavior)} is not one of: ${BEHAVIORS.join(', ')}`,
    };
  }
  if (behavior === 'stall') {
    const params = StallParamsSchema.safeParse(task);
    if (!params.success) return invalidTask(behavior, params.error);
    const { resumeAfterSeconds } = params.data;
    return { kind: 'plan', plan: resumeAfterSeconds === undefined ? { behavior } : { behavior, resumeAfterSeconds } };
  }
  if (behavior === 'slow') {
    const params = SlowParamsSchema.safeParse(task);
    if (!params.success) return invalidTask(behavior, params.error);
    return { kind: 'plan', plan: { behavior, seconds: params.data.seconds } };
  }
  if (behavior === 'large_result') {
    const params = LargeResultParamsSchema.safeParse(task);
    if (!params.success) return invalidTask(behavior, params.error);
    const resultBytes = Math.min(MAX_RESULT_BYTES, Math.max(1, Math.round(params.data.resultBytes)));
    return { kind: 'plan', plan: { behavior, resultBytes } };
  }
  return { kind: 'plan', plan: { behavior } };
}

function invalidTask(behavior: Behavior, error: z.ZodError): PlanOutcome {
  return { kind: 'invalid', code: 'invalid_task', message: `task for ${behavior}: ${describeIssues(error)}` };
}

/** One line per problem, `path: message`, for error bodies (never a stack trace). */
export function describeIssues(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.join('.') || '(body)'}: ${issue.message}`).join('; ');
}

/** A run event as the demo agent's runs send it (through the worker kit, CONTRACT §2): what tests read back. */
export type { RunEvent } from '@dispatch-ledger/worker';

/** Counts for one `{dispatchId}:{attempt}` (CONTRACT §8 v2). */
export interface AttemptStats {
  /** POST /runs requests received for this attempt, refused ones and same-key repeats included. */
  readonly submissions: number;
  /** Distinct runs created for this attempt (at most 1: the same key always answers the same run). */
  readonly runs: number;
}

/** `GET /stats` answer (CONTRACT §8 "The demo agent"). */
export interface DemoAgentStats {
  /** POST /runs requests received, per dispatchId. */
  readonly submissions: Record<string, number>;
  /** Distinct runs created, per dispatchId. */
  readonly runs: Record<string, number>;
  /** The same two counts per `"{dispatchId}:{attempt}"`, for every POST whose body names both. */
  readonly attempts: Record<string, AttemptStats>;
  /** Runs neither final nor cancelled right now. */
  readonly open: number;
  /** Per target name it serves (its root's and each base path's, CONTRACT V3 §8): the most of that target's runs open at once since start. */
  readonly maxOpen: Record<string, number>;
  /** `POST /runs/{runId}/cancel` requests per run id, for the runs that got one; absent until one did. */
  readonly cancels?: Record<string, number>;
  /**
   * The `traceparent` header (CONTRACT §1 v2) of the last POST /runs per `"{dispatchId}:{attempt}"`, for
   * the submissions that carried one; absent until one did.
   */
  readonly traceparents?: Record<string, string>;
}

/** What a fault schedule makes one `POST /runs` do. */
export type SubmitFault = 'none' | 'unavailable' | 'hang';

/**
 * A fault schedule, for reliability tests that need the target itself to misbehave on cue
 * (independently of `task.behavior`, which the ledger under test chooses).
 *
 * @example
 * // Every tenth first attempt is refused once; lookups of one run are down.
 * const faults: DemoAgentFaults = {
 *   submit: (dispatchId, attempt) => (attempt === 1 && dispatchId.endsWith('0') ? 'unavailable' : 'none'),
 *   lookupDown: (runId) => runId === watched,
 *   hangMs: 50,
 * };
 */
export interface DemoAgentFaults {
  /**
   * Asked once per POST /runs whose body names a dispatchId and an attempt, before anything else is
   * checked. 'unavailable' → 503 `temporarily_unavailable` without creating or counting a run (the
   * submission is still counted); 'hang' → the request is processed normally but the answer is held
   * back `hangMs` (so the caller times out and retries with the same Idempotency-Key); 'none' → normal.
   */
  submit(dispatchId: string, attempt: number): SubmitFault;
  /** Asked once per GET /runs/{runId}, known run or not; true → 503 `lookup_unavailable` (an outage). */
  lookupDown(runId: string): boolean;
  /** How long a 'hang' holds the answer back, in milliseconds. */
  readonly hangMs: number;
}

/** How often each fault of a schedule has fired since start. */
export interface FaultsFired {
  readonly submit_unavailable: number;
  readonly submit_hang: number;
  readonly lookup_outage: number;
}

/** One structured log line; the agent never writes to stdout itself. */
export type LogLine = Record<string, unknown>;
export type Log = (line: LogLine) => void;
