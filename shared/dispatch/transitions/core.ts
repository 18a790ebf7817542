import { blockedReason, isNextState, isTerminal, type NextState, type BlockedCode, type ChangeKind, type DispatchState, type ResultBodyRef, type ResultDropReason, type ResultRecord } from '../state.js';
import type { TargetRunStatus } from '../target-answers.js';
import { clip, printable } from '../../text.js';
import { attentionKind } from '../attention.js';
import { MAX_REASON_CHARS, RESULT_SUMMARY_PREVIEW_CHARS } from '@dispatch-ledger/protocol';

/**
 * What every transition is made of: `advance` (the next state, what it changed) and the rules it applies to
 * every write — flow control's (`withFlow`), the result's (`withResult`), attention's (`withAttention`) — with the
 * outcomes several capabilities reach (`blocked`, `finished`, `rescheduled`). Only the transition modules beside
 * this one use `advance` (test/unit/layers.test.ts).
 */

/**
 * The state after one change: `patch` applied, and `kind` recorded as what changed. A state read starts
 * the write's list of changes; a state a transition already made in this write (a `NextState`) adds to
 * it, so one write says everything it did ("accepted" and "submitted", "completed" and "handled"). The
 * version is not the state's: the repository conditions the write on the one it read. Only the named
 * transitions (the modules beside this one) use it.
 */
export function advance(state: DispatchState, kind: ChangeKind, now: Date, patch: Partial<DispatchState> = {}): NextState {
  const next: NextState = {
    ...state,
    ...patch,
    updatedAt: now.toISOString(),
    changes: isNextState(state) ? [...state.changes, kind] : [kind],
    dueAtRead: isNextState(state) ? state.dueAtRead : state.dueAt,
  };
  return withAttention(state, withResult(withFlow(state, next), now));
}

/** The run of this attempt is known to be over: blocked, cancelled before submission, or a final status the target gave. */
export const runOver = (state: DispatchState): boolean =>
  state.phase === 'blocked' || state.phase === 'cancelled' || (state.phase === 'submitted' && isTerminal(state.execution.nativeStatus));

/**
 * Flow control's rules, applied to every transition (CONTRACT §11): a slot is given back in the very
 * write that makes its run known to be over (a final status, a block, a cancel before submission) or
 * ends its attempt (a supersede) — never by a caller remembering to; a cancel still to be asked of the
 * target keeps the dispatch due for it; only an accepted dispatch waits.
 */
function withFlow(previous: DispatchState, next: NextState): NextState {
  let out = next;
  if (out.slot && (out.attempt !== previous.attempt || runOver(out))) out = { ...out, slot: undefined };
  if (out.waitingFor && out.phase !== 'accepted') out = { ...out, waitingFor: undefined };
  const ask = (cancelPending(out) ? out.cancel?.nextAskAt : null) ?? cancelLookAt(out);
  // The next ask (or look) replaces a due time that was the ask just answered (else the answer left it due in the past).
  const wasAsk = out.dueAt !== null && out.dueAt === previous.cancel?.nextAskAt && out.cancel?.nextAskAt !== previous.cancel?.nextAskAt;
  if (ask && (out.dueAt === null || wasAsk || Date.parse(ask) < Date.parse(out.dueAt))) out = { ...out, dueAt: ask };
  return out;
}

/** The least wait before a run whose cancel its target answered is looked up again (see {@link cancelLookAt}). */
export const CANCEL_LOOK_SECONDS = 2;

/**
 * The run's cancel was answered (the stop accepted, or the run's status or absence told) and the run has
 * not ended, at `at`, within a stall window of the cancel: its end may come with no event of its own (a
 * runtime whose status changes are not delivered), so the monitor looks it up when it comes due. Not
 * while an ask is still to be made, nor once the monitor lost sight of the run (its own backoff applies).
 */
export function cancelAwaitsEnd(state: DispatchState, at: Date): boolean {
  const cancel = state.cancel;
  if (!cancel || !cancelPending(state) || cancel.nextAskAt || cancel.asks === 0 || state.execution.monitorStatus !== null) return false;
  return at.getTime() - Date.parse(cancel.requestedAt) <= state.timeouts.stallAfterSeconds * 1000;
}

