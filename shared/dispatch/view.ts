import type { AcceptedMessage, EvidenceFile, EvidenceMark, PastAttempt, Refusal, SettledCheck } from './records.js';
import { dispatchCommand } from './commands.js';
import { evidenceWords, type EvidenceFacts } from './evidence-words.js';
import { clip } from '../text.js';
import { stallDeadline } from './transitions/run.js';
import { redrivenReason, whenTargetForgot } from './attention.js';
import { MANUAL_ATTESTATION, StoredManualAttestation, type ManualAttestation } from './manual.js';
import { StoredDispatchReceipt, StoredOperatorReceipt, validationProblems, type OperatorReceipt, type OperatorReceiptKind } from './receipts.js';
import { DEFAULT_PRIORITY, nativeStatusOf, PARENT_WAIT_SECONDS, type DispatchReceipt, type DispatchState, type Execution, type Phase, type Submission } from './state.js';

/** How many refused messages of its origin the view lists (CONTRACT §15 v3: the newest 10). */
export const CONFLICTS_IN_VIEW = 10;

/** The dispatch view of CONTRACT §2, field for field. */
export interface DispatchView {
  readonly dispatchId: string;
  readonly origin: string;
  readonly target: string;
  readonly runId: string | null;
  readonly attempt: number;
  readonly phase: Phase;
  readonly blockedReason: string | null;
  /** CONTRACT §11: `waitingFor` — what an accepted dispatch waits for (capacity, its notBefore, a retry; a person for a manual target, §13; its parent to be recorded, §1 V3). */
  readonly submission: Submission & { readonly waitingFor: 'capacity' | 'not_before' | 'retry' | 'person' | 'parent' | null; readonly priority: number; readonly notBefore: string | null };
  /** CONTRACT §2 v2: `cancelRequestedAt` once the origin asked for a cancel, and what asking the target came to. */
  /** `nativeStatus`: the target's own word where it gave one (CONTRACT V3 §2), else the status it reported. */
  readonly execution: Omit<Execution, 'nativeStatus' | 'nativeDetail'> & { readonly nativeStatus: string | null; readonly cancelRequestedAt: string | null; readonly cancel: DispatchState['cancel'] | null };
  /** CONTRACT §11: the slot of the target's limit this attempt holds, and the last one an operator freed. */
  readonly slot: { readonly held: boolean; readonly since: string | null; readonly released: DispatchState['slotRelease'] | null };
  readonly evidence: {
    readonly expected: readonly string[];
    readonly found: readonly string[];
    readonly missing: readonly string[];
    readonly invalid: readonly string[];
    /** Each file the check found, with the SHA-256 of the bytes it sealed. */
    readonly files: readonly EvidenceFile[];
    readonly outcome: 'pending' | 'handled' | 'orphan_no_delivery' | 'unverified';
  };
  readonly artifactAcceptance: { readonly state: 'unverified' | 'accepted' | 'rejected'; readonly receiptId: string | null; readonly basis: string | null };
  readonly ownerDelivery: {
    readonly state: 'unconfirmed' | 'confirmed' | 'failed' | 'not_required';
    readonly receiptId: string | null;
    /** `origin_ack` (the origin acknowledged the result: runtime proof) or `operator_attestation`. */
    readonly basis: string | null;
    /** With `origin_ack`: when, and who acknowledged. */
    readonly at?: string;
    readonly recordedBy?: string;
  };
  /** Every result its origin acknowledged, oldest first, every attempt's (owner_delivery receipts, basis origin_ack). */
  readonly originAcks: ReadonlyArray<{ readonly receiptId: string; readonly kind: 'owner_delivery'; readonly state: 'confirmed'; readonly basis: 'origin_ack'; readonly resultId: string; readonly attempt: number; readonly at: string; readonly recordedBy: string }>;
  /** The current attempt's result in the origin's inbox (CONTRACT §10); null before it exists or when detached. */
  readonly result: {
    readonly resultId: string;
    readonly state: string;
    readonly resultDelivery: string;
    readonly readyAt: string;
    readonly deliveryAttempts: number;
    readonly leaseExpiresAt: string | null;
    readonly droppedReason: string | null;
  } | null;
  /** Every attempt's dispatch receipts, oldest first (`dispatch_completed` with the hashes it checked). */
  readonly receipts: readonly (DispatchReceipt & { readonly files?: readonly EvidenceFile[] })[];
  /** Every stored operator receipt of the dispatch, oldest first, as stored (one that fails validation too). */
  readonly operatorReceipts: readonly OperatorReceipt[];
  /**
   * CONTRACT §13: a person's attestations about a manual dispatch, oldest first, as stored, each with its
   * `basis` (`manual_attestation`) and the attempt it was recorded for (only the current attempt's count).
   * Never among `receipts`, never runtime proof.
   */
  readonly manualAttestations: readonly ManualAttestation[];
  /** Every run of the dispatch, oldest first: the current one and each ended by a redispatch. */
  readonly runs: readonly RunEntry[];
  /**
   * CONTRACT §15 v3: the newest CONFLICTS_IN_VIEW messages of this dispatch's own origin that named its id
   * and were refused (a second message with other content), newest first. Another origin's message under
   * this id is never listed: it is that origin's to see (`GET /origins/{origin}/rejections`), not this one's.
   */
  readonly conflicts: readonly Refusal[];
  readonly gate: { readonly satisfied: boolean; readonly reasons: readonly string[] };
  readonly unknowns: readonly string[];
  /**
   * The dispatch's clocks (CONTRACT §1 `timeouts`) and, for each that runs now, when it runs out: the
   * stall watch of a queued or running run, the wait of a pending approval, the delivery grace of a
   * completed run whose evidence is being checked. Absent from the answer of an API older than v3.
   */
  readonly windows?: {
    readonly stallAfterSeconds: number;
    readonly approvalWaitSeconds: number;
    readonly deliveryGraceSeconds: number;
    readonly stallsAt: string | null;
    readonly approvalExpiresAt: string | null;
    readonly graceEndsAt: string | null;
  };
  /** Cursors to the older entries of each list when it holds more than the view shows (CONTRACT §2 v2). */
  readonly more?: { readonly receipts: string | null; readonly operatorReceipts: string | null; readonly manualAttestations: string | null; readonly runs: string | null };
}

