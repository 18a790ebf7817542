import type { LookupOutcome, SubmitOutcome, TargetRunStatus } from './target-answers.js';
import { clip, printable } from '../text.js';
import { PHASES as PROTOCOL_PHASES, type RunEventType } from '@dispatch-ledger/protocol';
import { attentionKind } from './attention.js';
import { nextRetryAt, type RetryPolicy } from './retry.js';
import {
  blockedReason,
  DEFAULT_PRIORITY,
  isTerminal,
  TERMINAL_STATUSES,
  NO_EXECUTION,
  MAX_HOPS_LIMIT,
  PARENT_WAIT_SECONDS,
  type BlockedCode,
  type ChangeKind,
  type DispatchState,
  type InlineCheck,
  type MonitorStatus,
  type Phase,
  type ResultBodyRef,
  type ResultDelivery,
  type ResultDropReason,
  type ResultRecord,
  type Timeouts,
  type WaitingFor,
} from './state.js';
import type { CancelOutcome } from './target-answers.js';

/**
 * The dispatch's state machine, as data and named transitions (CONTRACT §1, §4, §5).
 *
 * - `LEGAL` says which change kinds may move a dispatch from one phase to another; `writeCondition`
 *   derives every conditional write from it, so an illegal move cannot be written from anywhere.
 * - Each exported transition is a pure function (state, fact, now) → next state; callers never pass a
 *   patch. The next state records what changed (`changes`), which the publisher turns into events.
 * - Rules: terminal statuses are final; losing sight of a run makes it `unknown` — never `failed` —
 *   and never touches what the target said (nativeStatus, completedAt, result); a real completion
 *   after a stall is recorded normally and clears the stall.
 */

export const PHASES = PROTOCOL_PHASES satisfies readonly Phase[];

export { isTerminal, TERMINAL_STATUSES };

/** The inbox's own changes of a result (CONTRACT §10): written in the phase the dispatch is in. */
const RESULT_CHANGES: readonly ChangeKind[] = ['result_ready', 'result_claimed', 'result_renewed', 'result_released', 'result_delivered', 'result_dropped'];

/** Change kinds that may be written while the phase moves from → to. Anything else is refused. */
export const LEGAL: Readonly<Record<Phase, Partial<Record<Phase, readonly ChangeKind[]>>>> = {
  accepted: {
    accepted: ['claimed', 'retry_scheduled', 'rescheduled', 'redispatched', 'waiting', 'cancel_requested', 'manual_result_attested'],
    submitted: ['submitted', 'completed', 'failed', 'cancelled', 'approval_requested', 'handled', 'orphaned', 'evidence_unverified', 'result_ready'],
    blocked: ['blocked', 'result_ready'],
    // Cancelled before it was ever submitted (CONTRACT §2 v2): its origin hears back like a blocked one's.
    cancelled: ['dispatch_cancelled', 'result_ready'],
  },
  submitted: {
    submitted: [
      'activity',
      'approval_requested',
      'approval_decided',
      'completed',
      'failed',
      'cancelled',
      'recovered',
      'stalled',
      'unobservable',
      'approval_wait_expired',
      'observed',
      'rescheduled',
      'handled',
      'orphaned',
      'evidence_unverified',
      'evidence_recheck',
      'cancel_requested',
      'cancel_answered',
      'slot_released',
      ...RESULT_CHANGES,
    ],
    // Only a redispatch leaves `submitted`: the old run superseded (or proven final), attempt + 1 next.
    accepted: ['redispatched', 'superseded', 'result_dropped'],
  },
  blocked: {
    accepted: ['redispatched', 'result_dropped'],
    // A blocked dispatch's result is claimed, acked, released or dropped like any other.
    blocked: [...RESULT_CHANGES, 'rescheduled'],
  },
  cancelled: {
    accepted: ['redispatched', 'result_dropped'],
    cancelled: [...RESULT_CHANGES, 'rescheduled'],
  },
};

/** Version 0 is a state built in memory and never stored (intake's first write creates it). */
const NOT_STORED = 0;

/** A write the state machine does not allow: a bug in a caller, never an input's fault. */
export class IllegalTransitionError extends Error {
  override readonly name = 'IllegalTransitionError';
  constructor(
    readonly dispatchId: string,
    readonly from: Phase,
    readonly to: Phase,
    readonly changes: readonly ChangeKind[],
  ) {
    super(`${dispatchId}: ${from} → ${to} by ${changes.join('+') || '(nothing)'} is not a legal transition`);
  }
}

/**
 * The condition of the write that replaces `from` by `next`: the version read and its phase (or, for a
 * state never stored, that no item exists). Throws when `next` is not a legal successor of `from`.
 */
export function writeCondition(from: DispatchState, next: DispatchState): { readonly create: true } | { readonly create: false; readonly version: number; readonly phase: Phase } {
  const illegal = () => new IllegalTransitionError(from.dispatchId, from.phase, next.phase, next.changes);
  if (next.version !== from.version + 1 || next.dispatchId !== from.dispatchId) throw illegal();
  if (from.version === NOT_STORED) return { create: true };
  const allowed = LEGAL[from.phase][next.phase];
  if (!allowed || next.changes.length === 0 || next.changes.some((kind) => !allowed.includes(kind))) throw illegal();
  // Terminal is final: the same run's final status never changes again.
  if (next.runId === from.runId && isTerminal(from.execution.nativeStatus) && next.execution.nativeStatus !== from.execution.nativeStatus) throw illegal();
  // A run is fenced: only a submission (accepted → submitted) or a redispatch may change it.
  if (next.runId !== from.runId && !(from.phase === 'accepted' && next.phase === 'submitted') && !(next.phase === 'accepted' && from.phase !== 'accepted')) throw illegal();
  return { create: false, version: from.version, phase: from.phase };
}

/**
 * The next version of a state: `patch` applied, the version advanced, and `kind` recorded as what
 * changed. Changes of a version never stored carry over, so the first stored version says everything
 * it did ("accepted" and "submitted"). Private: only the named transitions below use it.
 */
function advance(state: DispatchState, kind: ChangeKind, now: Date, patch: Partial<DispatchState> = {}): DispatchState {
  return withAttention(
    state,
    withResult(state, withFlow(state, {
      ...state,
      ...patch,
      updatedAt: now.toISOString(),
      changes: state.version === NOT_STORED ? [...state.changes, kind] : [kind],
      version: state.version + 1,
      storedDueAt: state.version === NOT_STORED ? null : state.dueAt,
    }), now),
  );
}

