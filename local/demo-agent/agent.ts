import { randomUUID } from 'node:crypto';
import { setTimeout as pause } from 'node:timers/promises';
import { z } from 'zod';
import { TARGET_NAME } from '@dispatch-ledger/protocol';
import { CallbackClient, type CallbackClientOptions } from './callbacks.js';
import { largeResultBody } from './large-result.js';
import {
  ApprovalDecisionSchema,
  SubmissionSchema,
  canTransition,
  describeIssues,
  isTerminal,
  planFor,
  type ApprovalDecision,
  type AttemptStats,
  type DemoAgentFaults,
  type DemoAgentStats,
  type FaultsFired,
  type Log,
  type Plan,
  type RunEvent,
  type RunResult,
  type RunStatus,
  type RunView,
} from './model.js';

/**
 * The demo agent's engine: accepts submissions, drives each run through its behaviour (CONTRACT §8)
 * and calls the ledger back. It knows nothing of HTTP; every operation returns an outcome that
 * `server.ts` maps to a status code.
 */

/** Pause between the steps of a run: short, so tests are fast, but real, so steps stay ordered. */
const STEP_MS = 10;
const SUMMARY_CHARS = 200;
/** A W3C traceparent is 55 characters; what a caller sends beyond this is not kept in the stats. */
const TRACEPARENT_CHARS = 256;

export interface RefusedOutcome {
  readonly kind: 'refused';
  readonly httpStatus: 400 | 404 | 409 | 422 | 503;
  readonly code: string;
  readonly message: string;
}

export type SubmitOutcome =
  | { readonly kind: 'created' | 'existing'; readonly run: { readonly runId: string; readonly status: RunStatus } }
  | RefusedOutcome;

/** What `POST /runs` answers, and how long to hold that answer back (a `hang` fault; otherwise 0). */
export interface SubmitAnswer {
  readonly outcome: SubmitOutcome;
  readonly holdAnswerMs: number;
}

export interface DemoAgentEngineOptions {
  /** Tries per callback to the ledger. @default 5 (CallbackClient's) */
  readonly callbackTries?: number;
  /** The name the agent is registered under at its root: a key of `maxOpen` in its stats. @default 'demo-agent' */
  readonly targetName?: string;
  /** More target names, each served under a base path of its own (`/targets/{name}`, CONTRACT V3 §8). @default none */
  readonly moreTargets?: readonly string[];
  /** A fault schedule for reliability tests. @default none: every request is answered normally */
  readonly faults?: DemoAgentFaults;
  /** Sign the callbacks to the ledger with SigV4 as this target (CallbackClient's). @default unsigned */
  readonly signing?: CallbackClientOptions['signing'];
}

export type LookupOutcome = { readonly kind: 'found'; readonly view: RunView } | RefusedOutcome;
export type DecideOutcome = { readonly kind: 'decided'; readonly decision: ApprovalDecision } | RefusedOutcome;
export type CancelOutcome =
  | { readonly kind: 'cancelled'; readonly run: { readonly runId: string; readonly status: RunStatus } }
  | RefusedOutcome;

interface Run {
  readonly runId: string;
  /** The target name it was submitted as (the base path it came in on): whose `open` it counts in. */
  readonly target: string;
  readonly dispatchId: string;
  readonly attempt: number;
  readonly goal: string | undefined;
  readonly plan: Plan;
  readonly expectedEvidence: readonly string[];
  readonly callbackUrl: string;
  /** Aborted when the run ends early (cancel) or the agent stops: its pending steps never run. */
  readonly work: AbortController;
  status: RunStatus;
  result?: RunResult;
  evidence?: readonly string[];
  pendingApproval?: { readonly approvalId: string; readonly requestedAt: string };
  decided?: ApprovalDecision;
  nextSeq: number;
  /** Callbacks of one run go out one at a time, so the ledger sees seq in order. */
  outbox: Promise<unknown>;
}

const DispatchIdOnly = z.object({ dispatchId: z.string().min(1) });
/** Enough of a body to name its attempt: counted, and shown to the fault schedule, even if refused. */
const AttemptNamed = z.object({ dispatchId: z.string().min(1), attempt: z.number().int().min(1) });

export const DEFAULT_TARGET_NAME = 'demo-agent';
/** A target name as the ledger's registry spells it (the protocol's TARGET_NAME): safe as a path segment. */
export { TARGET_NAME };