export interface RunEntry {
  readonly attempt: number;
  readonly runId: string | null;
  readonly status: Execution['status'];
  readonly nativeStatus: string | null;
  readonly completedAt: string | null;
  /** Ended by a forced redispatch while it may have been active: its events are late. */
  readonly superseded: boolean;
  readonly endedAt: string | null;
  readonly reason: string | null;
}

/** The runs of a dispatch, oldest first. */
export function runsOf(state: DispatchState, pastAttempts: readonly PastAttempt[]): RunEntry[] {
  const ended = pastAttempts.filter((past) => past.runId !== null).map((past) => ({
    attempt: past.attempt,
    runId: past.runId,
    status: past.execution.status,
    nativeStatus: nativeStatusOf(past.execution),
    completedAt: past.execution.completedAt,
    superseded: past.superseded,
    endedAt: past.endedAt,
    reason: past.reason,
  }));
  const current = { attempt: state.attempt, runId: state.runId, status: state.execution.status, nativeStatus: nativeStatusOf(state.execution), completedAt: state.execution.completedAt, superseded: false, endedAt: null, reason: null };
  return [...ended, current];
}

/** What the stored receipts say once validated: every one that fails is named, none is skipped. */
interface Audit {
  readonly failures: readonly string[];
  /** The operator receipts that passed, oldest first: the only ones a claim is read from. */
  readonly validOperatorReceipts: readonly OperatorReceipt[];
  /** The manual attestations that passed, of the current attempt of a manual dispatch only. */
  readonly validManualAttestations: readonly ManualAttestation[];
}

const AUDIT_FAILURE = 'audit_failure:';

/** A field of a stored record for a message, whatever shape the record has been corrupted into. */
function named(record: unknown, field: string): string {
  const value = typeof record === 'object' && record !== null ? (record as Record<string, unknown>)[field] : undefined;
  return clip(typeof value === 'string' ? value : `(no ${field})`, 128);
}