/**
 * When a run whose cancel was answered is looked up next: after as long as the cancel has been pending
 * (at least {@link CANCEL_LOOK_SECONDS}) — a handful of lookups, ever further apart, within one stall
 * window of the cancel, never a verdict; after that window the run is watched like every other.
 */
export function cancelLookAt(state: NextState): string | undefined {
  const now = new Date(state.updatedAt);
  if (!state.cancel || !cancelAwaitsEnd(state, now)) return undefined;
  const pending = now.getTime() - Date.parse(state.cancel.requestedAt);
  const at = new Date(now.getTime() + Math.max(pending, CANCEL_LOOK_SECONDS * 1000));
  return cancelAwaitsEnd(state, at) ? at.toISOString() : undefined;
}

/** The origin asked for a cancel and the run is not known to be over yet (CONTRACT §2 `cancel_pending`). */
export const cancelPending = (state: DispatchState): boolean => state.phase === 'submitted' && !!state.cancel && !isTerminal(state.execution.nativeStatus);

/**
 * A result's id: stable per (dispatchId, attempt) — and per round, for the rare attempt that yields a
 * second result (a blocked dispatch redispatched on the same attempt). `~` never occurs in a dispatchId.
 */
export const resultIdOf = (dispatchId: string, attempt: number, round = 0): string => `r${attempt}${round > 0 ? `.${round}` : ''}~${dispatchId}`;

const RESULT_ID = /^r([1-9]\d{0,8})(?:\.([1-9]\d{0,8}))?~([A-Za-z0-9._:-]{1,128})$/;

/** The dispatch and attempt a result id names, or undefined for an id the ledger never issues. */
export function parseResultId(resultId: string): { readonly dispatchId: string; readonly attempt: number; readonly round: number } | undefined {
  const match = RESULT_ID.exec(resultId);
  if (!match) return undefined;
  return { attempt: Number(match[1]), round: match[2] ? Number(match[2]) : 0, dispatchId: match[3] as string };
}

/** The current attempt has said its last word: a final status known and its evidence decided, or blocked. */
export const attemptSettled = (state: DispatchState): boolean =>
  state.phase === 'blocked' || state.phase === 'cancelled' || (state.phase === 'submitted' && isTerminal(state.execution.status) && state.evidence.outcome !== 'pending');

/** Pending, or claimed and its lease lapsed: a claim may take it. */
export const isLive = (result: ResultRecord | null | undefined): result is ResultRecord => result?.state === 'pending' || result?.state === 'claimed';

export const leaseLapsed = (result: ResultRecord, now: Date): boolean => result.state === 'claimed' && result.leaseUntil !== null && Date.parse(result.leaseUntil) <= now.getTime();

export const isClaimable = (result: ResultRecord | null | undefined, now: Date): result is ResultRecord => result?.state === 'pending' || (result !== null && result !== undefined && leaseLapsed(result, now));

/**
 * The result is made in the write that settles the attempt, whichever transition that is (a final
 * event, a lookup, the evidence check, a block): persistence first, never "sent on enqueue". Its due
 * time is one the index already holds when there is one (no index write; the monitor looks then), else
 * now, so the monitor schedules its expiry on the origin's clock from the next tick.
 */
function withResult(next: NextState, now: Date): NextState {
  // The due time the stored item holds, when it is still ahead: keeping it costs no index write.
  const stored = next.dueAtRead;
  const held = stored !== null && Date.parse(stored) > now.getTime() ? stored : now.toISOString();
  // A result still out is always due (its expiry is watched), whatever else this write changed.
  if (isLive(next.result) && next.dueAt === null) next = { ...next, dueAt: held };
  if (next.deliveryMode !== 'callback' || !attemptSettled(next)) return next;
  const id = resultIdOf(next.dispatchId, next.attempt, next.resultRound ?? 0);
  if (next.result?.id === id) return next;
  const result: ResultRecord = {
    id,
    attempt: next.attempt,
    state: 'pending',
    readyAt: now.toISOString(),
    deliveryAttempts: 0,
    claimToken: null,
    leaseUntil: null,
    deliveredAt: null,
    deliveredBy: null,
    droppedReason: null,
    droppedAt: null,
  };
  return { ...next, result, changes: [...next.changes, 'result_ready'], dueAt: next.dueAt ?? held };
}

