import type { DispatchState } from '../dispatch/state.js';
import type { DispatchWorkDeps } from '../ledger/port.js';

/**
 * Which of a dispatch's runs a runtime names when it reports (a target's event or upload, a state
 * machine's approval request): its current run, an earlier one, one not recorded yet, or none. Its own
 * module: what only needs to know which run it is reaches nothing else of the run events.
 */

/** May the caller report on (or upload for) a run of this target? The routes decide it from the caller's principal. */
export type MayReport = (target: string) => boolean;

export type RunOfDispatch =
  | { readonly kind: 'current'; readonly state: DispatchState }
  /** One of the dispatch's earlier runs, however many redispatches ago. */
  | { readonly kind: 'superseded'; readonly state: DispatchState }
  /** An attempt of this dispatch is in flight and its run is not recorded yet (also before its state exists): retry shortly. */
  | { readonly kind: 'not_yet' }
  /** The dispatch is unknown (or not this caller's target's), or the run is none of its runs and none is in flight. */
  | { readonly kind: 'not_found' };

/**
 * Whether `runId` is the dispatch's current run, one of its earlier runs (however many redispatches
 * ago: older than the hot state remembers is answered from the attempt records), or none of them.
 */
export async function whichRun(deps: Pick<DispatchWorkDeps, 'store'>, state: DispatchState, runId: string): Promise<'current' | 'superseded' | undefined> {
  if (state.runId === runId) return 'current';
  if (state.supersededRuns.includes(runId)) return 'superseded';
  if (state.attempt > 1 && (await deps.store.listPastAttempts(state.dispatchId)).some((past) => past.runId === runId)) return 'superseded';
  return undefined;
}

/** Which of a dispatch's runs `runId` is, on the state read (`state`: undefined when none is stored). */
export async function runOn(deps: Pick<DispatchWorkDeps, 'store'>, dispatchId: string, state: DispatchState | undefined, runId: string, mayReport: MayReport): Promise<RunOfDispatch> {
  if (!state) {
    // The target may report before the ledger has recorded its submission answer (intake creates the
    // state after the call returns): not yet — in AWS as locally, for the target the message names.
    const message = await deps.store.getAcceptedMessage(dispatchId);
    return message?.content.valid && mayReport(message.content.target) ? { kind: 'not_yet' } : { kind: 'not_found' };
  }
  if (!mayReport(state.target)) return { kind: 'not_found' };
  const kind = await whichRun(deps, state, runId);
  if (kind) return { kind, state };
  return state.phase === 'accepted' ? { kind: 'not_yet' } : { kind: 'not_found' };
}