function audit(state: DispatchState, operatorReceipts: readonly OperatorReceipt[], earlier: readonly DispatchReceipt[] = [], manualAttestations: readonly ManualAttestation[] = []): Audit {
  const failures: string[] = [];
  // Every attempt's dispatch receipts, those kept with what a redispatch ended included.
  for (const [index, receipt] of [...earlier, ...state.receipts].entries()) {
    const result = StoredDispatchReceipt.safeParse(receipt);
    if (!result.success) {
      failures.push(`${AUDIT_FAILURE} dispatch receipt #${index + 1} (${named(receipt, 'event')}) failed validation: ${clip(validationProblems(result.error), 300)}`);
    }
  }
  const validOperatorReceipts = validOf(state, operatorReceipts, StoredOperatorReceipt(), 'operator receipt', 'receiptId', failures);
  // Only a manual dispatch's own attempt counts: a person's word never stands in for another kind's receipts.
  const validManualAttestations = validOf(state, manualAttestations, StoredManualAttestation(), 'manual attestation', 'attestationId', failures).filter((attestation) => state.manual && attestation.attempt === state.attempt);
  return { failures, validOperatorReceipts, validManualAttestations };
}

/**
 * The records people wrote (operator receipts, manual attestations) that pass their stored schema and
 * belong to this dispatch; each other one is named among `failures`, never skipped.
 */
function validOf<T extends { readonly dispatchId: string; readonly origin: string }>(
  state: DispatchState,
  records: readonly T[],
  schema: { safeParse(value: unknown): { success: true } | { success: false; error: Parameters<typeof validationProblems>[0] } },
  label: string,
  idField: string,
  failures: string[],
): T[] {
  return records.filter((record) => {
    const result = schema.safeParse(record);
    const problems = result.success ? [] : [validationProblems(result.error)];
    // One of another dispatch or origin in this one's partition is as wrong as a malformed one.
    if (result.success && (record.dispatchId !== state.dispatchId || record.origin !== state.origin)) problems.push('it belongs to another dispatch or origin');
    if (problems.length > 0) failures.push(`${AUDIT_FAILURE} ${label} ${named(record, idField)} failed validation: ${clip(problems.join('; '), 300)}`);
    return problems.length === 0;
  });
}

/**
 * The gate (CONTRACT §5): satisfied only when every stored receipt validates, the latest dispatch
 * receipt is dispatch_completed (a later dispatch_blocked overrides it), an earlier dispatch_submitted
 * of the same attempt carries concrete proof, and no evidence is marked invalid.
 *
 * A manual dispatch (CONTRACT §13) was never submitted, so no runtime receipt can satisfy it: the
 * `manual_result_attested` that ended its wait for a person does (valid, of its attempt) while the
 * dispatch is neither cancelled nor blocked, and the satisfied gate's reason says it rests on a person's word.
 */