export const droppedResult = (result: ResultRecord, reason: ResultDropReason, now: Date): ResultRecord => ({
  ...result,
  state: 'dropped',
  claimToken: result.claimToken,
  leaseUntil: null,
  droppedReason: reason,
  droppedAt: now.toISOString(),
});

/** Keeps when the dispatch began to need a person while the reason stays the same (a stable feed order). */
function withAttention(previous: DispatchState, next: NextState): NextState {
  const kind = attentionKind(next);
  if (!kind) return next.attentionSince ? { ...next, attentionSince: null } : next;
  const since = kind === attentionKind(previous) ? (previous.attentionSince ?? previous.updatedAt) : next.updatedAt;
  return { ...next, attentionSince: since };
}

const MAX_ERROR = 300;

/** A target's error, as stored in `submission.lastError` and shown in the view. */
export const bounded = (text: string): string => clip(printable(text), MAX_ERROR);

/**
 * A reason a person gave (a cancel, a slot release, a redispatch, an evidence mark), as stored and
 * shown: whole up to the bound the API takes it at (MAX_REASON_CHARS), printable.
 */
export const givenReason = (text: string): string => clip(printable(text), MAX_REASON_CHARS);

export const plus = (now: Date, seconds: number): string => new Date(now.getTime() + seconds * 1000).toISOString();

/** Result previews kept in the hot state item (the protocol's bound, docs/protocol.md). */
export const RESULT_PREVIEW_CHARS = RESULT_SUMMARY_PREVIEW_CHARS;

const resultOf = (summary: string | undefined, body?: ResultBodyRef): DispatchState['execution']['result'] => ({
  ...(summary === undefined ? {} : { summary: clip(summary, RESULT_PREVIEW_CHARS) }),
  ...(body ? { body } : {}),
});

/** Blocked before any target contact, or after the target refused or the retry budget ran out. */
export function blocked(state: DispatchState, code: BlockedCode, detail: string, now: Date): NextState {
  const reason = blockedReason(code, detail);
  return advance(state, 'blocked', now, {
    phase: 'blocked',
    blockedCode: code,
    blockedReason: reason,
    submission: { ...state.submission, nextRetryAt: null },
    receipts: [...state.receipts, { event: 'dispatch_blocked', at: now.toISOString(), attempt: state.attempt, reason }],
    dueAt: null,
  });
}

/**
 * A final native status, however the ledger learned it (event, submission answer, lookup): the same
 * fields, `completedAt`, and the evidence grace window. A completion with expected evidence is checked
 * by the platform until completedAt + deliveryGraceSeconds; anything else has nothing to check.
 */
export function finished(
  state: DispatchState,
  status: TargetRunStatus,
  summary: string | undefined,
  now: Date,
  kind: ChangeKind = status as ChangeKind,
  body?: ResultBodyRef,
  /** The target's own word for the status, if it gave one (CONTRACT V3 §2). */
  native?: string,
): NextState {
  const at = now.toISOString();
  const check = status === 'completed' && state.evidence.expectedCount > 0;
  return advance(state, kind, now, {
    execution: {
      status,
      nativeStatus: status,
      ...(native !== undefined && native !== status ? { nativeDetail: native } : {}),
      monitorStatus: null,
      lastActivityAt: kind === 'recovered' ? state.execution.lastActivityAt : at,
      completedAt: at,
      pendingApproval: null,
      result: resultOf(summary, body),
    },
    evidence: check
      ? { ...state.evidence, outcome: 'pending', deadline: plus(now, state.timeouts.deliveryGraceSeconds) }
      : { ...state.evidence, outcome: 'unverified', deadline: null },
    dueAt: check ? at : null,
  });
}

/** Nothing to conclude yet: look again at `at` (null: nothing due). */
export function rescheduled(state: DispatchState, now: Date, at: Date | null): NextState {
  return advance(state, 'rescheduled', now, { dueAt: at ? at.toISOString() : null });
}
