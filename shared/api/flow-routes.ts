import { CancelBody, SlotReleaseBody } from '@dispatch-ledger/protocol/requests';
import '@dispatch-ledger/protocol/english';
import type { DispatchState } from '../dispatch/state.js';
import { TARGET_NAME } from '../dispatch/ids.js';
import type { LedgerFeeds, StoredState } from '../ledger/port.js';
import { cancelDispatch, releaseSlot } from '../usecases/flow.js';
import type { Caller } from './caller.js';
import { ApiError, changedConcurrently, keptChanging } from './http.js';
import { parseJson, type LifecycleDeps } from './lifecycle-routes.js';
import { recordedBy } from './receipt-routes.js';

/** What the cancel answers show of the dispatch. */
const cancelView = (state: DispatchState) => ({
  dispatchId: state.dispatchId,
  phase: state.phase,
  status: state.execution.status,
  cancelRequestedAt: state.cancel?.requestedAt ?? null,
  cancel: state.cancel ? { reason: state.cancel.reason, asks: state.cancel.asks, answer: state.cancel.answer, nextAskAt: state.cancel.nextAskAt } : null,
});

/** `POST /dispatches/{id}/cancel` (CONTRACT §2 v2): 202, idempotent; 409 once the dispatch is over. */
export async function postCancel(deps: LifecycleDeps, stored: StoredState, body: Buffer | undefined, by: { readonly caller: Caller; readonly principalId: string | undefined }) {
  const { reason } = parseJson(body, CancelBody());
  const outcome = await cancelDispatch(deps, stored, { reason, by: recordedBy(by.caller, by.principalId) });
  switch (outcome.kind) {
    case 'terminal':
      throw new ApiError('conflict', 'the dispatch is already over: nothing to cancel', { phase: outcome.state.phase, status: outcome.state.execution.status });
    case 'conflict':
      throw keptChanging();
    case 'cancelled':
      return { status: 202, body: { ...cancelView(outcome.state), cancelled: true } };
    case 'requested':
      return { status: 202, body: { ...cancelView(outcome.state), cancelled: outcome.state.execution.nativeStatus === 'cancelled', askedNow: outcome.asked } };
  }
}

/** Pages of the attention list's `unknown` entries searched for a run, at most (a run its target lost is unknown). */
const UNKNOWN_PAGES = 20;

/** The dispatch whose current run is `runId` of `target`, among the runs the ledger lost sight of. */
async function dispatchOfUnknownRun(feeds: LedgerFeeds, target: string, runId: string): Promise<string | undefined> {
  // A run the ledger lost sight of is `unknown` — or `cancel_pending` when its origin asked a cancel first.
  for (const kind of ['unknown', 'cancel_pending'] as const) {
    let cursor: string | undefined;
    for (let page = 0; page < UNKNOWN_PAGES; page += 1) {
      const found = await feeds.listAttention({ kind, limit: 100, cursor });
      const match = found.items.find((state) => state.target === target && state.runId === runId);
      if (match) return match.dispatchId;
      if (!found.cursor) break;
      cursor = found.cursor;
    }
  }
  return undefined;
}

/** `POST /targets/{target}/slots/release` (CONTRACT §2 v2, operator). */
export async function postSlotRelease(deps: LifecycleDeps & { readonly feeds: LedgerFeeds }, target: string, body: Buffer | undefined, by: { readonly caller: Caller; readonly principalId: string | undefined }) {
  if (!TARGET_NAME.test(target)) throw new ApiError('not_found', `no target ${target}`);
  const request = parseJson(body, SlotReleaseBody());
  const dispatchId = request.dispatchId ?? (await dispatchOfUnknownRun(deps.feeds, target, request.runId));
  const principal = by.caller.kind === 'open' ? 'local:operator' : (by.principalId ?? 'operator');
  const outcome = await releaseSlot(deps, target, { runId: request.runId, dispatchId, reason: request.reason, by: principal });
  switch (outcome.kind) {
    case 'not_holding':
      throw new ApiError('not_found', `no run ${request.runId} of target ${target} holds a slot`);
    case 'target_knows_run':
      throw new ApiError('conflict', `the target still knows run ${request.runId} (${outcome.status}): its slot stays until it is known to be over`, { status: outcome.status });
    case 'target_unreachable':
      throw new ApiError('target_unreachable', `the target could not be asked about the run: ${outcome.reason}`);
    case 'conflict':
      throw changedConcurrently();
    case 'released':
      return {
        status: 200,
        body: { released: true, target, runId: request.runId, dispatchId: outcome.state.dispatchId, status: outcome.state.execution.status, releasedBy: outcome.state.slotRelease?.by ?? principal },
      };
  }
}