function gate(state: DispatchState, invalid: readonly string[], findings: Audit, evidence: Omit<EvidenceFacts, 'status'>): DispatchView['gate'] {
  const reasons: string[] = [...findings.failures];
  if (state.receipts.length === 0) reasons.push('no dispatch receipt recorded');
  // Latest wins: a dispatch_blocked after a completion overrides it.
  const latest = state.receipts.at(-1);
  const ended = state.manual?.resultAttestation;
  const attested = ended && findings.validManualAttestations.find((attestation) => attestation.attestationId === ended.attestationId && attestation.kind === 'manual_result_attested');
  // Only while it is neither cancelled nor blocked (a cancelled one's gate is any cancelled one's).
  const manual = !!state.manual && state.phase === 'accepted';
  if (manual) {
    if (!attested) reasons.push(ended ? `manual_result_attested ${ended.attestationId} is not valid` : 'manual target: waiting for a person, no manual_result_attested');
  } else {
    switch (latest?.event) {
      case 'dispatch_blocked':
        reasons.push(`latest receipt is dispatch_blocked (${latest.reason})`);
        break;
      case 'dispatch_written':
        reasons.push('not submitted yet: latest receipt is dispatch_written');
        break;
      case 'dispatch_submitted': {
        const { status } = state.execution;
        reasons.push(`no dispatch_completed receipt: ${evidence.expected.length > 0 || status === 'completed' ? evidenceWords({ status, ...evidence }) : status === 'failed' || status === 'cancelled' ? `the run ${status}` : `the run is ${status ?? 'not started'}`}`);
        break;
      }
      case 'dispatch_completed': {
        const earlier = state.receipts.slice(0, -1);
        const proof = earlier.some((receipt) => receipt?.event === 'dispatch_submitted' && receipt.attempt === latest.attempt && receipt.runId !== '' && receipt.requestId !== '');
        if (!proof) reasons.push('dispatch_completed without an earlier dispatch_submitted proof for the same attempt');
        break;
      }
      default:
        // No receipt (named above), or one no writer produces (named by the audit).
        break;
    }
  }
  if (invalid.length > 0) reasons.push(`evidence marked invalid: ${clip(invalid.join(', '), 300)}`);
  if (reasons.length > 0 || !manual || !attested) return { satisfied: reasons.length === 0, reasons };
  return { satisfied: true, reasons: [`rests on a person's attestation, not runtime proof: manual_result_attested ${attested.attestationId} by ${attested.recordedBy} at ${attested.recordedAt} (${MANUAL_ATTESTATION})`] };
}

/** The clocks of a dispatch and when each running one runs out (the monitor acts on these). */
function windowsOf(state: DispatchState): NonNullable<DispatchView['windows']> {
  const { status, pendingApproval } = state.execution;
  const watched = state.phase === 'submitted' && (status === 'queued' || status === 'running');
  return {
    ...state.timeouts,
    stallsAt: watched ? new Date(stallDeadline(state)).toISOString() : null,
    approvalExpiresAt: status === 'waiting_for_approval' && pendingApproval ? new Date(Date.parse(pendingApproval.requestedAt) + state.timeouts.approvalWaitSeconds * 1000).toISOString() : null,
    graceEndsAt: state.evidence.outcome === 'pending' ? state.evidence.deadline : null,
  };
}

/** Oldest first; records written in the same instant by their id (`idField`), so the order is stable. */
const oldestFirst = (idField: string) => (a: unknown, b: unknown): number =>
  named(a, 'recordedAt').localeCompare(named(b, 'recordedAt')) || named(a, idField).localeCompare(named(b, idField));

/** The latest valid receipt of one kind: an acceptance never speaks for delivery, nor the reverse. */
function latestOf(receipts: readonly OperatorReceipt[], kind: OperatorReceiptKind): OperatorReceipt | undefined {
  return receipts.filter((receipt) => receipt.kind === kind).at(-1);
}

