import { createHash } from 'node:crypto';
import type { DispatchState } from '../dispatch/state.js';
import type { DispatchWorkDeps } from '../ledger/port.js';

/**
 * Approvals a runtime waits on with a token of its own (CONTRACT §17): a state machine's task token, a
 * durable function's callback id. The ledger keeps the token apart from the dispatch (its own
 * partition: never in a view, an event or a log), chooses the approvalId from it — the same token, the
 * same id, so a redelivered request asks nothing twice — and answers the decision with it.
 */

/** Which runtime's token: the approvalId says it (`sfn-…`, `dur-…`). */
export type RuntimeTokenKind = 'sfn' | 'dur';

/** The approval id the ledger gives the approval a runtime's token waits on. */
export const approvalIdOfToken = (token: string, kind: RuntimeTokenKind): string => `${kind}-${createHash('sha256').update(token, 'utf8').digest('base64url').slice(0, 22)}`;

export type KeptToken =
  | { readonly kind: 'kept'; readonly approvalId: string }
  /** Asked and answered already: a redelivery after the decision reopens nothing. */
  | { readonly kind: 'decided'; readonly approvalId: string };

/**
 * Keeps the token of an approval the current run (`state`'s) asks for, before the state that shows the
 * approval refers to it: a decision can only be answered once the token is there.
 */
export async function keepRuntimeToken(deps: Pick<DispatchWorkDeps, 'store' | 'now'>, state: DispatchState, runId: string, token: string, kind: RuntimeTokenKind): Promise<KeptToken> {
  const approvalId = approvalIdOfToken(token, kind);
  const kept = await deps.store.putApprovalToken({ dispatchId: state.dispatchId, attempt: state.attempt, runId, approvalId, taskToken: token, at: deps.now().toISOString() });
  return kept.kind === 'exists' && kept.existing.decidedAt !== undefined ? { kind: 'decided', approvalId } : { kind: 'kept', approvalId };
}