/** One more change in a write already under way (its version advanced once): both are committed together. */
function alsoChange(state: DispatchState, kind: ChangeKind, now: Date, patch: Partial<DispatchState> = {}): DispatchState {
  return withAttention(state, withResult(state, withFlow(state, { ...state, ...patch, updatedAt: now.toISOString(), changes: [...state.changes, kind] }), now));
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
function withFlow(previous: DispatchState, next: DispatchState): DispatchState {
  let out = next;
  if (out.slot && (out.attempt !== previous.attempt || runOver(out))) out = { ...out, slot: undefined };
  if (out.waitingFor && out.phase !== 'accepted') out = { ...out, waitingFor: undefined };
  const ask = cancelPending(out) ? out.cancel?.nextAskAt : null;
  // The next ask replaces a due time that was the ask just answered (else the answer left it due in the past).
  const wasAsk = out.dueAt !== null && out.dueAt === previous.cancel?.nextAskAt && out.cancel?.nextAskAt !== previous.cancel?.nextAskAt;
  if (ask && (out.dueAt === null || wasAsk || Date.parse(ask) < Date.parse(out.dueAt))) out = { ...out, dueAt: ask };
  return out;
}

/** The origin asked for a cancel and the run is not known to be over yet (CONTRACT §2 `cancel_pending`). */
export const cancelPending = (state: DispatchState): boolean => state.phase === 'submitted' && !!state.cancel && !isTerminal(state.execution.nativeStatus);

// ——— the result back to the origin (CONTRACT §10) ——————————————————————————————————————————————

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
function withResult(previous: DispatchState, next: DispatchState, now: Date): DispatchState {
  // The due time the stored item holds, when it is still ahead: keeping it costs no index write.
  const stored = next.storedDueAt !== undefined ? next.storedDueAt : previous.dueAt;
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

/** The origin claimed the result: held for `leaseSeconds` under `claimToken`. A lapsed lease taken over counts as a release. */
export function resultClaimed(state: DispatchState, claim: { readonly claimToken: string; readonly leaseSeconds: number }, now: Date): DispatchState {
  const result = state.result;
  if (!isClaimable(result, now)) throw new IllegalTransitionError(state.dispatchId, state.phase, state.phase, ['result_claimed']);
  return advance(state, 'result_claimed', now, {
    result: {
      ...result,
      state: 'claimed',
      deliveryAttempts: result.state === 'claimed' ? result.deliveryAttempts + 1 : result.deliveryAttempts,
      claimToken: claim.claimToken,
      leaseUntil: plus(now, claim.leaseSeconds),
    },
  });
}

/**
 * The target's own final report came after the ledger had recorded the final status (a lookup, or
 * the submission's answer): its result body is attached to the result still out, nothing else changes.
 */
export function resultBodyAttached(state: DispatchState, seq: number, body: ResultBodyRef, now: Date): DispatchState {
  return advance(state, 'observed', now, { lastSeq: seq, execution: { ...state.execution, result: { ...state.execution.result, body } } });
}

/** The holder extends its lease. */
export function resultRenewed(state: DispatchState, leaseSeconds: number, now: Date): DispatchState {
  const result = state.result;
  if (result?.state !== 'claimed' || leaseLapsed(result, now)) throw new IllegalTransitionError(state.dispatchId, state.phase, state.phase, ['result_renewed']);
  return advance(state, 'result_renewed', now, { result: { ...result, leaseUntil: plus(now, leaseSeconds) } });
}

/**
 * Back to pending (released, or found with its lease lapsed), one delivery attempt more; at
 * `maxDeliveryAttempts` dropped instead, its payload kept.
 */
export function resultReleased(state: DispatchState, maxDeliveryAttempts: number, now: Date): DispatchState {
  const result = state.result;
  if (result?.state !== 'claimed') throw new IllegalTransitionError(state.dispatchId, state.phase, state.phase, ['result_released']);
  const deliveryAttempts = result.deliveryAttempts + 1;
  if (deliveryAttempts >= maxDeliveryAttempts) return resultDropped({ ...state, result: { ...result, deliveryAttempts } }, 'attempts', now);
  return advance(state, 'result_released', now, { result: { ...result, state: 'pending', deliveryAttempts, claimToken: null, leaseUntil: null } });
}

/** The origin acknowledged the result: owner delivery proven by the origin itself (`basis: origin_ack`). */
export function resultDelivered(state: DispatchState, by: string, now: Date): DispatchState {
  const result = state.result;
  if (result?.state !== 'claimed') throw new IllegalTransitionError(state.dispatchId, state.phase, state.phase, ['result_delivered']);
  return advance(state, 'result_delivered', now, {
    result: { ...result, state: 'delivered', leaseUntil: null, deliveredAt: now.toISOString(), deliveredBy: clip(printable(by), 128) },
    dueAt: null,
  });
}

/** Never delivered: too many attempts, or older than the origin's result TTL. Listed in attention. */
export function resultDropped(state: DispatchState, reason: Exclude<ResultDropReason, 'superseded'>, now: Date): DispatchState {
  const result = state.result;
  if (!isLive(result)) throw new IllegalTransitionError(state.dispatchId, state.phase, state.phase, ['result_dropped']);
  return advance(state, 'result_dropped', now, { result: droppedResult(result, reason, now), dueAt: null });
}

const droppedResult = (result: ResultRecord, reason: ResultDropReason, now: Date): ResultRecord => ({
  ...result,
  state: 'dropped',
  claimToken: result.claimToken,
  leaseUntil: null,
  droppedReason: reason,
  droppedAt: now.toISOString(),
});

/** The result a redispatch ends with its attempt: a live one is dropped (`superseded`), a delivered one stays delivered. */
export function endedResult(state: DispatchState, now: Date): ResultRecord | null {
  const result = state.result ?? null;
  return isLive(result) ? droppedResult(result, 'superseded', now) : result;
}

/**
 * A settled dispatch whose result is still out came due: dropped once older than the origin's TTL
 * (a lapsed lease counts as pending), else looked at again at its expiry (or when a live lease ends).
 */
export function resultWatch(state: DispatchState, settings: { readonly ttlSeconds: number; readonly maxDeliveryAttempts: number }, now: Date): DispatchState {
  const result = state.result;
  if (!isLive(result)) return rescheduled(state, now, null);
  const expiresAt = Date.parse(result.readyAt) + settings.ttlSeconds * 1000;
  // A lease that lapsed counts as a release (one delivery attempt more; at the cap, dropped), claimed again or not.
  if (leaseLapsed(result, now)) {
    const released = resultReleased(state, settings.maxDeliveryAttempts, now);
    return released.result?.state === 'pending' && now.getTime() >= expiresAt ? { ...resultDroppedAlso(released, 'expired', now) } : released;
  }
  if (result.state === 'pending' && now.getTime() >= expiresAt) return resultDropped(state, 'expired', now);
  // Looked at again when the lease ends, or at the expiry, whichever comes first — of those still
  // ahead: a held result past its TTL is not dropped while its lease lives, so its next look is the
  // lease's end (a look in the past had every tick rewrite it until then).
  const leaseEnd = result.state === 'claimed' ? Date.parse(result.leaseUntil ?? '') : Number.NaN;
  const next = Math.min(...[expiresAt, leaseEnd].filter((at) => at > now.getTime()));
  return rescheduled(state, now, new Date(next));
}

/** The same write also drops the result (a lapsed lease found past the TTL). */
function resultDroppedAlso(state: DispatchState, reason: Exclude<ResultDropReason, 'superseded'>, now: Date): DispatchState {
  const result = state.result;
  if (!isLive(result)) return state;
  return alsoChange(state, 'result_dropped', now, { result: droppedResult(result, reason, now), dueAt: null });
}

/** Keeps when the dispatch began to need a person while the reason stays the same (a stable feed order). */
function withAttention(previous: DispatchState, next: DispatchState): DispatchState {
  const kind = attentionKind(next);
  if (!kind) return next.attentionSince ? { ...next, attentionSince: null } : next;
  const since = kind === attentionKind(previous) ? (previous.attentionSince ?? previous.updatedAt) : next.updatedAt;
  return { ...next, attentionSince: since };
}

/** How a transition is combined: a write of its own, or one more change in a write already under way. */
export type WriteMode = 'own_write' | 'same_write';
const step = (mode: WriteMode) => (mode === 'own_write' ? advance : alsoChange);

const MAX_ERROR = 300;
/** A target's error, as stored in `submission.lastError` and shown in the view. */
const bounded = (text: string): string => clip(printable(text), MAX_ERROR);
const plus = (now: Date, seconds: number): string => new Date(now.getTime() + seconds * 1000).toISOString();

/** Result previews kept in the hot state item. */
export const RESULT_PREVIEW_CHARS = 200;
const resultOf = (summary: string | undefined, body?: ResultBodyRef): DispatchState['execution']['result'] => ({
  ...(summary === undefined ? {} : { summary: clip(summary, RESULT_PREVIEW_CHARS) }),
  ...(body ? { body } : {}),
});

// ——— creation, blocking, submission ———————————————————————————————————————————————————————————

export interface NewDispatch {
  readonly dispatchId: string;
  readonly origin: string;
  readonly target: string;
  readonly hop: number;
  readonly maxHops: number;
  readonly parentDispatchId: string | null;
  readonly deliveryMode: 'callback' | 'detached';
  readonly timeouts: Timeouts;
  /** When the accepted message was written: the `dispatch_written` receipt's time. */
  readonly writtenAt: string;
  /** How many evidence refs the dispatch expects (0: nothing to check, the outcome is `unverified`). */
  readonly expectedCount?: number;
  /** CONTRACT §10: how its result reaches the origin (default after_turn). */
  readonly resultDelivery?: ResultDelivery;
  /** CONTRACT §1 v2 / §11: order among waiting dispatches (default 5), and not before when. */
  readonly priority?: number;
  readonly notBefore?: string | null;
  /** When the origin sent the message (its queue's timestamp), if known. */
  readonly sentAt?: string;
}

/** A dispatch written and not yet submitted (attempt 1, nothing tried). Version 0: not stored yet. */
export function accepted(input: NewDispatch, now: Date): DispatchState {
  return {
    dispatchId: input.dispatchId,
    origin: input.origin,
    target: input.target,
    createdAt: input.writtenAt,
    updatedAt: now.toISOString(),
    phase: 'accepted',
    blockedCode: null,
    blockedReason: null,
    attempt: 1,
    runId: null,
    lastSeq: null,
    supersededRuns: [],
    hop: input.hop,
    maxHops: input.maxHops,
    parentDispatchId: input.parentDispatchId,
    deliveryMode: input.deliveryMode,
    timeouts: input.timeouts,
    submission: { attempts: 0, nextRetryAt: null, lastError: null },
    execution: NO_EXECUTION,
    receipts: [{ event: 'dispatch_written', at: input.writtenAt, attempt: 1 }],
    evidence: { outcome: (input.expectedCount ?? 0) > 0 ? 'pending' : 'unverified', expectedCount: input.expectedCount ?? 0, deadline: null },
    dueAt: null,
    version: NOT_STORED,
    changes: ['accepted'],
    ...(input.resultDelivery === 'inject' ? { resultDelivery: 'inject' as const } : {}),
    ...(input.priority !== undefined && input.priority !== DEFAULT_PRIORITY ? { priority: input.priority } : {}),
    ...(input.notBefore ? { notBefore: input.notBefore } : {}),
    ...(input.sentAt ? { sentAt: input.sentAt } : {}),
  };
}

/** Blocked before any target contact, or after the target refused or the retry budget ran out. */
export function blocked(state: DispatchState, code: BlockedCode, detail: string, now: Date): DispatchState {
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

// ——— lineage (CONTRACT §1) ————————————————————————————————————————————————————————————————————————

/** The held child's first look for its parent, and the most it waits between two looks. */
const PARENT_CHECK_FIRST_SECONDS = 5;
const PARENT_CHECK_MAX_SECONDS = 60;

/**
 * The parent is not recorded (or is another origin's: "not in the ledger" to this one, so existence never
 * leaks). SQS standard queues do not keep order, so the child is held — accepted, `waitingFor: parent`,
 * due again after as long as it has waited already (5 s, 10 s, 20 s…, at most 60 s, never past the
 * deadline) — and blocked `unknown_parent` only once `waitSeconds` (PARENT_WAIT_SECONDS unless a deployment
 * sets less) have passed since it was written.
 */
export function parentMissing(state: DispatchState, now: Date, waitSeconds: number = PARENT_WAIT_SECONDS, parentHeld = false): DispatchState {
  const written = Date.parse(state.createdAt);
  // A parent recorded but itself held gives up on its own parent when that wait ends, and its child with
  // it (blocked as `unknown`): the child never gives up first, whatever the depth of the chain still
  // arriving. A cycle of held dispatches is the one case with no end but this bound: one wait per hop allowed.
  const deadline = written + waitSeconds * 1000 * (parentHeld ? MAX_HOPS_LIMIT + 1 : 1);
  if (now.getTime() >= deadline) {
    const why = parentHeld ? `is still held for its own parent after ${Math.round((now.getTime() - written) / 1000)} s` : `is not in the ledger (held ${waitSeconds} s for it)`;
    return blocked(state, 'unknown_parent', `parent ${state.parentDispatchId ?? ''} ${why}`, now);
  }
  const delay = Math.min(PARENT_CHECK_MAX_SECONDS * 1000, Math.max(PARENT_CHECK_FIRST_SECONDS * 1000, now.getTime() - written));
  const dueAt = new Date(Math.min(deadline, now.getTime() + delay)).toISOString();
  // Already held (a stored version): only the next look moves.
  if (state.version !== NOT_STORED && state.waitingFor === 'parent') return advance(state, 'rescheduled', now, { dueAt });
  return advance(state, 'waiting', now, { waitingFor: 'parent', dueAt });
}

/**
 * Whether the dispatch's hop is derived: it has no parent, or its hop was derived from the recorded
 * parent (hop = parent's + 1 ≥ 1). A hop of 0 under a parent is the placeholder of a child held for
 * it; one that left the wait without it (cancelled, blocked `unknown_parent`) never derives it.
 */
export const lineageDerived = (state: Pick<DispatchState, 'parentDispatchId' | 'hop'>): boolean => !state.parentDispatchId || state.hop > 0;

/**
 * The held child's parent is recorded now: its hop and budget are derived from it (hop = parent's + 1,
 * maxHops the smaller of the parent's and its own), and it is claimed for its submission like a retry
 * that came due — or blocked at once when that hop is over the budget, before any target contact.
 */
export function parentFound(state: DispatchState, parent: Pick<DispatchState, 'hop' | 'maxHops'>, now: Date, claimSeconds: number): DispatchState {
  const derived = { ...state, hop: parent.hop + 1, maxHops: Math.min(parent.maxHops, state.maxHops), waitingFor: undefined };
  if (derived.hop > derived.maxHops) return blocked(derived, 'hop_budget_exceeded', `hop ${derived.hop} > maxHops ${derived.maxHops}`, now);
  return advance(derived, 'claimed', now, { dueAt: plus(now, claimSeconds) });
}

/** Blocked reasons a new submission cannot change: such a dispatch is never submitted again. */
export const FINAL_BLOCKS: ReadonlySet<BlockedCode> = new Set(['invalid_fields', 'hop_budget_exceeded', 'unknown_parent']);

/**
 * The submitter holds the dispatch while it calls the target: its due time moves past the call, so an
 * overlapping tick or a duplicate leaves it alone. `now` must be the clock at the write, not a tick's start.
 */
export function submissionClaimed(state: DispatchState, now: Date, claimSeconds: number): DispatchState {
  return advance(state, 'claimed', now, { dueAt: plus(now, claimSeconds), waitingFor: undefined });
}

/**
 * A submitter holds this accepted dispatch right now (a claim not lapsed, not a wait or a retry's
 * backoff): its call to the target may be under way, so a cancel is recorded for it to act on rather
 * than ending a dispatch whose run may already exist.
 */
export const submissionInFlight = (state: DispatchState, now: Date): boolean =>
  state.phase === 'accepted' && !state.waitingFor && state.dueAt !== null && Date.parse(state.dueAt) > now.getTime() && state.dueAt !== state.submission.nextRetryAt;

/**
 * Applies what one submission call to the target returned. An answer that already reports a final
 * status goes through the same transition as a reported one (its event, `completedAt`, the evidence
 * grace window): a submission answer is never stored raw.
 */
export function submitted(state: DispatchState, outcome: SubmitOutcome, policy: RetryPolicy, now: Date): DispatchState {
  const at = now.toISOString();
  const attempts = state.submission.attempts + 1;
  switch (outcome.kind) {
    case 'accepted': {
      const next = advance(state, 'submitted', now, {
        phase: 'submitted',
        runId: outcome.runId,
        lastSeq: null,
        submission: { attempts, nextRetryAt: null, lastError: null },
        execution: { ...NO_EXECUTION, status: outcome.status, nativeStatus: outcome.status, lastActivityAt: at },
        receipts: [...state.receipts, { event: 'dispatch_submitted', at, attempt: state.attempt, runId: outcome.runId, requestId: outcome.requestId }],
        // The run is watched from now on: no activity for stallAfterSeconds makes it due.
        dueAt: plus(now, state.timeouts.stallAfterSeconds),
      });
      return isTerminal(outcome.status) ? finished(next, outcome.status, undefined, now, 'same_write') : next;
    }
    case 'rejected':
      return blocked(
        { ...state, submission: { ...state.submission, attempts, lastError: bounded(`HTTP ${outcome.httpStatus}: ${outcome.reason}`) } },
        'target_rejected',
        `HTTP ${outcome.httpStatus}: ${outcome.reason}`,
        now,
      );
    case 'unavailable': {
      const lastError = bounded(outcome.reason);
      const retryAt = nextRetryAt(policy, state.dispatchId, attempts, now);
      if (!retryAt) {
        return blocked({ ...state, submission: { attempts, nextRetryAt: null, lastError } }, 'retry_budget_spent', `${attempts} submission attempts failed; last: ${lastError}`, now);
      }
      return advance(state, 'retry_scheduled', now, { submission: { attempts, nextRetryAt: retryAt.toISOString(), lastError }, dueAt: retryAt.toISOString(), waitingFor: undefined });
    }
  }
}

// ——— run events ————————————————————————————————————————————————————————————————————————————————

/** The events a target reports (the protocol's words). */
export { RUN_EVENT_TYPES, type RunEventType } from '@dispatch-ledger/protocol';

export interface RunEvent {
  readonly seq: number;
  readonly type: RunEventType;
  readonly approvalId?: string | undefined;
  readonly result?: { readonly summary?: string | undefined; readonly body?: ResultBodyRef | undefined } | undefined;
  /** A final event's own word for its status (CONTRACT V3 §2), checked at the API. */
  readonly nativeStatus?: string | undefined;
}

export type RunEventOutcome =
  | { readonly kind: 'apply'; readonly next: DispatchState }
  /** Seen and acknowledged, not worth a write (a heartbeat inside the coalescing window). */
  | { readonly kind: 'coalesced' }
  /** Older or repeated seq, or a run already final: acknowledged, no change. */
  | { readonly kind: 'stale' }
  | { readonly kind: 'invalid'; readonly reason: string };

/**
 * Activity is written at most once per window (a fifth of the stall timeout), the way Temporal
 * throttles heartbeats: a chatty target does not cost a write per heartbeat. Because an absorbed
 * heartbeat is not recorded, a stall is declared only once the stall timeout has passed after the end
 * of the window (see `stallDeadline`): coalescing may delay a recorded activity, never a verdict.
 */
export function coalescingWindowMs(state: DispatchState): number {
  return state.timeouts.stallAfterSeconds * 200;
}

/**
 * When silence becomes a stall: `stallAfterSeconds` after the last activity that may have happened.
 * Activity absorbed by coalescing can be as late as the end of the window after the recorded one.
 */
export function stallDeadline(state: DispatchState): number {
  const recorded = Date.parse(state.execution.lastActivityAt ?? state.updatedAt);
  return recorded + coalescingWindowMs(state) + state.timeouts.stallAfterSeconds * 1000;
}

const waitingForApproval = (state: DispatchState): boolean => state.execution.nativeStatus === 'waiting_for_approval' && state.execution.pendingApproval !== null;

/** Applies one run event of the current run. */
export function applyRunEvent(state: DispatchState, event: RunEvent, now: Date): RunEventOutcome {
  const execution = state.execution;
  if (isTerminal(execution.nativeStatus) || (state.lastSeq !== null && event.seq <= state.lastSeq)) return { kind: 'stale' };
  const at = now.toISOString();
  switch (event.type) {
    case 'heartbeat':
    case 'progress': {
      // Still waiting for the approval the ledger holds, whatever the monitor concluded meanwhile.
      const waiting = waitingForApproval(state);
      const quiet = waiting ? execution.status === 'waiting_for_approval' : execution.status === 'running' && execution.monitorStatus === null;
      const recent = execution.lastActivityAt !== null && now.getTime() - Date.parse(execution.lastActivityAt) < coalescingWindowMs(state);
      if (quiet && recent) return { kind: 'coalesced' };
      return {
        kind: 'apply',
        next: advance(state, 'activity', now, {
          lastSeq: event.seq,
          execution: {
            ...execution,
            status: waiting ? 'waiting_for_approval' : 'running',
            nativeStatus: waiting ? 'waiting_for_approval' : 'running',
            // Activity clears a stall or a lost lookup, never an expired approval (that is about the approval clock).
            monitorStatus: execution.monitorStatus === 'approval_wait_expired' ? 'approval_wait_expired' : null,
            lastActivityAt: at,
          },
          // Watching resumes from this activity (an approval keeps its own clock).
          dueAt: waiting ? state.dueAt : state.dueAt ?? plus(now, state.timeouts.stallAfterSeconds),
        }),
      };
    }
    case 'approval_requested':
      if (!event.approvalId) return { kind: 'invalid', reason: 'approval_requested needs an approvalId' };
      // The approval the ledger already holds (adopted from a lookup, or a retried report): its clock
      // and its event stand; only the seq and the activity are new.
      if (execution.pendingApproval?.approvalId === event.approvalId) {
        return { kind: 'apply', next: advance(state, 'activity', now, { lastSeq: event.seq, execution: { ...execution, lastActivityAt: at } }) };
      }
      return { kind: 'apply', next: { ...approvalRequested(state, event.approvalId, at, now), lastSeq: event.seq } };
    case 'completed':
    case 'failed':
    case 'cancelled':
      return { kind: 'apply', next: { ...finished(state, event.type, event.result?.summary, now, 'own_write', event.type, event.result?.body, event.nativeStatus), lastSeq: event.seq } };
  }
}

/**
 * The runtime's own word that the run failed, after its own retries — Lambda's on-failure destination
 * (CONTRACT §12): recorded as a reported failure (`Run Failed`), with the runtime's error as its result and its
 * error type as the nativeStatus (`native`).
 */
export function runFailedByRuntime(state: DispatchState, error: string, now: Date, native?: string): DispatchState {
  return finished(state, 'failed', error, now, 'own_write', 'failed', undefined, native);
}

function approvalRequested(state: DispatchState, approvalId: string, requestedAt: string, now: Date): DispatchState {
  return advance(state, 'approval_requested', now, {
    execution: {
      ...state.execution,
      status: 'waiting_for_approval',
      nativeStatus: 'waiting_for_approval',
      monitorStatus: null,
      lastActivityAt: now.toISOString(),
      pendingApproval: { approvalId, requestedAt },
    },
    dueAt: new Date(Date.parse(requestedAt) + state.timeouts.approvalWaitSeconds * 1000).toISOString(),
  });
}

/**
 * A final native status, however the ledger learned it (event, submission answer, lookup): the same
 * fields, `completedAt`, and the evidence grace window. A completion with expected evidence is checked
 * by the platform until completedAt + deliveryGraceSeconds; anything else has nothing to check.
 */
function finished(
  state: DispatchState,
  status: TargetRunStatus,
  summary: string | undefined,
  now: Date,
  mode: WriteMode,
  kind: ChangeKind = status as ChangeKind,
  body?: ResultBodyRef,
  /** The target's own word for the status, if it gave one (CONTRACT V3 §2). */
  native?: string,
): DispatchState {
  const at = now.toISOString();
  const check = status === 'completed' && state.evidence.expectedCount > 0;
  return step(mode)(state, kind, now, {
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

// ——— lookups and the monitor ——————————————————————————————————————————————————————————————————

/** Lookups of a run that stays unknown back off, doubling from the stall timeout, up to this. */
export const MAX_LOOKUP_BACKOFF_SECONDS = 6 * 3600;

/**
 * An observation lost: `unknown`, with why; what the target said stays as it was. Looked up again
 * after a delay that doubles while it stays unknown (from stallAfterSeconds, capped at 6 h): never a
 * loop of constant cost.
 */
function unobserved(state: DispatchState, monitorStatus: MonitorStatus, now: Date): DispatchState {
  const kind = monitorStatus === 'stalled' ? 'stalled' : 'unobservable';
  const already = state.execution.status === 'unknown';
  const lookups = already ? (state.execution.unknownLookups ?? 1) + 1 : 1;
  const delay = Math.min(state.timeouts.stallAfterSeconds * 2 ** (lookups - 1), MAX_LOOKUP_BACKOFF_SECONDS);
  const same = already && state.execution.monitorStatus === monitorStatus;
  return advance(state, same ? 'rescheduled' : kind, now, {
    execution: { ...state.execution, status: 'unknown', monitorStatus, unknownLookups: lookups },
    dueAt: plus(now, delay),
  });
}

/**
 * What a lookup at the target means for the current run. `stallSuspected`: the monitor came because
 * no activity was recorded for the stall timeout (a refresh asks without suspecting anything).
 * Returns undefined when nothing needs writing.
 */
export function reconcileLookup(state: DispatchState, lookup: LookupOutcome, now: Date, stallSuspected: boolean): DispatchState | undefined {
  if (isTerminal(state.execution.nativeStatus)) return undefined;
  if (lookup.kind === 'not_found') return unobserved(state, 'target_not_found', now);
  if (lookup.kind === 'unavailable') return unobserved(state, 'lookup_unavailable', now);
  const run = lookup.run;
  // A final result the target holds but never reported: recorded as the target's own word.
  if (isTerminal(run.status)) return finished(state, run.status, run.result?.summary, now, 'own_write', 'recovered', undefined, run.nativeStatus);
  const held = state.execution.pendingApproval;
  if (run.status === 'waiting_for_approval' && run.pendingApproval && held?.approvalId !== run.pendingApproval.approvalId) {
    // Waiting for an approval the ledger never heard of: adopted, so approve and cancel work.
    const requestedAt = run.pendingApproval.requestedAt && !Number.isNaN(Date.parse(run.pendingApproval.requestedAt)) ? new Date(run.pendingApproval.requestedAt).toISOString() : now.toISOString();
    return approvalRequested(state, clip(run.pendingApproval.approvalId, 128), requestedAt, now);
  }
  const ownsApproval = run.status === 'waiting_for_approval' && held !== null;
  if (stallSuspected && !ownsApproval) return unobserved(state, 'stalled', now);
  // Seen alive: a lost lookup or a stall is cleared by the target's own answer.
  const lost = state.execution.monitorStatus === 'lookup_unavailable' || state.execution.monitorStatus === 'target_not_found' || state.execution.monitorStatus === 'stalled';
  if (lost || state.execution.status === 'unknown') {
    return advance(state, 'observed', now, {
      execution: { ...state.execution, status: run.status, nativeStatus: run.status, monitorStatus: null, unknownLookups: undefined },
      dueAt: plus(now, state.timeouts.stallAfterSeconds),
    });
  }
  return undefined;
}

/** A refresh looks the run up at most once in this many seconds per dispatch (CONTRACT §2 V3); more answer the stored view. */
export const REFRESH_INTERVAL_SECONDS = 10;

/** A refresh asked within the interval: answered from the stored view, the target not called. */
export const refreshThrottled = (state: DispatchState, now: Date): boolean =>
  !!state.lastRefreshAt && now.getTime() - Date.parse(state.lastRefreshAt) < REFRESH_INTERVAL_SECONDS * 1000;

/**
 * What a refresh (`GET /dispatches/{id}?refresh=true`) found at the target, recorded through the same
 * transition as the monitor's lookup — so `check`, `check --refresh` and `attention` agree — with when
 * it asked (the throttle reads it; a run found as recorded is one `observed` write of that alone).
 */
export function refreshRecorded(state: DispatchState, lookup: LookupOutcome, now: Date, stallSuspected: boolean): DispatchState {
  const next = reconcileLookup(state, lookup, now, stallSuspected) ?? advance(state, 'observed', now);
  return { ...next, lastRefreshAt: now.toISOString() };
}

/** Nothing to conclude yet: look again at `at` (null: nothing due). */
export function rescheduled(state: DispatchState, now: Date, at: Date | null): DispatchState {
  return advance(state, 'rescheduled', now, { dueAt: at ? at.toISOString() : null });
}

export type MonitorStep =
  | { readonly kind: 'write'; readonly next: DispatchState }
  /** A completed run whose expected evidence the platform must look for. */
  | { readonly kind: 'check' }
  | { readonly kind: 'lookup' }
  /** A settled dispatch whose result is still out: its expiry is on the origin's clock. */
  | { readonly kind: 'result' }
  /** A cancel to ask of the target again (it could not be reached before). */
  | { readonly kind: 'cancel' };

/** What the monitor does with a submitted run that came due, before any target contact. */
export function monitorStep(state: DispatchState, now: Date): MonitorStep {
  const execution = state.execution;
  if (execution.status === 'completed' && state.evidence.outcome === 'pending') return { kind: 'check' };
  if (isTerminal(execution.status) && isLive(state.result)) return { kind: 'result' };
  if (isTerminal(execution.status)) return { kind: 'write', next: rescheduled(state, now, null) };
  // A cancel the target could not be asked yet: ask again before anything else.
  const ask = cancelPending(state) ? state.cancel?.nextAskAt : null;
  if (ask && Date.parse(ask) <= now.getTime()) return { kind: 'cancel' };
  if (execution.status === 'waiting_for_approval' && execution.pendingApproval) {
    const expiresAt = Date.parse(execution.pendingApproval.requestedAt) + state.timeouts.approvalWaitSeconds * 1000;
    if (now.getTime() < expiresAt) return { kind: 'write', next: rescheduled(state, now, new Date(expiresAt)) };
    if (execution.monitorStatus === 'approval_wait_expired') return { kind: 'write', next: rescheduled(state, now, null) };
    // The approval stays pending (never auto-denied): only the expiry is recorded.
    return { kind: 'write', next: advance(state, 'approval_wait_expired', now, { execution: { ...execution, monitorStatus: 'approval_wait_expired' }, dueAt: null }) };
  }
  const stallAt = stallDeadline(state);
  if (now.getTime() < stallAt && execution.status !== 'unknown') return { kind: 'write', next: rescheduled(state, now, new Date(stallAt)) };
  return { kind: 'lookup' };
}

// ——— approvals, redispatch, evidence ————————————————————————————————————————————————————————————

/** The target took the decision on the pending approval: recorded, the run watched again. */
export function approvalDecided(state: DispatchState, decision: 'approve' | 'cancel', now: Date): DispatchState {
  const approvalId = state.execution.pendingApproval?.approvalId;
  return advance(state, 'approval_decided', now, {
    execution: {
      ...state.execution,
      ...(approvalId ? { lastDecision: { approvalId, decision, at: now.toISOString() } } : {}),
      ...(decision === 'approve' && !isTerminal(state.execution.status) ? { status: 'running' as const } : {}),
      monitorStatus: null,
      pendingApproval: null,
      lastActivityAt: now.toISOString(),
    },
    dueAt: plus(now, state.timeouts.stallAfterSeconds),
  });
}

export interface RedispatchFacts {
  readonly reason: string;
  /** The current run may be active and is superseded (forced). */
  readonly supersede: boolean;
  /** Seconds the redispatcher holds the dispatch while it submits. */
  readonly claimSeconds: number;
}

/** Superseded run ids kept in the hot state (the rest are answerable from their own run records). */
export const SUPERSEDED_IN_STATE = 10;

/**
 * A redispatch: back to `accepted` with the attempt to submit. A new attempt (a new Idempotency-Key)
 * only when a run is known to exist or the target refused the key; otherwise the same key again, so a
 * submission that timed out finds its run instead of starting a second writer. The ended attempt's
 * receipts and run leave the hot state (the caller commits their record in the same write). A manual
 * dispatch's redispatch is a new round of the person's work, so a new attempt too: the attestations of
 * the ended one stop counting. It forgets that it was manual; the one submission path records it so
 * again when its target is manual now (it may be http by then).
 */
export function redispatched(state: DispatchState, facts: RedispatchFacts, now: Date): DispatchState {
  const attempt = state.runId || state.manual || state.blockedCode === 'target_rejected' ? state.attempt + 1 : state.attempt;
  const next = advance(state, facts.supersede ? 'superseded' : 'redispatched', now, {
    // The ended attempt's result leaves with its record (endedResult); the attempt submitted next gets its own.
    result: undefined,
    ...(state.result && attempt === state.result.attempt ? { resultRound: (state.resultRound ?? 0) + 1 } : {}),
    phase: 'accepted',
    blockedCode: null,
    blockedReason: null,
    attempt,
    runId: null,
    lastSeq: null,
    supersededRuns: state.runId ? [...state.supersededRuns, state.runId].slice(-SUPERSEDED_IN_STATE) : state.supersededRuns,
    submission: { attempts: 0, nextRetryAt: null, lastError: null },
    execution: NO_EXECUTION,
    // The ended attempt's receipts go with its record (written in the same transaction).
    receipts: [],
    evidence: { outcome: state.evidence.expectedCount > 0 ? 'pending' : 'unverified', expectedCount: state.evidence.expectedCount, deadline: null },
    dueAt: plus(now, facts.claimSeconds),
    redispatch: { at: now.toISOString(), reason: clip(printable(facts.reason), 120), supersededRunId: facts.supersede ? state.runId : null, cancel: null },
    // The ended attempt's cancel and slot release stay with it; the new attempt joins the queue afresh.
    cancel: undefined,
    slotRelease: undefined,
    waitingFor: undefined,
    manual: undefined,
  });
  // A result still out is dropped with its attempt: its ack answers `superseded` from now on.
  return isLive(state.result) ? { ...next, changes: [...next.changes, 'result_dropped'] } : next;
}

/** What became of the old run's cancel request, recorded with the new attempt's submission. */
export function withCancelAnswer(state: DispatchState, cancel: string | null): DispatchState {
  return state.redispatch ? { ...state, redispatch: { ...state.redispatch, cancel } } : state;
}

export interface SettledEvidence {
  readonly outcome: 'handled' | 'orphan_no_delivery' | 'unverified';
  readonly expected: readonly string[];
  readonly missing: readonly string[];
  /** The check's record, when the state carries it (it fits the hot item); else it is an item of its own. */
  readonly check?: InlineCheck | undefined;
}

/** The platform's own check of the evidence reached a final outcome (CONTRACT §5). */
export function evidenceSettled(state: DispatchState, settled: SettledEvidence, now: Date, mode: WriteMode): DispatchState {
  const at = now.toISOString();
  const kind: ChangeKind = settled.outcome === 'handled' ? 'handled' : settled.outcome === 'orphan_no_delivery' ? 'orphaned' : 'evidence_unverified';
  return step(mode)(state, kind, now, {
    // The refs its event names travel with the state: Handled/Orphaned are published from this committed
    // change, so a completion whose write lost to a concurrent redispatch publishes nothing.
    // (The deadline is done with; the hot item stays within one write unit.)
    evidence: {
      outcome: settled.outcome,
      expectedCount: state.evidence.expectedCount,
      deadline: null,
      expected: settled.expected,
      ...(settled.outcome !== 'unverified' && settled.missing.length > 0 ? { missing: settled.missing } : {}),
      ...(settled.check ? { check: settled.check } : {}),
    },
    receipts:
      settled.outcome === 'handled'
        ? [...state.receipts, { event: 'dispatch_completed', at, attempt: state.attempt, runId: state.runId ?? '', evidenceCount: settled.expected.length }]
        : state.receipts,
    dueAt: null,
  });
}

/** An expected file arrived after a check found it missing: checked again from the next tick. */
export function evidenceRecheck(state: DispatchState, now: Date): DispatchState {
  return advance(state, 'evidence_recheck', now, { dueAt: now.toISOString() });
}

// ——— flow control (CONTRACT §11) and cancel (§2 v2) ——————————————————————————————————————————————

/**
 * Not submitted yet: every slot of its target is held (the wait index holds it, by priority — the
 * freeing write or the monitor admits it), or its `notBefore` is still ahead (due then).
 */
export function waiting(state: DispatchState, why: WaitingFor, now: Date): DispatchState {
  return advance(state, 'waiting', now, { waitingFor: why, dueAt: why === 'not_before' ? (state.notBefore ?? now.toISOString()) : null });
}

/**
 * Admitted: one slot of shard `shard` taken for this attempt, in the same write that claims the
 * dispatch for its submission (the store conditions the slot counter on the cap it holds). The
 * submitter holds it while it calls the target; if it dies, the monitor finds the claim lapsed and
 * submits again with the slot it still holds — a slot taken is never lost with the process.
 */
export function admitted(state: DispatchState, shard: number, now: Date, claimSeconds: number): DispatchState {
  return advance(state, 'claimed', now, { slot: { shard, at: now.toISOString() }, waitingFor: undefined, dueAt: plus(now, claimSeconds) });
}

export interface CancelAsk {
  readonly reason: string;
  /** The caller's principal (or the origin locally). */
  readonly by: string;
}

/** Cancelled before any submission: never submitted, its slot (if one was held for a retry) given back. */
export function cancelledBeforeSubmission(state: DispatchState, ask: CancelAsk, now: Date): DispatchState {
  const at = now.toISOString();
  return advance(state, 'dispatch_cancelled', now, {
    phase: 'cancelled',
    submission: { ...state.submission, nextRetryAt: null },
    dueAt: null,
    // A cancel recorded while a submission was under way keeps its own time and asker.
    cancel: { ...(state.cancel ?? { requestedAt: at, reason: bounded(ask.reason), by: clip(printable(ask.by), 200), asks: 0 }), nextAskAt: null, answer: 'cancelled before submission' },
  });
}

/**
 * A cancel asked of a submitted run — or of one whose submission is under way (its submitter carries it
 * into the submitted state) —: recorded first, then asked of the target (now, and again while it cannot be reached).
 */
export function cancelRequested(state: DispatchState, ask: CancelAsk, now: Date): DispatchState {
  const at = now.toISOString();
  return advance(state, 'cancel_requested', now, {
    cancel: { requestedAt: at, reason: bounded(ask.reason), by: clip(printable(ask.by), 200), asks: 0, nextAskAt: at, answer: null },
  });
}


/**
 * What the target answered to the cancel. Its word that the run is over (a final status) is recorded
 * like a reported one; a run it still runs stays as it is until its own event or a lookup says more;
 * unreachable → asked again with the retry policy's backoff.
 */
export function cancelAnswered(state: DispatchState, outcome: CancelOutcome, policy: RetryPolicy, now: Date): DispatchState {
  const cancel = state.cancel;
  if (!cancel || !cancelPending(state)) throw new IllegalTransitionError(state.dispatchId, state.phase, state.phase, ['cancel_answered']);
  const asks = cancel.asks + 1;
  if (outcome.kind === 'cancelled' && isTerminal(outcome.status)) {
    return finished({ ...state, cancel: { ...cancel, asks, nextAskAt: null, answer: `the target says ${outcome.status}` } }, outcome.status, undefined, now, 'own_write');
  }
  const answered = (answer: string, nextAskAt: string | null) => advance(state, 'cancel_answered', now, { cancel: { ...cancel, asks, nextAskAt, answer: bounded(answer) } });
  if (outcome.kind === 'cancelled') return answered(`accepted by the target; the run is ${outcome.status}`, null);
  if (outcome.kind === 'requested') return answered(outcome.how, null);
  if (outcome.kind === 'not_found') return answered('the target does not know the run', null);
  // Asked again with the submission retries' backoff (it never gives up: only the target's word ends a run).
  const delays = policy.delaysSeconds;
  return answered(`the target could not be reached: ${outcome.reason}`, plus(now, delays[Math.min(asks - 1, delays.length - 1)] ?? 60));
}

/**
 * An operator freed the slot of a run its target answers 404 for (CONTRACT §2 slots/release): the run
 * stays `unknown` — the ledger still does not know it is over — but no longer holds its target's capacity.
 */
export function slotReleased(state: DispatchState, release: { readonly by: string; readonly reason: string }, now: Date): DispatchState {
  if (!state.slot || state.phase !== 'submitted') throw new IllegalTransitionError(state.dispatchId, state.phase, state.phase, ['slot_released']);
  return advance(state, 'slot_released', now, {
    slot: undefined,
    slotRelease: { at: now.toISOString(), by: clip(printable(release.by), 200), reason: bounded(release.reason), runId: state.runId ?? '' },
  });
}

// ——— manual mode (CONTRACT §13, VALP) ———————————————————————————————————————————————————————————

/**
 * Its target is manual: recorded, never submitted anywhere — no call, no slot, no retry, no lookup and
 * no stall clock (nothing is due, so the monitor never looks at it). It waits for a person, whose
 * attestations say what happened (`POST /dispatches/{id}/manual`).
 */
export function awaitingPerson(state: DispatchState, now: Date): DispatchState {
  return advance(state, 'waiting', now, {
    waitingFor: 'person',
    submission: { ...state.submission, nextRetryAt: null },
    dueAt: null,
    manual: { since: now.toISOString() },
  });
}

/**
 * A person attested the result of the manual work (`manual_result_attested`): the wait for a person
 * ends. It stays `accepted` — nothing was ever submitted — and no runtime receipt is written: the gate
 * reads this attestation, and says it rests on a person's word.
 */
export function manualResultAttested(state: DispatchState, attestation: { readonly attestationId: string; readonly at: string }, now: Date): DispatchState {
  if (state.phase !== 'accepted' || !state.manual) throw new IllegalTransitionError(state.dispatchId, state.phase, state.phase, ['manual_result_attested']);
  return advance(state, 'manual_result_attested', now, {
    waitingFor: undefined,
    manual: { ...state.manual, resultAttestation: { attestationId: attestation.attestationId, at: attestation.at } },
    dueAt: null,
  });
}

/**
 * A person attested the manual work cannot be done (`manual_blocked`): blocked with their note as the
 * reason, like any block, naming the attestation that did it.
 */
export const manuallyBlocked = (state: DispatchState, attestation: { readonly attestationId: string; readonly at: string; readonly note: string }, now: Date): DispatchState => ({
  ...blocked(state, 'manual_blocked', attestation.note, now),
  manual: state.manual && { ...state.manual, blockAttestation: { attestationId: attestation.attestationId, at: attestation.at } },
});
