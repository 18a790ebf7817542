import { OperatorReceiptBody } from '../dispatch/receipts.js';
import type { DispatchState } from '../dispatch/state.js';
import type { LedgerStore } from '../ledger/port.js';
import type { Caller } from './caller.js';
import { ApiError } from './http.js';
import { parseJson } from './lifecycle-routes.js';
import { recordOperatorReceipt } from '../usecases/operator-receipt.js';

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
  const outcome = await recordOperatorReceipt(deps, state, parseJson(body, OperatorReceiptBody()), recordedBy(by.caller, by.principalId));
  switch (outcome.kind) {
    case 'written':
      return { status: 201, body: outcome.receipt };
    case 'already':
      return { status: 200, body: outcome.receipt };
    case 'no_such_run':
      throw new ApiError('not_found', `no run ${outcome.runId} for dispatch ${state.dispatchId}`);
    case 'conflict':
      throw new ApiError('conflict', `receipt ${outcome.existing.receiptId} is already recorded with other content; the original stands`, {
        receiptId: outcome.existing.receiptId,
        recordedAt: outcome.existing.recordedAt,
      });
  }
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
