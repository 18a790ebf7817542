import type { DispatchState } from '../dispatch/state.js';
import { slotTotals } from '../dispatch/slots.js';
import { isTerminal } from '../dispatch/state.js';
import { cancelAnswered, cancelledBeforeSubmission, cancelRequested, slotReleased, type CancelAsk } from '../dispatch/transitions/flow.js';
import { submissionInFlight } from '../dispatch/transitions/lifecycle.js';
import { cancelPending } from '../dispatch/transitions/core.js';
import type { DispatchWorkDeps, LedgerStore, StoredState } from '../ledger/port.js';
import { updateDispatch } from '../ledger/repository.js';
import { notRegistered, parseLambdaRunId } from '../targets/port.js';
import { type CancelOutcome } from '../dispatch/target-answers.js';

/** What a cancel came to (CONTRACT §2 `POST /dispatches/{id}/cancel`). */
export type CancelDispatchOutcome =
  /** Never submitted: cancelled at once, the target never sees it. */
  | { readonly kind: 'cancelled'; readonly state: DispatchState }
  /** Submitted: asked of the target (`asked`: by this call; false when an earlier one already asked). */
  | { readonly kind: 'requested'; readonly state: DispatchState; readonly asked: boolean }
  /** Already over: final execution, blocked, or cancelled. */
  | { readonly kind: 'terminal'; readonly state: DispatchState }
  | { readonly kind: 'conflict' };

/** The dispatch holds a slot of `target` for this run. */
const holds = (state: DispatchState, target: string, runId: string): boolean => state.target === target && state.runId === runId && !!state.slot && state.phase === 'submitted';

/** Nothing more will happen to it: final, blocked, cancelled — or a manual dispatch whose result a person attested. */
const over = (state: DispatchState): boolean => state.phase === 'blocked' || state.phase === 'cancelled' || isTerminal(state.execution.nativeStatus) || !!state.manual?.resultAttestation;

/**
 * A cancel, idempotent: before submission the dispatch is cancelled at once (a slot it held for a retry
 * given back in the same write); after, the request is recorded first and then asked of the target —
 * again from the monitor, with backoff, while the target cannot be reached — and the run is `cancelled`
 * only on the target's word. Asking twice makes one request.
 */
export async function cancelDispatch(deps: DispatchWorkDeps, first: StoredState, ask: CancelAsk): Promise<CancelDispatchOutcome> {
  const updated = await updateDispatch<'cancelled' | 'requested' | 'asked_before' | 'terminal' | 'gone'>(
    deps.store,
    first.state.dispatchId,
    (state) => {
      if (!state) return { answer: 'gone' };
      if (over(state)) return { answer: 'terminal' };
      if (state.phase === 'accepted' && !submissionInFlight(state, deps.now())) return { write: cancelledBeforeSubmission(state, ask, deps.now()), answer: 'cancelled' };
      if (state.cancel) return { answer: 'asked_before' };
      // A submitted run is asked right after this write, here: the monitor holds off for a claim's length.
      return { write: cancelRequested(state, ask, deps.now(), state.phase === 'submitted' ? deps.claimSeconds : 0), answer: 'requested' };
    },
    { first },
  );
  if (updated.kind === 'lost' || !updated.state) return { kind: 'conflict' };
  const { state } = updated;
  switch (updated.answer) {
    case 'gone':
      return { kind: 'conflict' };
    case 'terminal':
      return { kind: 'terminal', state };
    case 'cancelled':
      return { kind: 'cancelled', state };
    case 'asked_before':
      return { kind: 'requested', state, asked: false };
    case 'requested':
      // Still accepted: a submitter is calling the target right now, and its run may exist. It carries
      // the request into what it writes (a run it made is then asked to cancel like any other).
      // Written (the request recorded): the target is asked on the version this write left.
      return state.phase === 'accepted' || updated.kind !== 'written' ? { kind: 'requested', state, asked: false } : { kind: 'requested', state: await askTarget(deps, updated), asked: true };
  }
}

/** Asks the target now; what it answered is recorded. */
async function askTarget(deps: DispatchWorkDeps, requested: StoredState): Promise<DispatchState> {
  const { state } = requested;
  const registration = await deps.store.getTarget(state.target);
  if (!registration || !state.runId) return state;
  const answer = await deps.targetFor(registration).cancel(state.runId);
  return (await recordCancelAnswer(deps, requested, answer)) ?? (await deps.store.getState(state.dispatchId)) ?? state;
}

/**
 * Records what the target answered a cancel asked from `asked`, and returns the state written (or
 * undefined: not recorded). A write that landed since (the run's progress, a tick's reschedule) does
 * not cost the answer — the target would be asked again for what it already did: the answer is
 * written on the state read again, while the same run still waits for this ask's answer. Another
 * asker's answer recorded meanwhile stands.
 */
