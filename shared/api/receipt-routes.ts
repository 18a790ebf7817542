import { operatorReceipt, OperatorReceiptBody } from '../dispatch/receipts.js';
import type { DispatchState } from '../dispatch/state.js';
import type { LedgerStore } from '../ledger/port.js';
import type { Caller } from './caller.js';
import { ApiError } from './http.js';
import { parseJson } from './lifecycle-routes.js';
import { whichRun } from '../usecases/run-events.js';

/**
 * POST /dispatches/{dispatchId}/receipts (CONTRACT §5) for a dispatch the caller owns: an operator
 * receipt, recorded once per receiptId by a conditional write carrying the payload hash.
 * 201 new; 200 with the stored receipt on an identical retry; 409 on the same receiptId with any change
 * (the original stands); 404 for a run that is not this dispatch's; 422/400 for a bad body.
 * Only the receipt's own small item is written — never the dispatch's hot state.
 */
export async function postOperatorReceipt(
  deps: { readonly store: LedgerStore; readonly now: () => Date },
  state: DispatchState,
  body: Buffer | undefined,
  by: { readonly caller: Caller; readonly principalId: string | undefined },
) {
  const submitted = parseJson(body, OperatorReceiptBody());
  // A receipt may be about any of the dispatch's runs, however many redispatches ago.
  if (!(await whichRun(deps, state, submitted.runId))) {
    throw new ApiError('not_found', `no run ${submitted.runId} for dispatch ${state.dispatchId}`);
  }
  const receipt = operatorReceipt(state, submitted, deps.now(), recordedBy(by.caller, by.principalId));
  const outcome = await deps.store.putOperatorReceipt(receipt);
  if (outcome.kind === 'written') return { status: 201, body: receipt };
  if (outcome.existing.payloadHash === receipt.payloadHash) return { status: 200, body: outcome.existing };
  throw new ApiError('conflict', `receipt ${receipt.receiptId} is already recorded with other content; the original stands`, {
    receiptId: receipt.receiptId,
    recordedAt: outcome.existing.recordedAt,
  });
}

/**
 * Who records a receipt (CONTRACT §5 v2): in AWS the IAM principal id API Gateway verified (the one
 * the registry mapped to the owning origin); locally `local:<origin>`, the X-Ledger-Origin header.
 */
export function recordedBy(caller: Caller, principalId: string | undefined): string {
  if (caller.kind === 'open') return `local:${caller.origin ?? 'anonymous'}`;
  // ownedState only lets a caller the registry resolved this far, which it did from its principal id.
  if (!principalId) throw new ApiError('not_found', 'no caller identity');
  return principalId;
}
