import type { DispatchState, NextState } from '../dispatch/state.js';
import { awaitingPerson } from '../dispatch/transitions/manual.js';
import { admitted, cancelledBeforeSubmission, waiting } from '../dispatch/transitions/flow.js';
import { submissionClaimed, submitted } from '../dispatch/transitions/lifecycle.js';
import { blocked } from '../dispatch/transitions/core.js';
import { wantsAllotment, type SlotShard } from '../dispatch/slots.js';
import { taskOf } from './task.js';
import { crashPoint } from '../faults.js';
import type { DispatchWorkDeps, StoredState } from '../ledger/port.js';
import { writeOnce } from '../ledger/repository.js';
import type { AcceptedMessage } from '../dispatch/records.js';
import type { TargetRegistration } from '../targets/port.js';
import type { SubmitOutcome } from '../dispatch/target-answers.js';

type SubmitDeps = Pick<DispatchWorkDeps, 'store' | 'blobs' | 'targetFor' | 'callbackUrl' | 'retryPolicy' | 'now' | 'claimSeconds'>;

/** What an attempt to start a dispatch's submission ended as; `state` and `version`: what it left stored. */
export type AttemptOutcome =
  | { readonly kind: 'committed'; readonly state: DispatchState; readonly version: number }
  /** Someone else changed the dispatch first (`existing`: what a failed create found). */
  | { readonly kind: 'conflict'; readonly existing?: DispatchState | undefined };

/**
 * The one way a dispatch is taken to its target (intake's first try, monitor retries and admissions,
 * redispatch): `from` is the state as stored (or, for intake, a state never stored: version 0), held
 * by the caller. In order, each step committed before the next:
 *
 *  0. a manual target is never submitted: the dispatch waits for a person (CONTRACT §13);
 *  1. not before its `notBefore` → waits for it (due then);
 *  2. a target with `maxConcurrentRuns`: one slot taken, conditioned on the shard's own cap, in the
 *     write that claims it — or, when none is free or others already wait, it waits in the wait index
 *     (admitted by priority and round-robin across origins, `admitWaiting`);
 *  3. the submission call with the attempt's Idempotency-Key, and the transition its answer means.
 */
export async function startAttempt(deps: SubmitDeps, from: StoredState, message: AcceptedMessage | undefined, inHand?: Record<string, unknown>): Promise<AttemptOutcome> {
  const { state } = from;
  const registration = await deps.store.getTarget(state.target);
  if (!registration) return commitStep(deps, from, blocked(state, 'unknown_target', `no target named "${state.target}" is registered`, deps.now()));
  if (!message?.content.valid) return commitStep(deps, from, blocked(state, 'invalid_fields', 'the accepted message is missing or invalid', deps.now()));
  // A person works a manual target (CONTRACT §13): recorded as waiting for them, and nothing else — no call, no slot, nothing due.
  if (registration.kind === 'manual') return commitStep(deps, from, awaitingPerson(state, deps.now()));
  if (state.notBefore && Date.parse(state.notBefore) > deps.now().getTime()) return commitStep(deps, from, waiting(state, 'not_before', deps.now()));
  let current = from;
  if (registration.maxConcurrentRuns !== undefined && !state.slot) {
    const taken = await takeSlot(deps, registration, from);
    if (taken.kind === 'conflict') return taken;
    if (taken.kind === 'full') return commitStep(deps, from, waiting(state, 'capacity', deps.now()));
    current = taken;
  }
  return submitHeld(deps, current, message, inHand, registration);
}

/** Commits one step; what it left stored on success. */
export async function commitStep(deps: Pick<SubmitDeps, 'store'>, from: StoredState, next: NextState): Promise<AttemptOutcome> {
  const written = await writeOnce(deps.store, from, next);
  return written.kind === 'written' ? { kind: 'committed', state: written.state, version: written.version } : { kind: 'conflict', existing: written.existing };
}

/**
 * The slot shards of a limited target as stored. Their caps are the registry's to set (`putTarget`, or a
 * deployment) and the monitor's to allot again after a drain: admission only writes them for a target
 * that has none yet — a cached registration must never raise a limit that was lowered.
 */
export async function shardsOf(deps: Pick<SubmitDeps, 'store'>, registration: TargetRegistration): Promise<SlotShard[]> {
  const shards = await deps.store.slotShards(registration.name);
  if (shards.length > 0 || registration.maxConcurrentRuns === undefined) return shards;
  // Only if the target still has none: this registration may be a cached one, older than caps set since.
  await deps.store.syncSlotCaps(registration.name, registration.maxConcurrentRuns, { onlyIfNone: true });
  return deps.store.slotShards(registration.name);
}