function unknowns(state: DispatchState): string[] {
  const out: string[] = [];
  if (state.phase === 'accepted' && state.manual && !state.manual.resultAttestation) {
    out.push(`waits for a person (manual target "${state.target}"): nothing was submitted; record what they did: \`${dispatchCommand(state, 'manual', '--kind K --note N')}\``);
  }
  if (state.phase === 'accepted' && state.submission.lastError) {
    out.push(
      `submission to target "${state.target}" has failed ${state.submission.attempts} time(s) (last: ${state.submission.lastError}); ` +
        `the ledger retries at ${state.submission.nextRetryAt ?? 'its next tick'} — whether the target has the work is not known until then`,
    );
  }
  if (state.phase === 'accepted' && state.waitingFor === 'capacity') {
    out.push(`waiting for a free slot of target "${state.target}" (its maxConcurrentRuns are all held): not submitted yet; priority ${state.priority ?? DEFAULT_PRIORITY}`);
  }
  if (state.phase === 'accepted' && state.waitingFor === 'not_before') out.push(`not submitted before ${state.notBefore ?? ''} (notBefore)`);
  // CONTRACT §1 V3 (the API bundle is held to a size budget: the words stay short).
  if (state.phase === 'accepted' && state.waitingFor === 'parent') out.push(`waits for its parent ${state.parentDispatchId ?? ''} to be recorded; blocked unknown_parent if it is not recorded by ${new Date(Date.parse(state.createdAt) + PARENT_WAIT_SECONDS * 1000).toISOString()} at the latest`);
  if (state.phase === 'submitted' && state.cancel && state.execution.status !== 'cancelled' && state.execution.status !== 'completed' && state.execution.status !== 'failed') {
    out.push(`a cancel was asked at ${state.cancel.requestedAt}; the run is cancelled only when the target says so (its last answer: ${state.cancel.answer ?? 'none yet'})`);
  }
  const execution = state.execution;
  if (state.phase === 'submitted' && execution.redriven) out.push(redrivenReason(state));
  const check = `check with \`${dispatchCommand(state, 'check', '--refresh')}\``;
  const since = execution.lastActivityAt ?? state.updatedAt;
  switch (execution.monitorStatus) {
    case 'stalled':
      out.push(`target "${state.target}" stopped reporting at ${since}; the run (${state.runId ?? '—'}) may still be working — it last said ${execution.nativeStatus ?? '—'}; ${check}`);
      break;
    case 'lookup_unavailable':
      out.push(`target "${state.target}" could not be asked about run ${state.runId ?? '—'} (its status endpoint failed); last activity ${since}; ${check}`);
      break;
    case 'target_not_found':
      // A refresh would only find the same 404 (it is recorded): the advice is what can change it.
      out.push(`target "${state.target}" answers that it does not know run ${state.runId ?? '—'}; whether the work ran is not known; last activity ${since}; ${whenTargetForgot(state)}`);
      break;
    case 'approval_wait_expired':
      out.push(`approval ${execution.pendingApproval?.approvalId ?? ''} has waited since ${execution.pendingApproval?.requestedAt ?? since} and is still pending: approve or cancel it (POST /dispatches/${state.dispatchId}/approval)`);
      break;
    default:
      break;
  }
  return out;
}

/**
 * The dispatch view of CONTRACT §2. The three claims stay apart: `execution` is what the target did,
 * `artifactAcceptance` and `ownerDelivery` come only from operator receipts of their own kind —
 * completion, evidence and the delivery mode never imply either.
 *
 * @example
 * dispatchView(state, message, check, await store.listOperatorReceipts(state.dispatchId));
 */
