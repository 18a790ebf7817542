import type { DispatchView } from '../../shared/dispatch/view.js';
import { optionWords, shellWord } from '../../shared/dispatch/commands.js';

/**
 * What the page says in words: why each kind of work needs a person, what a monitor verdict means,
 * and the `npx ledger …` commands that would act on a dispatch. Pure (no DOM), so a unit test reads it.
 */

/** The attention kinds in the order a person should look at them, each with what it means. */
export const ATTENTION_ORDER: ReadonlyArray<{ readonly kind: string; readonly title: string; readonly meaning: string }> = [
  { kind: 'unknown', title: 'Unknown: the ledger lost sight of the run', meaning: 'It may still be running. Unknown is not failure: look the run up before redispatching.' },
  { kind: 'orphan_no_delivery', title: 'Orphaned: completed without its evidence', meaning: 'The target said it finished, but an expected file never arrived within the grace window.' },
  { kind: 'approval_wait_expired', title: 'Approval waits expired', meaning: 'An approval has waited longer than its window. Approve or cancel still work.' },
  { kind: 'blocked', title: 'Blocked', meaning: 'The ledger will not submit these; the reason says why. Redispatch once it is fixed.' },
  { kind: 'at_capacity', title: 'Targets at capacity', meaning: 'Every slot of the target is held; dispatches wait for one. Runs of unknown status keep their slots.' },
  { kind: 'result_dropped', title: 'Dropped results', meaning: 'A result its origin never took in. The payload is kept.' },
  { kind: 'cancel_pending', title: 'Cancel pending', meaning: 'A cancel was asked of the target; only its word cancels the run.' },
  { kind: 'redriven', title: 'Redriven outside the ledger', meaning: 'The ledger recorded the run’s end, then its state machine ran it again. The recorded end stands; a forced redispatch runs the work under the ledger.' },
  { kind: 'retrying', title: 'Retrying submission', meaning: 'The target could not take the dispatch yet; the ledger retries on its own schedule.' },
];

/** One banner on a dispatch's page: its attention kind (the overview's list it is on) and what it says. */
export interface Banner {
  readonly kind: string;
  readonly text: string;
}

/**
 * The banners of a dispatch's page: one for every attention kind the dispatch is in (CONTRACT §2's
 * attention list, read off the view), each saying what is true and what a person can do.
 */
export function bannersFor(view: DispatchView): Banner[] {
  const { execution, submission, evidence } = view;
  const banners: Banner[] = [];
  if (execution.status === 'unknown') {
    banners.push({ kind: 'unknown', text: `Unknown: the ledger lost sight of the run (${monitorWords(execution.monitorStatus) ?? 'no word from it'}). It may still be running: look it up before acting.` });
  }
  if (execution.monitorStatus === 'approval_wait_expired' && execution.pendingApproval) {
    banners.push({ kind: 'approval_wait_expired', text: `Approval wait expired: approval ${execution.pendingApproval.approvalId}, pending since ${execution.pendingApproval.requestedAt}, has waited past its window${view.windows ? ` (${view.windows.approvalWaitSeconds} s)` : ''}. It is still pending: approve or cancel it.` });
  }
  if (evidence.outcome === 'orphan_no_delivery') {
    banners.push({ kind: 'orphan_no_delivery', text: `Orphaned: the target said ${execution.nativeStatus ?? 'completed'}, but the ledger never found ${evidence.missing.join(', ')}.` });
  }
  if (view.phase === 'blocked') banners.push({ kind: 'blocked', text: `Blocked: ${view.blockedReason ?? 'see the reason'}. The ledger will not submit it; redispatch once that is fixed.` });
  if (view.phase === 'accepted' && submission.lastError) {
    banners.push({ kind: 'retrying', text: `Retrying submission: ${submission.attempts} call(s) failed (last: ${submission.lastError}); next try ${submission.nextRetryAt ?? 'at the next tick'}.` });
  }
  if (view.result?.state === 'dropped') banners.push({ kind: 'result_dropped', text: `Result dropped (${view.result.droppedReason ?? 'dropped'}) after ${view.result.deliveryAttempts} delivery attempt(s): its origin never took it in. The payload is kept.` });
  // Only while the run is not over, as the attention list has it: a run that ended after the ask is no cancel pending.
  if (execution.cancel && view.phase === 'submitted' && !['completed', 'failed', 'cancelled'].includes(execution.status ?? '')) {
    banners.push({ kind: 'cancel_pending', text: `Cancel pending: asked of the target ${execution.cancel.asks} time(s); only its word cancels the run.` });
  }
  if (execution.redriven && view.phase === 'submitted') {
    banners.push({ kind: 'redriven', text: `Redriven outside the ledger: the recorded end (${execution.nativeStatus ?? '—'}) stands, but the state machine runs this execution again (redrive ${execution.redriven.count}, learned ${execution.redriven.at}). A forced redispatch asks it to stop and runs the work under the ledger.` });
  }
  return banners;
}

/** What the monitor is doing for this dispatch now, in words (never "watching" for a run that is over). */
export function monitorLine(view: DispatchView): string {
  const { execution, windows } = view;
  const verdict = monitorWords(execution.monitorStatus);
  if (view.phase === 'blocked') return 'nothing to watch: the dispatch is blocked';
  if (view.phase === 'cancelled') return 'nothing to watch: cancelled before it was submitted';
  if (view.phase === 'accepted') return `nothing to watch yet: not submitted${view.submission.waitingFor ? ` (waiting for ${view.submission.waitingFor})` : ''}`;
  if (verdict && execution.status === 'unknown') return `looking the run up each tick — ${verdict}`;
  switch (execution.status) {
    case 'queued':
    case 'running':
      return `watching: the run is looked up if it is silent past ${windows?.stallsAt ?? 'its stall window'}`;
    case 'waiting_for_approval':
      return verdict ?? `waiting for the approval until ${windows?.approvalExpiresAt ?? 'its window ends'}`;
    case 'completed':
      if (view.evidence.outcome === 'pending') return `checking the expected evidence until ${windows?.graceEndsAt ?? 'the delivery grace ends'}`;
      return `done: the run completed (evidence ${view.evidence.outcome})`;
    case 'failed':
    case 'cancelled':
      return `done: the run ${execution.status}`;
    default:
      return verdict ?? 'watching';
  }
}