const NO_FAULTS: DemoAgentFaults = { submit: () => 'none', lookupDown: () => false, hangMs: 0 };

type Counts<T> = { -readonly [K in keyof T]: number };

function refused(httpStatus: RefusedOutcome['httpStatus'], code: string, message: string): RefusedOutcome {
  return { kind: 'refused', httpStatus, code, message };
}

const runNotFound = (runId: string): RefusedOutcome => refused(404, 'run_not_found', `no run ${runId}`);

export class DemoAgentEngine {
  readonly #log: Log;
  readonly #stop = new AbortController();
  readonly #callbacks: CallbackClient;
  readonly #runs = new Map<string, Run>();
  readonly #runsByKey = new Map<string, Run>();
  readonly #submissions = new Map<string, number>();
  readonly #runsCreated = new Map<string, number>();
  readonly #attempts = new Map<string, Counts<AttemptStats>>();
  /** The last `traceparent` header each `{dispatchId}:{attempt}` was submitted with, as received. */
  readonly #traceparents = new Map<string, string>();
  /** Runs not in a terminal status; kept as a counter because census runs hold thousands of runs. */
  /** `POST /runs/{runId}/cancel` requests received per run (a cancel asked twice must reach it once). */
  readonly #cancels = new Map<string, number>();
  #open = 0;
  /** Per target name (CONTRACT V3 §8): runs open now, and the most open at once since start. */
  readonly #openBy = new Map<string, number>();
  readonly #maxOpenBy = new Map<string, number>();
  readonly #targetName: string;
  /** dispatchIds whose first `flaky_submit` submission has already been refused. */
  readonly #flaked = new Set<string>();
  readonly #faults: DemoAgentFaults;
  readonly #fired: Counts<FaultsFired> = { submit_unavailable: 0, submit_hang: 0, lookup_outage: 0 };

