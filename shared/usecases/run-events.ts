import type { EvidenceUpload } from '../dispatch/records.js';
import type { DispatchState, ResultBodyRef } from '../dispatch/state.js';
import { isTerminal } from '../dispatch/state.js';
import { applyRunEvent, reconcileLookup, refreshRecorded, refreshThrottled, stallDeadline, type RunEvent } from '../dispatch/transitions/run.js';
import { resultBodyAttached } from '../dispatch/transitions/inbox.js';
import { isLive } from '../dispatch/transitions/core.js';
import type { DispatchWorkDeps, StoredState } from '../ledger/port.js';
import { updateDispatch, writeOnce } from '../ledger/repository.js';
import { settleEvidence } from './evidence-check.js';
import { storeResultBody } from './result-body.js';
import { keepFoundBody, lookUpRun } from './look-up-run.js';
import { runOn, type MayReport, type RunOfDispatch } from './run-of-dispatch.js';
import { keepRuntimeToken } from './runtime-approvals.js';

/**
 * What a run's target tells the ledger about it (CONTRACT §2 `POST /runs/{runId}/events`), and the
 * live look a view asks for (`?refresh=true`): the target's own write path, as use cases. The routes
 * parse the request, call one of these, and map the outcome to an answer (shared/api/lifecycle-routes.ts).
 */

/** A final event's `result.body`, as the route checked it: its JSON text and where it is to be stored. */
export interface ReportedBody {
  readonly json: string;
  readonly ref: (seq: number) => ResultBodyRef;
}

export type ReportOutcome =
  /** `approvalId`: the id the ledger chose for a durable function's approval (its callback id kept apart). */
  | { readonly kind: 'applied'; readonly approvalId?: string }
  /** Nothing to record: an event already applied, stale, or for a run already final. */
  | { readonly kind: 'not_applied' }
  /** A heartbeat or progress inside the coalescing window: nothing written. */
  | { readonly kind: 'coalesced' }
  /** An event of a superseded run: kept for the record, never applied. */
  | { readonly kind: 'late' }
  | { readonly kind: 'invalid'; readonly reason: string }
  | Extract<RunOfDispatch, { readonly kind: 'not_yet' | 'not_found' }>
  /** Every write lost a race: the target retries. */
  | { readonly kind: 'kept_changing' };

/**
 * A target reports on its run. Applied through the state machine (`applyRunEvent`), on the state read
 * again after each lost race. A completion reads its attempt's upload pointers with the state and
 * settles its evidence in the same write when it is all there; a final event's body is stored before
 * the state that refers to it (if it cannot be, this throws: nothing is recorded, the target retries).
 */