/** A monitor verdict (CONTRACT §2 view, §4) in words. */
export function monitorWords(monitorStatus: string | null | undefined): string | null {
  switch (monitorStatus) {
    case null:
    case undefined:
      return null;
    case 'stalled':
      return 'stalled: no word from the run for longer than its stall window, and the target still said it was running when looked up';
    case 'lookup_unavailable':
      return 'unobservable: the target’s status endpoint could not be reached to look the run up';
    case 'target_not_found':
      return 'unobservable: the target answered 404 — it no longer knows this run';
    case 'approval_wait_expired':
      return 'the approval has waited longer than its window; it is still pending';
    default:
      return monitorStatus;
  }
}

export interface Command {
  /** What running it does, in words. */
  readonly does: string;
  readonly line: string;
}

/**
 * A CLI line acting on `dispatchId` for `origin` on the ledger `connection` names: the origin flag locally,
 * the connection flags remotely. An id that begins with '-' goes last, after `--` (it would read as an option).
 */
function commandLine(dispatchId: string, origin: string, connection: readonly string[], remote: boolean): (verb: string, flags: string) => string {
  const tail = [...(remote ? [] : [optionWords('origin', origin)]), ...connection.map(shellWord)];
  const id = shellWord(dispatchId);
  const dashed = dispatchId.startsWith('-');
  return (verb, flags) => ['npx ledger', verb, ...(dashed ? [] : [id]), ...(flags ? [flags] : []), ...tail, ...(dashed ? ['--', id] : [])].join(' ');
}

/** `npx ledger check ID --refresh …`: what to run first about any dispatch — look before acting. */
export const checkCommand = (dispatchId: string, origin: string, connection: readonly string[], remote: boolean): string =>
  commandLine(dispatchId, origin, connection, remote)('check', '--refresh');

/** `npx ledger attention --kind K …`: one attention kind's whole list, on the ledger `connection` names. */
export const attentionCommand = (kind: string, connection: readonly string[]): string => ['npx ledger attention --kind', shellWord(kind), ...connection.map(shellWord)].join(' ');

const FINAL = new Set(['completed', 'failed', 'cancelled']);

/**
 * The commands that would act on this dispatch now, most useful first. `connection` is what reaches
 * the same ledger (`--stack NAME`); locally the CLI speaks for an origin, so `--origin` names the
 * dispatch's own.
 */
export function commandsFor(view: DispatchView, connection: readonly string[], remote: boolean): Command[] {
  const cmd = commandLine(view.dispatchId, view.origin, connection, remote);
  const status = view.execution.status;
  // A manual dispatch (CONTRACT §13) is over once a person attested its result; while it waits for one, what they did is recorded first.
  const person = view.phase === 'accepted' && view.submission.waitingFor === 'person';
  // An attestation stored while its commit lost a race is listed too: only one that ended the wait counts.
  const attested = view.phase === 'accepted' && !person && view.manualAttestations.some((attestation) => attestation.kind === 'manual_result_attested' && attestation.attempt === view.attempt);
  const over = view.phase === 'blocked' || view.phase === 'cancelled' || (status !== null && FINAL.has(status)) || attested;
  const commands: Command[] = person ? [{ does: 'Record what the person did (or --kind manual_blocked, manual_delivery_attested, manual_dispatch_written)', line: cmd('manual', "--kind manual_result_attested --note 'WHAT THEY DID'") }] : [];
  commands.push({ does: 'Look the run up at the target, then show the view', line: checkCommand(view.dispatchId, view.origin, connection, remote) });
  if (view.execution.pendingApproval) {
    const approval = optionWords('approval-id', view.execution.pendingApproval.approvalId);
    commands.push({ does: 'Approve the pending request (or --decision cancel)', line: cmd('approve', `${approval} --decision approve`) });
  }
  if (over && view.execution.redriven && view.phase === 'submitted') {
    // Its state machine runs it again (CONTRACT §17): a plain redispatch would be refused as a second writer.
    commands.push({ does: 'Stop the redriven execution and run the work under the ledger', line: cmd('redispatch', "--reason 'WHY' --force") });
  } else if (over) {
    commands.push({ does: 'Start the next attempt', line: cmd('redispatch', "--reason 'WHY'") });
  } else {
    commands.push({ does: 'Ask the target to cancel the run', line: cmd('cancel', "--reason 'WHY'") });
    // A person's work has no run to supersede.
    if (!person) commands.push({ does: 'Supersede the run only once checked: it may still be running', line: cmd('redispatch', "--reason 'WHY' --force") });
  }
  if (view.runId !== null) {
    const run = optionWords('run', view.runId);
    commands.push({ does: 'Record that you checked the artifact (or --state rejected)', line: cmd('receipt', `${run} --kind artifact_acceptance --state accepted --verified-by YOU`) });
    if (view.ownerDelivery.state !== 'not_required') {
      commands.push({ does: 'Record that the result reached its owner', line: cmd('receipt', `${run} --kind owner_delivery --state confirmed --evidence-ref REF --verified-by YOU`) });
    }
  }
  return commands;
}
