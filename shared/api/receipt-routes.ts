import { operatorReceipt, OperatorReceiptBody } from '../dispatch/receipts.js';
import type { DispatchState } from '../dispatch/state.js';
import type { LedgerStore } from '../ledger/port.js';
import { ApiError } from './http.js';
import { parseJson } from './lifecycle-routes.js';

/**
 * POST /dispatches/{dispatchId}/receipts (CONTRACT §5) for a dispatch the caller owns: an operator
 * receipt, recorded once per receiptId by a conditional write carrying the payload hash.
 * 201 new; 200 with the stored receipt on an identical retry; 409 on the same receiptId with any change
 * (the original stands); 404 for a run that is not this dispatch's; 422/400 for a bad body.
 * Only the receipt's own small item is written — never the dispatch's hot state.
 */
export async function postOperatorReceipt(deps: { readonly store: LedgerStore; readonly now: () => Date }, state: DispatchState, body: Buffer | undefined) {
  const submitted = parseJson(body, OperatorReceiptBody);
  if (submitted.runId !== state.runId && !state.supersededRuns.includes(submitted.runId)) {
    throw new ApiError('not_found', `no run ${submitted.runId} for dispatch ${state.dispatchId}`);
  }
  const receipt = operatorReceipt(state, submitted, deps.now());
  const outcome = await deps.store.putOperatorReceipt(receipt);
  if (outcome.kind === 'written') return { status: 201, body: receipt };
  if (outcome.existing.payloadHash === receipt.payloadHash) return { status: 200, body: outcome.existing };
  throw new ApiError('conflict', `receipt ${receipt.receiptId} is already recorded with other content; the original stands`, {
    receiptId: receipt.receiptId,
    recordedAt: outcome.existing.recordedAt,
  });
}