export async function reportRunEvent(deps: DispatchWorkDeps, runId: string, reported: ReportedEvent, mayReport: MayReport, resultBody?: ReportedBody): Promise<ReportOutcome> {
  if (reported.callbackId !== undefined && reported.type !== 'approval_requested') return { kind: 'invalid', reason: 'callbackId comes only with approval_requested' };
  if (await coalescedAtAGlance(deps, runId, reported, mayReport)) return { kind: 'coalesced' };
  const asked = await withRuntimeApproval(deps, runId, reported, mayReport);
  if (asked.kind === 'outcome') return asked.outcome;
  const { event } = asked;
  let stored = false;
  // A completion reads its attempt's upload pointers with the state: the check's first look at them.
  let pointers: EvidenceUpload[] | undefined;
  const read =
    event.type === 'completed'
      ? async (dispatchId: string): Promise<StoredState | undefined> => {
          const both = await deps.store.getStateWithUploads(dispatchId);
          pointers = both.uploads;
          return both.stored;
        }
      : undefined;
  const updated = await updateDispatch<ReportOutcome>(
    deps.store,
    event.dispatchId,
    async (read) => {
      const run = await runOn(deps, event.dispatchId, read, runId, mayReport);
      if (run.kind === 'not_yet' || run.kind === 'not_found') return { answer: run };
      const state = run.state;
      if (run.kind === 'superseded') {
        await deps.store.recordLateEvent({ dispatchId: state.dispatchId, runId, seq: event.seq, type: event.type, at: deps.now().toISOString() });
        return { answer: { kind: 'late' } };
      }
      const outcome = applyRunEvent(state, event, deps.now());
      if (outcome.kind === 'invalid') return { answer: { kind: 'invalid', reason: outcome.reason } };
      const applied: ReportOutcome = { kind: 'applied', ...(asked.approvalId ? { approvalId: asked.approvalId } : {}) };
      if (outcome.kind === 'coalesced') return { answer: { kind: 'coalesced' } };
      if (outcome.kind === 'stale') {
        // The final status was recorded first (by a lookup or the submission's answer): the body this
        // report carries still belongs with the result, which is never left without it.
        const late = resultBody && state.runId === runId && state.execution.nativeStatus === event.type && !state.execution.result?.body && isLive(state.result) && (state.lastSeq === null || event.seq > state.lastSeq);
        if (!late || !resultBody) return { answer: { kind: 'not_applied' } };
        const ref = await storeResultBody(deps, state.dispatchId, state.attempt, event.seq, resultBody.json);
        return { write: resultBodyAttached(state, event.seq, ref, deps.now()), answer: applied };
      }
      let next = outcome.next;
      // A completion whose evidence is already delivered is settled in the same write; otherwise the
      // monitor looks again from its next tick until the grace window closes.
      // (A check that fails here is left to the monitor rather than failing the target's report.)
      if (next.execution.status === 'completed' && next.evidence.outcome === 'pending') {
        next = (await settleEvidence(deps, next, deps.now(), undefined, pointers).catch(() => undefined)) ?? next;
      }
      // The body first, then the state that refers to it.
      if (resultBody && !stored) {
        await storeResultBody(deps, state.dispatchId, state.attempt, event.seq, resultBody.json);
        stored = true;
      }
      return { write: next, answer: applied };
    },
    { read },
  );
  return updated.kind === 'lost' ? { kind: 'kept_changing' } : updated.answer;
}

/** A run event as the route parsed it: a durable function's approval may carry its callback id. */
export type ReportedEvent = RunEvent & { readonly dispatchId: string; readonly callbackId?: string | undefined };

type WithApproval =
  | { readonly kind: 'event'; readonly event: RunEvent & { readonly dispatchId: string }; readonly approvalId?: string }
  | { readonly kind: 'outcome'; readonly outcome: ReportOutcome };

/**
 * A durable function's approval (CONTRACT §17) carries the callback id its `waitForCallback` waits on,
 * never an approvalId: the ledger keeps the id apart (before the state that shows the approval, so a
 * decision can always be answered) and chooses the approvalId. Any other target's approval names its
 * own approvalId and carries no callback id.
 */
async function withRuntimeApproval(deps: DispatchWorkDeps, runId: string, reported: ReportedEvent, mayReport: MayReport): Promise<WithApproval> {
  const { callbackId, ...event } = reported;
  const invalid = (reason: string): WithApproval => ({ kind: 'outcome', outcome: { kind: 'invalid', reason } });
  if (event.type !== 'approval_requested') return { kind: 'event', event };
  const read = await deps.store.getStored(event.dispatchId);
  // No state yet: the run is not recorded (answered not yet or not found, before anything is kept).
  if (!read) return { kind: 'event', event };
  // The caller and the run first: what the target's kind asks is nobody's business but the run's own target's.
  const run = await runOn(deps, event.dispatchId, read.state, runId, mayReport);
  if (run.kind === 'not_yet' || run.kind === 'not_found') return { kind: 'outcome', outcome: run };
  const durable = (await deps.store.getTarget(read.state.target))?.kind === 'durable';
  if (!durable) return callbackId === undefined ? { kind: 'event', event } : invalid("callbackId is for a durable target's approval (CONTRACT §17); name the approvalId");
  if (callbackId === undefined || event.approvalId !== undefined) return invalid("a durable target's approval carries its callbackId alone: the ledger chooses the approvalId");
  // An earlier run's request is recorded as late, and a run already over asks nothing: no id is kept for either.
  if (run.kind === 'superseded' || isTerminal(run.state.execution.nativeStatus)) return { kind: 'event', event: { ...event, approvalId: 'superseded' } };
  const kept = await keepRuntimeToken(deps, run.state, runId, callbackId, 'dur');
  if (kept.kind === 'decided') return { kind: 'outcome', outcome: { kind: 'not_applied' } };
  return { kind: 'event', event: { ...event, approvalId: kept.approvalId }, approvalId: kept.approvalId };
}