/** The open shards, starting from one spread by dispatch id (so concurrent admissions rarely collide on one counter). */
function openShards(shards: readonly SlotShard[], dispatchId: string): SlotShard[] {
  const open = shards.filter((shard) => shard.held < shard.cap);
  if (open.length <= 1) return open;
  let spread = 0;
  for (const char of dispatchId) spread = (spread * 31 + char.charCodeAt(0)) >>> 0;
  const start = spread % open.length;
  return [...open.slice(start), ...open.slice(0, start)];
}

async function takeSlot(
  deps: SubmitDeps,
  registration: TargetRegistration,
  from: StoredState,
): Promise<{ readonly kind: 'taken'; readonly state: DispatchState; readonly version: number } | { readonly kind: 'full' } | { readonly kind: 'conflict'; readonly existing?: DispatchState | undefined }> {
  const { state } = from;
  const shards = await shardsOf(deps, registration);
  // Others already wait: this one joins them, so priority and fairness stay the queue's to decide.
  if (state.waitingFor !== 'capacity' && (await deps.store.countWaiting(registration.name, 1)) > 0) return { kind: 'full' };
  for (const shard of openShards(shards, state.dispatchId)) {
    const written = await writeOnce(deps.store, from, admitted(state, shard.shard, deps.now(), deps.claimSeconds));
    if (written.kind === 'written') {
      crashPoint('submit.after_slot_taken', state.dispatchId);
      return { kind: 'taken', state: written.state, version: written.version };
    }
    if (written.reason === 'conflict') return { kind: 'conflict', existing: written.existing };
  }
  return { kind: 'full' };
}

/**
 * Submits a dispatch the caller holds (claimed, with its slot if its target has a limit) and commits
 * what the answer means. When the dispatch changed meanwhile — its origin cancelled it while the call
 * was under way — the run the target just made is asked to cancel: no run is left unwatched.
 */
export async function submitHeld(deps: SubmitDeps, from: StoredState, message: AcceptedMessage, inHand?: Record<string, unknown>, known?: TargetRegistration): Promise<AttemptOutcome> {
  const held = from.state;
  // The registration the caller already read, or this target's now.
  const registration = known ?? (await deps.store.getTarget(held.target));
  if (!registration) return commitStep(deps, from, blocked(held, 'unknown_target', `no target named "${held.target}" is registered`, deps.now()));
  const attempt = await submitAttempt(deps, registration, held, message, inHand);
  const { outcome } = attempt;
  // Cancelled while a lapsed submission's claim was being taken over: a run the target has is found by
  // the same Idempotency-Key (and then asked to cancel); no run, and the dispatch ends never submitted.
  const next = held.cancel && outcome && outcome.kind !== 'accepted' ? cancelledBeforeSubmission(held, held.cancel, deps.now()) : attempt.next;
  const written = await commitStep(deps, from, next);
  if (written.kind === 'committed' || !outcome) return written;
  // The origin cancelled while the call was under way: its request was recorded on the accepted state.
  // A run the target made is recorded with it (the cancel is then asked of the target, as for any
  // submitted run); a call that made none ends the dispatch cancelled, never submitted.
  const fresh = await deps.store.getStored(held.dispatchId);
  const now = fresh?.state;
  if (fresh && now?.phase === 'accepted' && now.attempt === held.attempt && now.cancel && !now.runId) {
    const settled = outcome.kind === 'accepted' ? submitted(now, outcome, deps.retryPolicy, deps.now()) : cancelledBeforeSubmission(now, now.cancel, deps.now());
    return commitStep(deps, fresh, settled);
  }
  return written;
}

/**
 * One submission call: the task (inline, in hand, or read back from the blob store), one call with the
 * attempt's Idempotency-Key, and the transition its answer means (not committed: `submitHeld` does).
 *
 * Never throws for what the target or the payload store does: an unreadable payload counts against the
 * retry budget instead of holding the claim forever.
 */
