import type { DispatchState } from '../dispatch/state.js';
import { cancelAnswered, isLive, monitorStep, reconcileLookup, rescheduled, submissionClaimed } from '../dispatch/transitions.js';
import { resultDue } from '../usecases/inbox.js';
import { CorruptItemError, type DispatchWorkDeps } from '../ledger/port.js';
import { admitWaiting, startAttempt } from '../usecases/submit-attempt.js';
import { lookUpRun } from '../usecases/look-up-run.js';
import { clip } from '../text.js';
import { slotTotals } from '../dispatch/slots.js';
import { crashPoint } from '../faults.js';
import { settleEvidence } from './evidence-check.js';

export { evidenceKey } from './evidence-check.js';

export interface MonitorDeps extends DispatchWorkDeps {
  /** Due entries read per shard per tick; the rest wait for the next tick. */
  readonly limitPerShard: number;
  /** How often the monitor runs (its schedule's period): a dispatch it failed on is tried again one period later. @default 60 */
  readonly periodSeconds?: number;
  /** Waiting dispatches one tick admits per limited target, at most. @default 100 */
  readonly admitPerTarget?: number;
}

/** How long a dispatch whose record fails decoding waits before the monitor tries it again. */
export const FAILED_RETRY_SECONDS = 15 * 60;
/** The schedule's period when the deps do not say (the stack's default: one minute). */
export const DEFAULT_PERIOD_SECONDS = 60;

/** What a tick did with one due dispatch: a retry that submitted, failed again, or spent the budget; or nothing. */
export type MonitorAction = 'submitted' | 'retrying' | 'blocked' | 'waiting' | 'observed' | 'rescheduled' | 'skipped' | 'failed';

/** A limited target as the tick left it (CONTRACT §7 metrics `WaitingDispatches`, `SlotsHeldByUnknownRuns`). */
export interface TargetFlow {
  readonly limit: number;
  readonly held: number;
  readonly unknownHeld: number;
  /** Waiting for a slot (counted up to WAITING_COUNT_CAP). */
  readonly waiting: number;
  /** Admitted by this tick. */
  readonly admitted: number;
}

export interface TickReport {
  readonly due: number;
  readonly actions: Readonly<Record<string, { readonly action: MonitorAction; readonly target: string | null; readonly error?: string }>>;
  /** Each target with a concurrency limit, after this tick's admissions. */
  readonly targets: Readonly<Record<string, TargetFlow>>;
}

/** Waiting dispatches counted per target per tick, at most (a gauge, not a census). */
export const WAITING_COUNT_CAP = 10_000;

/**
 * One monitor tick: reads only what is due (the sharded due index), re-reads each dispatch by key
 * (the index is eventually consistent), and acts on it: submission retries, stall watches, approval
 * clocks and evidence checks. Every decision and claim is taken with the clock at the time of its
 * write (a tick may run for a while), never the tick's start.
 */
export async function monitorTick(deps: MonitorDeps): Promise<TickReport> {
  const tickStart = deps.now();
  const due = await deps.store.listDue(tickStart, deps.limitPerShard);
  const actions: Record<string, { action: MonitorAction; target: string | null; error?: string }> = {};
  const queue = [...due];
  const worker = async (): Promise<void> => {
    for (let entry = queue.shift(); entry !== undefined; entry = queue.shift()) {
      const id = entry.dispatchId;
      // One dispatch that throws must not cost the others their tick: it is tried again shortly.
      try {
        actions[id] = await actOn(deps, id);
      } catch (error) {
        actions[id] = { action: 'failed', target: null, error: clip(error instanceof Error ? `${error.name}: ${error.message}` : String(error), 300) };
        // Out of the way, so a record that always throws cannot hold the head of its shard: a record
        // that fails decoding for a while, anything else for about a tick.
        const seconds = error instanceof CorruptItemError ? FAILED_RETRY_SECONDS : (deps.periodSeconds ?? DEFAULT_PERIOD_SECONDS);
        // From the tick's start: one period later is the next tick, however long this one has run.
        await deps.store.deferDue(entry, new Date(tickStart.getTime() + seconds * 1000)).catch(() => undefined);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(8, queue.length) }, worker));
  return { due: due.length, actions, targets: await admitForLimitedTargets(deps) };
}

/**
 * Flow control's half of the tick (CONTRACT §11): every target with a limit admits what its free slots
 * allow (a slot freed by a write that could not admit — a lookup, a crash — is used within one tick),
 * and reports its slots and its queue.
 */