export async function recordCancelAnswer(deps: DispatchWorkDeps, from: StoredState, answer: CancelOutcome): Promise<DispatchState | undefined> {
  const asked = from.state;
  const updated = await updateDispatch(
    deps.store,
    asked.dispatchId,
    (state) =>
      state?.runId === asked.runId && cancelPending(state) && state.cancel?.asks === asked.cancel?.asks
        ? { write: cancelAnswered(state, answer, deps.retryPolicy, deps.now()), answer: undefined }
        : { answer: undefined },
    { first: from },
  );
  return updated.kind === 'written' ? updated.state : undefined;
}

export type ReleaseSlotOutcome =
  | { readonly kind: 'released'; readonly state: DispatchState }
  /** No dispatch of this target holds a slot for that run. */
  | { readonly kind: 'not_holding' }
  /** The target still knows the run (or could not be asked): its slot stays. */
  | { readonly kind: 'target_knows_run'; readonly status: string }
  | { readonly kind: 'target_unreachable'; readonly reason: string }
  | { readonly kind: 'conflict' };

/**
 * `POST /targets/{t}/slots/release` (CONTRACT §2): frees the slot of a run its target answers 404 for —
 * looked up now, never on the caller's word; recorded on the dispatch with the caller's principal. The
 * run stays `unknown`. `dispatchId`: the dispatch the run belongs to (a lambda run id names it; an http
 * run id needs it given).
 */
export async function releaseSlot(deps: DispatchWorkDeps, target: string, request: { readonly runId: string; readonly dispatchId?: string | undefined; readonly reason: string; readonly by: string }): Promise<ReleaseSlotOutcome> {
  const dispatchId = request.dispatchId ?? parseLambdaRunId(request.runId)?.dispatchId;
  const stored = dispatchId ? await deps.store.getStored(dispatchId) : undefined;
  const state = stored?.state;
  if (!stored || !state || !holds(state, target, request.runId)) return { kind: 'not_holding' };
  const registration = await deps.store.getTarget(target);
  if (!registration) return { kind: 'target_unreachable', reason: notRegistered(target) };
  const lookup = await deps.targetFor(registration).lookup(request.runId);
  if (lookup.kind === 'found') return { kind: 'target_knows_run', status: lookup.run.status };
  if (lookup.kind === 'unavailable') return { kind: 'target_unreachable', reason: lookup.reason };
  // The target was asked about this run: the slot is released while the dispatch still holds it for the same run.
  const updated = await updateDispatch(
    deps.store,
    state.dispatchId,
    (current) => (current && holds(current, target, request.runId) ? { write: slotReleased(current, { by: request.by, reason: request.reason }, deps.now()), answer: undefined } : { answer: undefined }),
    { first: stored },
  );
  return updated.kind === 'written' ? { kind: 'released', state: updated.state } : { kind: 'conflict' };
}

/** One target at capacity, for `GET /attention` (CONTRACT §2 `at_capacity`). */
export interface TargetAtCapacity {
  readonly kind: 'at_capacity';
  readonly target: string;
  readonly limit: number;
  readonly held: number;
  /** Slots held by runs the ledger lost sight of: they may still be running (CONTRACT §11). */
  readonly heldByUnknownRuns: number;
  readonly waiting: number;
  /** When the target became full: the last of its shards to fill (null on shards filled before this was kept). */
  readonly since: string | null;
  readonly reason: string;
}

/** Waiting dispatches counted per target for the attention list, at most. */
export const WAITING_COUNTED = 1000;

/**
 * Limited targets whose every slot is held — or, lowered under what is in flight, draining: more runs
 * held than the limit, none admitted until fewer than the limit are — with how many unknown runs hold.
 */
export async function targetsAtCapacity(store: Pick<LedgerStore, 'limitedTargets' | 'slotShards' | 'countWaiting'>): Promise<TargetAtCapacity[]> {
  const entries: TargetAtCapacity[] = [];
  for (const target of await store.limitedTargets()) {
    const totals = slotTotals(await store.slotShards(target));
    if (totals.limit === 0 || totals.free > 0) continue;
    const waiting = await store.countWaiting(target, WAITING_COUNTED);
    entries.push({
      kind: 'at_capacity',
      target,
      limit: totals.limit,
      held: totals.held,
      heldByUnknownRuns: totals.unknownHeld,
      waiting,
      since: totals.fullSince,
      reason:
        (totals.draining
          ? `${totals.held} run(s) in flight for a lowered limit of ${totals.limit}, ${totals.unknownHeld} of them unknown: ` +
            (totals.held >= totals.limit ? `nothing is submitted until fewer than ${totals.limit} are; ` : 'the next monitor tick admits again; ')
          : `all ${totals.limit} slot(s) held, ${totals.unknownHeld} by runs whose status is unknown; `) +
        `${waiting}${waiting >= WAITING_COUNTED ? '+' : ''} dispatch(es) waiting` +
        (totals.unknownHeld > 0 ? `. A run its target no longer knows: npx ledger slots release --target ${target} --run-id RUN --dispatch-id D --reason R` : ''),
    });
  }
  return entries;
}