async function submitAttempt(
  deps: SubmitDeps,
  registration: TargetRegistration,
  claimed: DispatchState,
  message: AcceptedMessage,
  inHand?: Record<string, unknown>,
): Promise<{ readonly next: NextState; readonly outcome?: SubmitOutcome }> {
  if (!message.content.valid) return { next: blocked(claimed, 'invalid_fields', 'the accepted message is missing or invalid', deps.now()) };
  const content = message.content;
  const outcome = await taskOf(deps.blobs, message, inHand).then(
    (task) =>
      deps.targetFor(registration).submit({
        dispatchId: claimed.dispatchId,
        attempt: claimed.attempt,
        origin: claimed.origin,
        task,
        expectedEvidence: content.expectedEvidence,
        callbackUrl: deps.callbackUrl,
        timeouts: claimed.timeouts,
        ...(content.traceparent ? { traceparent: content.traceparent } : {}),
      }),
    (error: unknown) => ({ kind: 'unavailable' as const, reason: `the task payload could not be read: ${error instanceof Error ? error.name : 'error'}` }),
  );
  if (outcome.kind === 'accepted') crashPoint('submit.after_target_accepted', claimed.dispatchId);
  return { next: submitted(claimed, outcome, deps.retryPolicy, deps.now()), outcome };
}

/**
 * Admits waiting dispatches of `target` while it has free slots (CONTRACT §11): the highest priority
 * first, round-robin across origins within it (from the origin the shard admitted last), oldest first
 * within an origin; each taken in the write that claims it, then submitted. Called by the monitor each
 * tick and right after a write that freed a slot. Returns how many it admitted.
 */
export async function admitWaiting(deps: SubmitDeps, target: string, max = 25, stopAt?: Date): Promise<number> {
  // A monitor tick's budget (its `stopTakingAt`): no admission starts after it; the rest wait for the next tick.
  const spent = (): boolean => stopAt !== undefined && deps.now().getTime() >= stopAt.getTime();
  const registration = await deps.store.getTarget(target);
  let count = 0;
  const exclude = new Set<string>();
  if (!registration) {
    // Its target is gone: the waiting are blocked (each hears back), not left waiting for nothing.
    for (let entry = await deps.store.nextWaiting(target, null, exclude); entry && exclude.size < max; entry = await deps.store.nextWaiting(target, null, exclude)) {
      exclude.add(entry.dispatchId);
      const stored = await deps.store.getStored(entry.dispatchId);
      const state = stored?.state;
      if (stored && state?.phase === 'accepted' && state.waitingFor === 'capacity') await commitStep(deps, stored, blocked(state, 'unknown_target', `no target named "${target}" is registered`, deps.now()));
    }
    return 0;
  }
  // A target drained by a lower limit (or allotted off the even spread by a change) gets its caps
  // allotted again once what is in flight allows (CONTRACT §11: nothing new until under the limit).
  if (registration.maxConcurrentRuns !== undefined && wantsAllotment(await shardsOf(deps, registration))) await deps.store.settleSlotCaps(target);
  for (let round = 0; count < max && round < max * 3 && !spent(); round += 1) {
    let shard: SlotShard | undefined;
    if (registration.maxConcurrentRuns !== undefined) {
      const open = (await shardsOf(deps, registration)).filter((candidate) => candidate.held < candidate.cap);
      // The roomiest shard (its round-robin pointer decides among origins).
      shard = open.sort((a, b) => b.cap - b.held - (a.cap - a.held))[0];
      if (!shard) break;
    }
    const entry = await deps.store.nextWaiting(target, shard?.lastOrigin ?? null, exclude);
    if (!entry) break;
    const stored = await deps.store.getStored(entry.dispatchId);
    const state = stored?.state;
    // The index is a moment behind: an entry already admitted or cancelled is passed over.
    if (!stored || !state || state.phase !== 'accepted' || state.waitingFor !== 'capacity' || state.target !== target) {
      exclude.add(entry.dispatchId);
      continue;
    }
    const written = await writeOnce(deps.store, stored, shard ? admitted(state, shard.shard, deps.now(), deps.claimSeconds) : submissionClaimed(state, deps.now(), deps.claimSeconds));
    if (written.kind !== 'written') {
      // A shard found full is tried again from the next one; a dispatch someone else changed is passed over.
      if (written.reason === 'conflict') exclude.add(entry.dispatchId);
      continue;
    }
    crashPoint('submit.after_slot_taken', state.dispatchId);
    const message = await deps.store.getAcceptedMessage(state.dispatchId);
    if (message) await submitHeld(deps, written, message, undefined, registration);
    else await commitStep(deps, written, blocked(written.state, 'invalid_fields', 'the accepted message is missing or invalid', deps.now()));
    count += 1;
  }
  return count;
}