/**
 * A heartbeat (or progress) inside the coalescing window writes nothing: that is decided on an
 * eventually consistent read (half the read units). It cannot move a verdict: activity only moves
 * forward, so a heartbeat recent to an older view is recent to the current one, and no write is ever
 * conditioned on the view. Anything else (no state yet, a caller not the target's, another run, a write
 * due) is decided again on the strongly consistent read. What a view up to about a second old can miss
 * is a change in that second — a redispatch, a cancel, a final status, a refresh's lookup verdict, an
 * approval decided: this heartbeat is then answered `coalesced` (and, for a superseded run, not recorded
 * as late), and the next one, read strongly once the window has passed or answered from a current view,
 * gets the right answer. A heartbeat that does write reads 1.5 units instead of 1 (once per window).
 */
async function coalescedAtAGlance(deps: DispatchWorkDeps, runId: string, event: RunEvent & { readonly dispatchId: string }, mayReport: MayReport): Promise<boolean> {
  if (event.type !== 'heartbeat' && event.type !== 'progress') return false;
  const seen = await deps.store.peekState(event.dispatchId);
  return seen !== undefined && seen.runId === runId && mayReport(seen.target) && applyRunEvent(seen, event, deps.now()).kind === 'coalesced';
}

/**
 * `GET /dispatches/{id}?refresh=true`: looks the run up live and records what the target says through
 * the monitor's transitions (CONTRACT §2 V3), at most once per 10 s per dispatch — a refresh within them
 * answers the stored view and does not call the target.
 */
export async function refreshed(deps: DispatchWorkDeps, stored: StoredState): Promise<DispatchState> {
  const { state } = stored;
  if (state.phase !== 'submitted' || !state.runId || isTerminal(state.execution.status)) return state;
  const now = deps.now();
  if (refreshThrottled(state, now)) return state;
  const lookup = await lookUpRun(deps, state);
  // A run waiting for an approval the ledger holds is governed by the approval clock alone: a refresh
  // that cannot see it records nothing (and never moves the approval's expiry).
  const waiting = state.execution.status === 'waiting_for_approval' && state.execution.pendingApproval !== null;
  const stallDue = !waiting && now.getTime() >= stallDeadline(state);
  if (lookup.kind === 'unavailable' && !stallDue) {
    // The target could not be asked: nothing was found there, so nothing is recorded. A run still within
    // its activity window is not lost because one lookup failed: the answer says so (CONTRACT §2: the
    // stored view with lookup_unavailable and the unknowns).
    return reconcileLookup(state, lookup, now, false) ?? state;
  }
  // What the target said — a final status, a 404, the run alive — is recorded like the monitor's lookup,
  // once: the lookup was made for the state read. A lost race only means someone else recorded a newer
  // state first: answer with that.
  const written = await writeOnce(deps.store, stored, refreshRecorded(state, lookup, now, stallDue, await keepFoundBody(deps, state, lookup)));
  return written.kind === 'written' ? written.state : ((await deps.store.getState(state.dispatchId)) ?? state);
}