  constructor(log: Log, options: DemoAgentEngineOptions = {}) {
    const { targetName = DEFAULT_TARGET_NAME, moreTargets = [], faults = NO_FAULTS } = options;
    if (targetName === '') throw new RangeError('the demo agent needs a non-empty targetName');
    for (const name of moreTargets) {
      if (!TARGET_NAME.test(name)) throw new RangeError(`not a target name: ${JSON.stringify(name.slice(0, 80))}`);
    }
    for (const name of [targetName, ...moreTargets]) {
      this.#openBy.set(name, 0);
      this.#maxOpenBy.set(name, 0);
    }
    if (!Number.isFinite(faults.hangMs) || faults.hangMs < 0) {
      throw new RangeError(`faults.hangMs must be a finite number of milliseconds >= 0, got ${faults.hangMs}`);
    }
    this.#log = log;
    this.#targetName = targetName;
    this.#faults = faults;
    this.#callbacks = new CallbackClient({
      log,
      stopSignal: this.#stop.signal,
      ...(options.callbackTries ? { maxTries: options.callbackTries } : {}),
      ...(options.signing ? { signing: options.signing } : {}),
    });
  }

  /**
   * `POST /runs`. The same Idempotency-Key always answers with the same run. Every request is counted
   * (and its `traceparent` header kept) before anything can refuse it, then the fault schedule has its
   * say, then the submission is checked. `target`: the target name it came in as (its base path), whose
   * `maxOpen` the run counts in; the root's name by default.
   */
  submit(idempotencyKey: string | undefined, body: unknown, traceparent?: string, target: string = this.#targetName): SubmitAnswer {
    const readable = DispatchIdOnly.safeParse(body);
    if (readable.success) increment(this.#submissions, readable.data.dispatchId);
    const named = AttemptNamed.safeParse(body);
    if (!named.success) return { outcome: this.#accept(idempotencyKey, body, target), holdAnswerMs: 0 };

    const { dispatchId, attempt } = named.data;
    this.#attemptCounts(`${dispatchId}:${attempt}`).submissions += 1;
    if (traceparent !== undefined && traceparent !== '') this.#traceparents.set(`${dispatchId}:${attempt}`, traceparent.slice(0, TRACEPARENT_CHARS));
    const fault = this.#faults.submit(dispatchId, attempt);
    if (fault === 'unavailable') {
      this.#fired.submit_unavailable += 1;
      this.#log({ level: 'info', msg: 'fault_fired', fault: 'submit_unavailable', dispatchId, attempt });
      return { outcome: refused(503, 'temporarily_unavailable', 'submission refused by the fault schedule; retry'), holdAnswerMs: 0 };
    }
    const outcome = this.#accept(idempotencyKey, body, target);
    if (fault !== 'hang') return { outcome, holdAnswerMs: 0 };
    this.#fired.submit_hang += 1;
    this.#log({ level: 'info', msg: 'fault_fired', fault: 'submit_hang', dispatchId, attempt, holdMs: this.#faults.hangMs });
    return { outcome, holdAnswerMs: this.#faults.hangMs };
  }

  #accept(idempotencyKey: string | undefined, body: unknown, target: string): SubmitOutcome {
    if (idempotencyKey === undefined || idempotencyKey === '') {
      return refused(400, 'missing_idempotency_key', 'the Idempotency-Key header ({dispatchId}:{attempt}) is required');
    }
    const parsed = SubmissionSchema.safeParse(body);
    if (!parsed.success) return refused(400, 'invalid_submission', describeIssues(parsed.error));
    const submission = parsed.data;
    const expectedKey = `${submission.dispatchId}:${submission.attempt}`;
    if (idempotencyKey !== expectedKey) {
      return refused(400, 'idempotency_key_mismatch', `Idempotency-Key must be ${expectedKey}, got ${idempotencyKey}`);
    }

    const existing = this.#runsByKey.get(idempotencyKey);
    if (existing) return { kind: 'existing', run: { runId: existing.runId, status: existing.status } };

    const planned = planFor(submission.task);
    if (planned.kind === 'invalid') return refused(422, planned.code, planned.message);
    const { plan } = planned;
    if (plan.behavior === 'reject') {
      return refused(422, 'submission_rejected', 'the demo agent rejects this task (behavior: reject)');
    }
    if (plan.behavior === 'flaky_submit' && !this.#flaked.has(submission.dispatchId)) {
      this.#flaked.add(submission.dispatchId);
      return refused(503, 'temporarily_unavailable', 'first submission refused on purpose (behavior: flaky_submit); retry');
    }

    const goal = submission.task['goal'];
    const run: Run = {
      runId: `r-${randomUUID()}`,
      target,
      dispatchId: submission.dispatchId,
      attempt: submission.attempt,
      goal: typeof goal === 'string' ? goal : undefined,
      plan,
      expectedEvidence: submission.expectedEvidence ?? [],
      callbackUrl: submission.callbackUrl,
      work: new AbortController(),
      status: 'queued',
      nextSeq: 1,
      outbox: Promise.resolve(),
    };
    this.#runs.set(run.runId, run);
    this.#runsByKey.set(idempotencyKey, run);
    increment(this.#runsCreated, run.dispatchId);
    this.#attemptCounts(idempotencyKey).runs += 1;
    this.#open += 1;
    const open = (this.#openBy.get(run.target) ?? 0) + 1;
    this.#openBy.set(run.target, open);
    this.#maxOpenBy.set(run.target, Math.max(this.#maxOpenBy.get(run.target) ?? 0, open));
    this.#log({ level: 'info', msg: 'run_created', runId: run.runId, dispatchId: run.dispatchId, behavior: plan.behavior });
    this.#drive(run, () => this.#script(run));
    return { kind: 'created', run: { runId: run.runId, status: run.status } };
  }

  /** `GET /runs/{runId}`. */
  lookup(runId: string): LookupOutcome {
    if (this.#faults.lookupDown(runId)) {
      this.#fired.lookup_outage += 1;
      this.#log({ level: 'info', msg: 'fault_fired', fault: 'lookup_outage', runId });
      return refused(503, 'lookup_unavailable', 'the status endpoint is down (fault schedule: lookup outage)');
    }
    const run = this.#visibleRun(runId);
    if (!run) return runNotFound(runId);
    if (run.plan.behavior === 'lookup_unavailable') {
      return refused(503, 'lookup_unavailable', 'the status endpoint is down on purpose (behavior: lookup_unavailable)');
    }
    return { kind: 'found', view: viewOf(run) };
  }

  /** `POST /runs/{runId}/approval`. Repeating the decision already taken answers it again. */
  decide(runId: string, body: unknown): DecideOutcome {
    const run = this.#visibleRun(runId);
    if (!run) return runNotFound(runId);
    const parsed = ApprovalDecisionSchema.safeParse(body);
    if (!parsed.success) return refused(400, 'invalid_decision', describeIssues(parsed.error));
    const decision = parsed.data;

    if (run.decided?.approvalId === decision.approvalId && run.decided.decision === decision.decision) {
      return { kind: 'decided', decision: run.decided };
    }
    if (run.status !== 'waiting_for_approval' || run.pendingApproval?.approvalId !== decision.approvalId) {
      return refused(409, 'approval_not_pending', `approval ${decision.approvalId} is not pending on run ${runId}`);
    }

    run.pendingApproval = undefined;
    run.decided = decision;
    this.#log({ level: 'info', msg: 'approval_decided', runId, ...decision });
    if (decision.decision === 'cancel') {
      this.#cancel(run);
    } else {
      this.#move(run, 'running');
      this.#drive(run, async () => {
        await this.#heartbeat(run);
        await this.#finishWork(run, { upload: true, report: true });
      });
    }
    return { kind: 'decided', decision };
  }

  /** `POST /runs/{runId}/cancel`. A run that already ended keeps its final status. */
  cancel(runId: string): CancelOutcome {
    const run = this.#visibleRun(runId);
    if (!run) return runNotFound(runId);
    this.#cancels.set(runId, (this.#cancels.get(runId) ?? 0) + 1);
    if (!isTerminal(run.status)) this.#cancel(run);
    return { kind: 'cancelled', run: { runId: run.runId, status: run.status } };
  }

  /** `GET /stats`. */
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

  /** How often each fault of the schedule has fired since start. */
  faultsFired(): FaultsFired {
    return { ...this.#fired };
  }

  /** Stops every run's pending steps and in-flight callbacks; resolves once all have settled. */
  async stop(): Promise<void> {
    this.#stop.abort();
    for (const run of this.#runs.values()) run.work.abort();
    await Promise.all([...this.#runs.values()].map((run) => run.outbox));
  }

  #visibleRun(runId: string): Run | undefined {
    const run = this.#runs.get(runId);
    // A vanished run was accepted, then forgotten: every later question about it gets a 404.
    return run?.plan.behavior === 'vanish' ? undefined : run;
  }

  async #script(run: Run): Promise<void> {
    const { plan } = run;
    switch (plan.behavior) {
      case 'complete':
      case 'flaky_submit':
        await this.#begin(run);
        return this.#finishWork(run, { upload: true, report: true });
      case 'complete_without_evidence':
        await this.#begin(run);
        return this.#finishWork(run, { upload: false, report: true });
      case 'lose_callback':
        await this.#begin(run);
        return this.#finishWork(run, { upload: true, report: false });
      case 'large_result':
        await this.#begin(run);
        return this.#finishWork(run, { upload: true, report: true, resultBytes: plan.resultBytes });
      case 'stall':
        await this.#begin(run);
        if (plan.resumeAfterSeconds === undefined) return;
        await pause(plan.resumeAfterSeconds * 1000, undefined, { signal: run.work.signal });
        return this.#finishWork(run, { upload: true, report: true });
      case 'slow':
        await this.#begin(run);
        // One heartbeat per second of work (the first came with #begin).
        for (let elapsed = 0; elapsed < plan.seconds; elapsed += 1) {
          await pause(Math.min(1, plan.seconds - elapsed) * 1000, undefined, { signal: run.work.signal });
          if (elapsed + 1 < plan.seconds) await this.#heartbeat(run);
        }
        return this.#finishWork(run, { upload: true, report: true });
      case 'lookup_unavailable':
        // Alive once, then silent: the ledger's monitor must find out by lookup, and cannot.
        return this.#begin(run);
      case 'await_approval': {
        await this.#step(run);
        this.#move(run, 'running');
        await this.#step(run);
        const pendingApproval = { approvalId: `a-${randomUUID()}`, requestedAt: new Date().toISOString() };
        if (!this.#move(run, 'waiting_for_approval')) return;
        run.pendingApproval = pendingApproval;
        await this.#emit(run, { type: 'approval_requested', approvalId: pendingApproval.approvalId });
        return;
      }
      case 'fail':
        await this.#begin(run);
        await this.#step(run);
        if (!this.#move(run, 'failed')) return;
        run.result = { summary: summarise(`Failed on purpose (behavior: fail)`, run.goal) };
        await this.#emit(run, { type: 'failed', result: run.result });
        return;
      case 'vanish':
      case 'reject':
        // vanish: accepted, then nothing at all. reject never gets a run.
        return;
    }
  }

  /** queued → running, announced by a heartbeat. */
  async #begin(run: Run): Promise<void> {
    await this.#step(run);
    this.#move(run, 'running');
    await this.#heartbeat(run);
  }

  /**
   * Uploads the expected evidence (unless told not to), then completes, reporting it (unless told not
   * to); with `resultBytes`, the result carries a body of that size, in the event and in the lookup alike.
   */
  async #finishWork(run: Run, how: { readonly upload: boolean; readonly report: boolean; readonly resultBytes?: number }): Promise<void> {
    if (how.upload) {
      for (const ref of run.expectedEvidence) {
        await this.#step(run);
        await this.#enqueue(run, () =>
          this.#callbacks.putEvidence(run.callbackUrl, run.dispatchId, run.runId, ref, evidenceContent(run, ref)),
        );
      }
    }
    await this.#step(run);
    if (!this.#move(run, 'completed')) return;
    run.result =
      how.resultBytes === undefined
        ? { summary: summarise('Completed', run.goal) }
        : { summary: summarise(`Completed with a ${how.resultBytes}-byte result`, run.goal), body: largeResultBody(run.dispatchId, how.resultBytes) };
    run.evidence = [...run.expectedEvidence];
    if (how.report) await this.#emit(run, { type: 'completed', result: run.result, evidence: run.evidence });
  }

  #cancel(run: Run): void {
    run.work.abort();
    run.pendingApproval = undefined;
    if (!this.#move(run, 'cancelled')) return;
    void this.#emit(run, { type: 'cancelled' });
  }

  async #heartbeat(run: Run): Promise<void> {
    await this.#emit(run, { type: 'heartbeat' });
  }

  /** Waits one step; throws if the run was cancelled or the agent stopped meanwhile. */
  async #step(run: Run): Promise<void> {
    await pause(STEP_MS, undefined, { signal: run.work.signal });
  }

  #move(run: Run, to: RunStatus): boolean {
    if (!canTransition(run.status, to)) return false;
    // Terminal statuses have no way out, so each run leaves `open` exactly once.
    if (isTerminal(to)) {
      this.#open -= 1;
      this.#openBy.set(run.target, (this.#openBy.get(run.target) ?? 1) - 1);
    }
    run.status = to;
    return true;
  }

  #attemptCounts(key: string): Counts<AttemptStats> {
    let counts = this.#attempts.get(key);
    if (!counts) {
      counts = { submissions: 0, runs: 0 };
      this.#attempts.set(key, counts);
    }
    return counts;
  }

  #emit(run: Run, fields: Omit<RunEvent, 'dispatchId' | 'seq'>): Promise<boolean> {
    // seq is taken when the event is queued, and the queue is ordered, so the ledger sees 1, 2, 3…
    const event: RunEvent = { dispatchId: run.dispatchId, seq: run.nextSeq++, ...fields };
    return this.#enqueue(run, () => this.#callbacks.postEvent(run.callbackUrl, run.runId, event));
  }

  #enqueue(run: Run, send: () => Promise<boolean>): Promise<boolean> {
    // `send` never rejects (CallbackClient logs and returns false), so the chain never breaks.
    const sent = run.outbox.then(send);
    run.outbox = sent;
    return sent;
  }

  /** Runs a script in the background; a cancelled run's script just ends, a bug is logged, never thrown. */
  #drive(run: Run, script: () => Promise<void>): void {
    script().catch((error: unknown) => {
      if (run.work.signal.aborted) return;
      this.#log({
        level: 'error',
        msg: 'run_script_failed',
        runId: run.runId,
        error: error instanceof Error ? error.message : String(error),
      });
    });
  }
}

function increment(counts: Map<string, number>, key: string): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

function viewOf(run: Run): RunView {
  return {
    runId: run.runId,
    status: run.status,
    ...(run.result && { result: run.result }),
    ...(run.evidence && { evidence: run.evidence }),
    ...(run.pendingApproval && { pendingApproval: run.pendingApproval }),
  };
}

function summarise(outcome: string, goal: string | undefined): string {
  const text = goal === undefined ? `${outcome}.` : `${outcome}: ${goal}`;
  return text.slice(0, SUMMARY_CHARS);
}

function evidenceContent(run: Run, ref: string): string {
  return `# ${ref}\n\nDemo evidence for dispatch ${run.dispatchId}, attempt ${run.attempt}, run ${run.runId}.\n`;
}
