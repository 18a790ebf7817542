import type { AcceptedMessage, EvidenceCheck } from '../ledger/port.js';
import type { DispatchReceipt, DispatchState, Execution, Phase, Submission } from './state.js';

/** The dispatch view of CONTRACT §2, field for field. */
export interface DispatchView {
  readonly dispatchId: string;
  readonly origin: string;
  readonly target: string;
  readonly runId: string | null;
  readonly attempt: number;
  readonly phase: Phase;
  readonly blockedReason: string | null;
  readonly submission: Submission;
  readonly execution: Execution;
  readonly evidence: {
    readonly expected: readonly string[];
    readonly found: readonly string[];
    readonly missing: readonly string[];
    readonly invalid: readonly string[];
    readonly outcome: 'pending' | 'handled' | 'orphan_no_delivery' | 'unverified';
  };
  readonly artifactAcceptance: { readonly state: 'unverified' | 'accepted' | 'rejected'; readonly receiptId: string | null; readonly basis: string | null };
  readonly ownerDelivery: {
    readonly state: 'unconfirmed' | 'confirmed' | 'failed' | 'not_required';
    readonly receiptId: string | null;
    readonly basis: string | null;
  };
  readonly receipts: readonly DispatchReceipt[];
  readonly operatorReceipts: readonly unknown[];
  readonly gate: { readonly satisfied: boolean; readonly reasons: readonly string[] };
  readonly unknowns: readonly string[];
}

/** Dispatch receipts, latest wins (CONTRACT §5): satisfied only by a completion with earlier proof. */
function gate(state: DispatchState): DispatchView['gate'] {
  const latest = state.receipts.at(-1);
  if (!latest) return { satisfied: false, reasons: ['no dispatch receipt recorded'] };
  switch (latest.event) {
    case 'dispatch_blocked':
      return { satisfied: false, reasons: [`latest receipt is dispatch_blocked (${latest.reason})`] };
    case 'dispatch_written':
      return { satisfied: false, reasons: ['not submitted yet: latest receipt is dispatch_written'] };
    case 'dispatch_submitted':
      return { satisfied: false, reasons: ['no dispatch_completed receipt: the expected evidence has not been checked present'] };
    case 'dispatch_completed': {
      const proof = state.receipts.some((receipt) => receipt.event === 'dispatch_submitted' && receipt.attempt === latest.attempt && receipt.runId !== '' && receipt.requestId !== '');
      return proof ? { satisfied: true, reasons: [] } : { satisfied: false, reasons: ['dispatch_completed without an earlier dispatch_submitted proof for the same attempt'] };
    }
  }
}

function unknowns(state: DispatchState): string[] {
  const out: string[] = [];
  if (state.phase === 'accepted' && state.submission.lastError) {
    out.push(
      `submission to target "${state.target}" has failed ${state.submission.attempts} time(s) (last: ${state.submission.lastError}); ` +
        `the ledger retries at ${state.submission.nextRetryAt ?? 'its next tick'} — whether the target has the work is not known until then`,
    );
  }
  const execution = state.execution;
  const check = `check with \`npx ledger check ${state.dispatchId} --refresh\``;
  const since = execution.lastActivityAt ?? state.updatedAt;
  switch (execution.monitorStatus) {
    case 'stalled':
      out.push(`target "${state.target}" stopped reporting at ${since}; the run (${state.runId ?? '—'}) may still be working — it last said ${execution.nativeStatus ?? '—'}; ${check}`);
      break;
    case 'lookup_unavailable':
      out.push(`target "${state.target}" could not be asked about run ${state.runId ?? '—'} (its status endpoint failed); last activity ${since}; ${check}`);
      break;
    case 'target_not_found':
      out.push(`target "${state.target}" answers that it does not know run ${state.runId ?? '—'}; whether the work ran is not known; last activity ${since}; ${check}`);
      break;
    case 'approval_wait_expired':
      out.push(`approval ${execution.pendingApproval?.approvalId ?? ''} has waited since ${execution.pendingApproval?.requestedAt ?? since} and is still pending: approve or cancel it (POST /dispatches/${state.dispatchId}/approval)`);
      break;
    default:
      break;
  }
  return out;
}

export function dispatchView(state: DispatchState, message: AcceptedMessage | undefined, check?: EvidenceCheck): DispatchView {
  const expected = message?.content.valid ? message.content.expectedEvidence : [];
  return {
    dispatchId: state.dispatchId,
    origin: state.origin,
    target: state.target,
    runId: state.runId,
    attempt: state.attempt,
    phase: state.phase,
    blockedReason: state.blockedReason,
    submission: state.submission,
    execution: state.execution,
    evidence: {
      expected,
      found: check?.found ?? [],
      missing: check?.missing ?? [],
      invalid: check?.invalid ?? [],
      // Nothing expected is never "handled"; what is expected is pending until the platform has checked it.
      outcome: expected.length === 0 ? 'unverified' : state.evidence.outcome,
    },
    artifactAcceptance: { state: 'unverified', receiptId: null, basis: null },
    ownerDelivery: { state: state.deliveryMode === 'detached' ? 'not_required' : 'unconfirmed', receiptId: null, basis: null },
    receipts: state.receipts,
    operatorReceipts: [],
    gate: gate(state),
    unknowns: unknowns(state),
  };
}

/** One line of an origin's history: the view's identity and status, without the per-dispatch reads. */
export function historyEntry(state: DispatchState) {
  return {
    dispatchId: state.dispatchId,
    target: state.target,
    createdAt: state.createdAt,
    phase: state.phase,
    status: state.execution.status,
    runId: state.runId,
    attempt: state.attempt,
    blockedReason: state.blockedReason,
  };
}
