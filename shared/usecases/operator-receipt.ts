import { operatorReceipt, type OperatorReceipt, type OperatorReceiptBody } from '../dispatch/receipts.js';
import type { DispatchState } from '../dispatch/state.js';
import type { LedgerStore } from '../ledger/port.js';
import { whichRun } from './run-of-dispatch.js';

/** What recording an operator receipt ended as. */
export type ReceiptOutcome =
  | { readonly kind: 'written'; readonly receipt: OperatorReceipt }
  /** The same receiptId with the same payload: an identical retry, answered with the stored receipt. */
  | { readonly kind: 'already'; readonly receipt: OperatorReceipt }
  /** The same receiptId with other content: the original stands. */
  | { readonly kind: 'conflict'; readonly existing: OperatorReceipt }
  | { readonly kind: 'no_such_run'; readonly runId: string };

/**
 * An operator receipt (CONTRACT §5) on a dispatch its caller owns: recorded once per receiptId by a
 * conditional write carrying the payload hash, about any of the dispatch's runs however many
 * redispatches ago. Only the receipt's own small item is written — never the dispatch's hot state.
 */
export async function recordOperatorReceipt(
  deps: { readonly store: LedgerStore; readonly now: () => Date },
  state: DispatchState,
  submitted: OperatorReceiptBody,
  recordedBy: string,
): Promise<ReceiptOutcome> {
  if (!(await whichRun(deps, state, submitted.runId))) return { kind: 'no_such_run', runId: submitted.runId };
  const receipt = operatorReceipt(state, submitted, deps.now(), recordedBy);
  const outcome = await deps.store.putOperatorReceipt(receipt);
  if (outcome.kind === 'written') return { kind: 'written', receipt };
  return outcome.existing.payloadHash === receipt.payloadHash ? { kind: 'already', receipt: outcome.existing } : { kind: 'conflict', existing: outcome.existing };
}
