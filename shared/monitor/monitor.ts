import type { DispatchState } from '../dispatch/state.js';
import { advance, blocked, submitted } from '../dispatch/transitions.js';
import { monitorStep, reconcileLookup } from '../dispatch/lifecycle.js';
import { taskOf } from '../dispatch/task.js';
import type { DispatchWorkDeps } from '../ledger/port.js';
import { settleEvidence } from './evidence-check.js';

export { evidenceKey } from './evidence-check.js';

export interface MonitorDeps extends DispatchWorkDeps {
  /** Due entries read per shard per tick; the rest wait for the next tick. */
  readonly limitPerShard: number;
}

/** What a tick did with one due dispatch: a retry that submitted, failed again, or spent the budget; or nothing. */
export type MonitorAction = 'submitted' | 'retrying' | 'blocked' | 'observed' | 'rescheduled' | 'skipped' | 'failed';

export interface TickReport {
  readonly due: number;
  readonly actions: Readonly<Record<string, { readonly action: MonitorAction; readonly target: string | null; readonly error?: string }>>;
}

/**
 * One monitor tick: reads only what is due (the sharded due index), re-reads each dispatch by key
 * (the index is eventually consistent), and acts on it. Today it drives submission retries; stalls,
 * approvals and evidence checks join it from the same index.
 */
export async function monitorTick(deps: MonitorDeps): Promise<TickReport> {
  const now = deps.now();
  const due = await deps.store.listDue(now, deps.limitPerShard);
  const actions: Record<string, { action: MonitorAction; target: string | null; error?: string }> = {};
  const queue = [...due];
  const worker = async (): Promise<void> => {
    for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
      // One dispatch that throws must not cost the others their tick: it stays due and is tried again.
      try {
        actions[id] = await actOn(deps, id, now);
      } catch (error) {
        actions[id] = { action: 'failed', target: null, error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(8, queue.length) }, worker));
  return { due: due.length, actions };
}

async function actOn(deps: MonitorDeps, dispatchId: string, now: Date): Promise<{ action: MonitorAction; target: string | null }> {
  const state = await deps.store.getState(dispatchId);
  if (!state || !state.dueAt || Date.parse(state.dueAt) > now.getTime()) return { action: 'skipped', target: state?.target ?? null };
  if (state.phase === 'accepted') return { action: await retrySubmission(deps, state, now), target: state.target };
  if (state.phase === 'submitted') return { action: await watchRun(deps, state, now), target: state.target };
  return { action: 'skipped', target: state.target };
}

/**
 * A submitted run came due: reschedule it, expire its approval, or — when no activity was recorded for
 * the stall timeout — look it up at the target before concluding anything. The write is conditioned on
 * the version read, so an overlapping tick acts once (and so publishes once).
 */
async function watchRun(deps: MonitorDeps, state: DispatchState, now: Date): Promise<MonitorAction> {
  const step = monitorStep(state, now);
  if (step.kind === 'none') return 'skipped';
  if (step.kind === 'check') return checkEvidence(deps, state, now);
  let next: DispatchState;
  if (step.kind === 'write') {
    next = step.next;
  } else {
    const registration = await deps.store.getTarget(state.target);
    const lookup = registration && state.runId ? await deps.targetFor(registration).lookup(state.runId) : ({ kind: 'unavailable', reason: `target "${state.target}" is not registered` } as const);
    next = reconcileLookup(state, lookup, deps.now(), true) ?? advance(state, 'rescheduled', now, { dueAt: new Date(now.getTime() + state.timeouts.stallAfterSeconds * 1000).toISOString() });
  }
  const written = await deps.store.replaceState(next, state.version);
  if (written.kind === 'conflict') return 'skipped';
  return next.changes.includes('rescheduled') ? 'rescheduled' : 'observed';
}

/** Claims the dispatch by moving its due time (conditional on its version), then submits once. */
async function retrySubmission(deps: MonitorDeps, state: DispatchState, now: Date): Promise<MonitorAction> {
  const claimed = advance(state, 'claimed', now, { dueAt: new Date(now.getTime() + deps.claimSeconds * 1000).toISOString() });
  if ((await deps.store.replaceState(claimed, state.version)).kind === 'conflict') return 'skipped';

  const [message, registration] = await Promise.all([deps.store.getAcceptedMessage(state.dispatchId), deps.store.getTarget(state.target)]);
  let next: DispatchState;
  if (!registration) {
    next = blocked(claimed, 'unknown_target', `target "${state.target}" is no longer registered`, deps.now());
  } else if (!message || !message.content.valid) {
    next = blocked(claimed, 'invalid_fields', 'the accepted message is missing or invalid', deps.now());
  } else {
    const { expectedEvidence } = message.content;
    const outcome = await taskOf(deps.blobs, message).then(
      (task) =>
        deps.targetFor(registration).submit({
          dispatchId: state.dispatchId,
          attempt: state.attempt,
          origin: state.origin,
          task,
          expectedEvidence,
          callbackUrl: deps.callbackUrl,
        }),
      // A payload that cannot be read counts against the retry budget instead of holding the claim forever.
      (error: unknown) => ({ kind: 'unavailable' as const, reason: `the task payload could not be read: ${error instanceof Error ? error.name : 'error'}` }),
    );
    next = submitted(claimed, outcome, deps.retryPolicy, deps.now());
  }
  if ((await deps.store.replaceState(next, claimed.version)).kind === 'conflict') return 'skipped';
  return next.phase === 'submitted' ? 'submitted' : next.phase === 'blocked' ? 'blocked' : 'retrying';
}

/**
 * The monitor's side of the post-condition: settle the evidence of a completed run, or look again
 * when its grace window closes.
 */
async function checkEvidence(deps: MonitorDeps, state: DispatchState, now: Date): Promise<MonitorAction> {
  const next = await settleEvidence(deps, state, now, advance);
  if (!next) {
    // Not yet decidable: look again when the grace window closes (nothing is spent until then).
    const deadline = state.evidence.deadline ? Date.parse(state.evidence.deadline) : now.getTime();
    const written = await deps.store.replaceState(advance(state, 'rescheduled', now, { dueAt: new Date(deadline).toISOString() }), state.version);
    return written.kind === 'updated' ? 'rescheduled' : 'skipped';
  }
  const written = await deps.store.replaceState(next, state.version);
  return written.kind === 'updated' ? 'observed' : 'skipped';
}