export function dispatchView(
  state: DispatchState,
  message: AcceptedMessage | undefined,
  check?: SettledCheck,
  operatorReceipts: readonly OperatorReceipt[] = [],
  marks: readonly EvidenceMark[] = [],
  pastAttempts: readonly PastAttempt[] = [],
  manualAttestations: readonly ManualAttestation[] = [],
  conflicts: readonly Refusal[] = [],
): DispatchView {
  const expected = message?.content.valid ? message.content.expectedEvidence : [];
  // Invalid: what the check found invalid, and any expected ref an owner marked invalid, superseded or rejected since.
  const invalid = [...new Set([...(check?.invalid ?? []), ...marks.filter((mark) => mark.status !== 'valid' && expected.includes(mark.ref)).map((mark) => mark.ref)])];
  const stored = [...operatorReceipts].sort(oldestFirst('receiptId'));
  const attestations = [...manualAttestations].sort(oldestFirst('attestationId'));
  const findings = audit(state, stored, pastAttempts.flatMap((past) => past.receipts), attestations);
  const manualDelivery = findings.validManualAttestations.filter((attestation) => attestation.kind === 'manual_delivery_attested').at(-1);
  const acceptance = latestOf(findings.validOperatorReceipts, 'artifact_acceptance');
  const delivery = latestOf(findings.validOperatorReceipts, 'owner_delivery');
  const unreadable = stored.length - findings.validOperatorReceipts.length;
  return {
    dispatchId: state.dispatchId,
    origin: state.origin,
    target: state.target,
    runId: state.runId,
    attempt: state.attempt,
    phase: state.phase,
    blockedReason: state.blockedReason,
    submission: {
      ...state.submission,
      waitingFor: state.phase !== 'accepted' ? null : (state.waitingFor ?? (state.submission.nextRetryAt ? 'retry' : null)),
      priority: state.priority ?? DEFAULT_PRIORITY,
      notBefore: state.notBefore ?? null,
    },
    execution: { ...withoutDetail(state.execution), nativeStatus: nativeStatusOf(state.execution), cancelRequestedAt: state.cancel?.requestedAt ?? null, cancel: state.cancel ?? null },
    slot: { held: !!state.slot, since: state.slot?.at ?? null, released: state.slotRelease ?? null },
    evidence: {
      expected,
      found: check?.files.map((file) => file.ref) ?? [],
      missing: check?.missing ?? [],
      invalid,
      files: check?.files ?? [],
      // Nothing expected is never "handled"; what is expected is pending until the platform has checked it.
      outcome: expected.length === 0 ? 'unverified' : state.evidence.outcome,
    },
    artifactAcceptance: acceptance
      ? { state: acceptance.state === 'accepted' ? 'accepted' : 'rejected', receiptId: acceptance.receiptId, basis: acceptance.basis }
      : { state: 'unverified', receiptId: null, basis: null },
    // Fire and forget: nobody waits for the result, so no delivery receipt changes what is required.
    // The origin's own acknowledgement of the result is runtime proof and comes first; an operator's
    // attestation is shown as what it is.
    ownerDelivery:
      state.deliveryMode === 'detached'
        ? { state: 'not_required', receiptId: null, basis: null }
        : state.result?.state === 'delivered' && state.result.deliveredAt
          ? { state: 'confirmed', receiptId: `ack:${state.result.id}`, basis: 'origin_ack', at: state.result.deliveredAt, recordedBy: state.result.deliveredBy ?? '' }
          : delivery
            ? { state: delivery.state === 'confirmed' ? 'confirmed' : 'failed', receiptId: delivery.receiptId, basis: delivery.basis }
            : manualDelivery
              ? { state: 'confirmed', receiptId: manualDelivery.attestationId, basis: manualDelivery.basis, at: manualDelivery.recordedAt, recordedBy: manualDelivery.recordedBy }
              : { state: 'unconfirmed', receiptId: null, basis: null },
    originAcks: [...pastAttempts.map((past) => past.result), state.result].flatMap((result) =>
      result?.state === 'delivered' && result.deliveredAt
        ? [{ receiptId: `ack:${result.id}`, kind: 'owner_delivery' as const, state: 'confirmed' as const, basis: 'origin_ack' as const, resultId: result.id, attempt: result.attempt, at: result.deliveredAt, recordedBy: result.deliveredBy ?? '' }]
        : [],
    ),
    result: state.result
      ? {
          resultId: state.result.id,
          state: state.result.state,
          resultDelivery: state.resultDelivery ?? 'after_turn',
          readyAt: state.result.readyAt,
          deliveryAttempts: state.result.deliveryAttempts,
          leaseExpiresAt: state.result.state === 'claimed' ? state.result.leaseUntil : null,
          droppedReason: state.result.droppedReason,
        }
      : null,
    receipts: [
      ...pastAttempts.flatMap((past) => past.receipts),
      ...state.receipts.map((receipt) => (receipt.event === 'dispatch_completed' && check && receipt.attempt === state.attempt ? { ...receipt, files: check.files } : receipt)),
    ],
    operatorReceipts: stored,
    manualAttestations: attestations,
    runs: runsOf(state, pastAttempts),
    conflicts: conflicts.slice(0, CONFLICTS_IN_VIEW),
    gate: gate(state, invalid, findings, {
      expected,
      found: check?.files.map((file) => file.ref) ?? [],
      missing: check?.missing ?? [],
      outcome: expected.length === 0 ? 'unverified' : state.evidence.outcome,
    }),
    windows: windowsOf(state),
    unknowns: [
      ...unknowns(state),
      ...(unreadable > 0
        ? [`${unreadable} stored operator receipt(s) failed validation (see gate.reasons); acceptance and delivery are read from the valid receipts only`]
        : []),
    ],
  };
}

/** The execution without the field the view shows as `nativeStatus`. */
function withoutDetail(execution: Execution): Omit<Execution, 'nativeDetail'> {
  const { nativeDetail: _shownAsNativeStatus, ...rest } = execution;
  return rest;
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