async function admitForLimitedTargets(deps: MonitorDeps): Promise<Record<string, TargetFlow>> {
  const flows: Record<string, TargetFlow> = {};
  // Targets side by side: a slow one must not cost the others their admissions this tick.
  await Promise.all(
    (await deps.store.limitedTargets()).map(async (target) => {
      try {
        const admitted = await admitWaiting(deps, target, deps.admitPerTarget ?? 100);
        const totals = slotTotals(await deps.store.slotShards(target));
        flows[target] = { limit: totals.limit, held: totals.held, unknownHeld: totals.unknownHeld, waiting: await deps.store.countWaiting(target, WAITING_COUNT_CAP), admitted };
      } catch {
        // One target's trouble is tried again next tick.
      }
    }),
  );
  return flows;
}

async function actOn(deps: MonitorDeps, dispatchId: string): Promise<{ action: MonitorAction; target: string | null }> {
  const state = await deps.store.getState(dispatchId);
  if (!state || !state.dueAt || Date.parse(state.dueAt) > deps.now().getTime()) return { action: 'skipped', target: state?.target ?? null };
  if (state.phase === 'accepted') return { action: await retrySubmission(deps, state), target: state.target };
  if (state.phase === 'submitted' && monitorStep(state, deps.now()).kind === 'cancel') return { action: await askCancel(deps, state), target: state.target };
  if (state.phase === 'submitted') return { action: await watchRun(deps, state), target: state.target };
  // A blocked or cancelled dispatch is due only while its result is out: its expiry, on the origin's clock.
  if (isLive(state.result)) return { action: await write(deps, state, await resultDue(deps, state)), target: state.target };
  return { action: 'skipped', target: state.target };
}

async function write(deps: MonitorDeps, state: DispatchState, next: DispatchState): Promise<MonitorAction> {
  if ((await deps.store.commit(state, next)).kind === 'conflict') return 'skipped';
  return next.changes.includes('rescheduled') ? 'rescheduled' : 'observed';
}

/**
 * A submitted run came due: reschedule it, expire its approval, or — when no activity was recorded for
 * the stall timeout — look it up at the target before concluding anything. The write is conditioned on
 * the version read, so an overlapping tick acts once (and so publishes once).
 */
async function watchRun(deps: MonitorDeps, state: DispatchState): Promise<MonitorAction> {
  const step = monitorStep(state, deps.now());
  if (step.kind === 'check') return checkEvidence(deps, state);
  if (step.kind === 'result') return write(deps, state, await resultDue(deps, state));
  let next: DispatchState;
  if (step.kind === 'write') {
    next = step.next;
  } else {
    const lookup = await lookUpRun(deps, state);
    crashPoint('monitor.after_lookup', state.dispatchId);
    const now = deps.now();
    next = reconcileLookup(state, lookup, now, true) ?? rescheduled(state, now, new Date(now.getTime() + state.timeouts.stallAfterSeconds * 1000));
  }
  return write(deps, state, next);
}

/**
 * Claims the dispatch by moving its due time (conditional on its version), then starts its attempt:
 * a retry, a `notBefore` come due, or a claim that lapsed (its slot, if it took one, still held).
 */
async function retrySubmission(deps: MonitorDeps, state: DispatchState): Promise<MonitorAction> {
  const claimed = submissionClaimed(state, deps.now(), deps.claimSeconds);
  if ((await deps.store.commit(state, claimed)).kind !== 'committed') return 'skipped';
  const started = await startAttempt(deps, claimed, await deps.store.getAcceptedMessage(state.dispatchId));
  if (started.kind === 'conflict') return 'skipped';
  const next = started.state;
  return next.phase === 'submitted' ? 'submitted' : next.phase === 'blocked' ? 'blocked' : next.waitingFor ? 'waiting' : 'retrying';
}

/** A cancel its target could not be asked before: asked again (backing off while it stays unreachable). */
async function askCancel(deps: MonitorDeps, state: DispatchState): Promise<MonitorAction> {
  const registration = await deps.store.getTarget(state.target);
  if (!registration || !state.runId) return 'skipped';
  const answer = await deps.targetFor(registration).cancel(state.runId);
  return write(deps, state, cancelAnswered(state, answer, deps.retryPolicy, deps.now()));
}

/**
 * The monitor's side of the post-condition: settle the evidence of a completed run, or look again
 * when its grace window closes.
 */
async function checkEvidence(deps: MonitorDeps, state: DispatchState): Promise<MonitorAction> {
  const now = deps.now();
  const next = (await settleEvidence(deps, state, now, 'own_write')) ?? rescheduled(state, now, new Date(state.evidence.deadline ? Date.parse(state.evidence.deadline) : now.getTime()));
  const written = await deps.store.commit(state, next);
  if (written.kind === 'conflict') return 'skipped';
  return next.changes.includes('rescheduled') ? 'rescheduled' : 'observed';
}
