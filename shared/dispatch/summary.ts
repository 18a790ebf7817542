import type { DispatchView } from './view.js';

/**
 * A dispatch view in one line for a person or an agent: the three claims kept apart (execution,
 * evidence and acceptance, owner delivery) and what to do next. `ledger check` prints it first; the MCP
 * server's `check_dispatch` answers it before the view.
 *
 * @example
 * summaryLine(view) // 'execution completed · evidence handled · acceptance unverified · delivery unconfirmed — next: claim the result (claim_results / ledger inbox claim), then ack it'
 */
/** A view as every version of the ledger answers it: `conflicts` came with v3. */
export type SummarisedView = Omit<DispatchView, 'conflicts'> & { readonly conflicts?: DispatchView['conflicts'] };

export function summaryLine(view: SummarisedView): string {
  const claims = [
    `execution ${view.execution.status ?? (view.phase === 'blocked' ? 'none (blocked)' : view.phase === 'cancelled' ? 'none (cancelled)' : 'not started')}`,
    `evidence ${view.evidence.outcome}`,
    `acceptance ${view.artifactAcceptance.state}`,
    `delivery ${view.ownerDelivery.state}`,
  ];
  // `conflicts` is v3: a view from an older ledger has none.
  const refused = view.conflicts?.length ?? 0;
  const conflicts = refused > 0 ? ` (${refused} later message(s) with this id and other content refused: conflict)` : '';
  return `${claims.join(' · ')} — next: ${nextStep(view)}${conflicts}`;
}

/**
 * A target's words in the line, quoted (JSON): a refusal's reason or an approval id is the target's text,
 * and the line is an instruction an agent reads first — unquoted, a target could write its next step.
 */
const quoted = (text: string): string => JSON.stringify(text);

/** What to do next, for each state a dispatch can be in. */
export function nextStep(view: SummarisedView): string {
  const status = view.execution.status;
  if (view.phase === 'blocked') return `nothing runs: it is blocked (${typeof view.blockedReason !== 'string' ? 'see the reason' : `reason: ${quoted(view.blockedReason)}`}); fix that, then redispatch — or cancel it`;
  if (view.phase === 'cancelled') return 'nothing: it was cancelled before it was submitted';
  if (view.phase === 'accepted') {
    const waiting = view.submission.waitingFor;
    return waiting === 'person' ? 'a person does the work (manual target): record what they did with ledger manual' : `wait: not submitted yet${waiting ? ` (waiting for ${waiting})` : ''}`;
  }
  const over = status === 'completed' || status === 'failed' || status === 'cancelled';
  if (view.execution.cancel && !over) return 'wait: a cancel was asked of the target; the run ends on its word';
  if (over && view.execution.redriven && view.phase === 'submitted') return 'its state machine runs it again outside the ledger (redriven): let it run, or redispatch with force and a reason to stop it and run the work under the ledger';
  switch (status) {
    case 'unknown':
      return 'check again with refresh before acting: unknown is not failure, the target may still be working; redispatch only once the target says the run is over or gone';
    case 'waiting_for_approval':
      return `decide the pending approval ${typeof view.execution.pendingApproval?.approvalId === 'string' ? `${quoted(view.execution.pendingApproval.approvalId)} ` : ''}(ledger approve), or leave it to expire`;
    case 'queued':
    case 'running':
    case null:
      return 'wait: the run is under way; check again later';
    case 'failed':
    case 'cancelled':
      return `the run ${status}: find out why before a redispatch (it runs the work again)`;
    case 'completed':
      break;
  }
  if (view.evidence.outcome === 'orphan_no_delivery') return 'the run claimed completion without its evidence (orphan): look at the target, then redispatch';
  if (view.evidence.outcome === 'pending') return 'wait: the platform is checking the expected evidence';
  if (view.result?.state === 'pending' || view.result?.state === 'claimed') return 'claim the result (claim_results / ledger inbox claim), then ack it once it reached its reader';
  if (view.artifactAcceptance.state === 'unverified' && view.evidence.expected.length > 0) return 'check the artifact against the commission, then record artifact_acceptance (record_receipt / ledger receipt)';
  if (view.ownerDelivery.state === 'unconfirmed') return 'confirm delivery when the result reached its owner (ack the result, or record owner_delivery)';
  return 'nothing: the work is done' + (view.artifactAcceptance.state === 'accepted' ? ', accepted' : '') + (view.ownerDelivery.state === 'confirmed' ? ' and delivered' : '');
}
