import { randomBytes } from 'node:crypto';
import { canonicalJson, contentHash } from '../dispatch/canonical.js';
import { clip } from '../text.js';
import { crashPoint } from '../faults.js';
import { DEFAULT_TIMEOUTS, notBeforeProblem, readDispatchMessage, type DispatchMessage, type FieldError, type ReadMessage } from '../dispatch/message.js';
import type { DispatchState, NextState } from '../dispatch/state.js';
import { accepted } from '../dispatch/transitions/lifecycle.js';
import { blocked } from '../dispatch/transitions/core.js';
import { notStored, type BlobStore, type DispatchWorkDeps, type LedgerStoreWithWrites } from '../ledger/port.js';
import type { AcceptedMessage, Rejection, RejectionAudience } from '../dispatch/records.js';
import { effectiveSender, mayActForOrigin, type PrincipalMode, type PrincipalRegistry } from '../principals/principals.js';
import { commitStep, startAttempt, type AttemptOutcome } from './submit-attempt.js';
import { childAfter, parentOf } from './lineage.js';
import { OBJECTS } from '../ledger/objects.js';

/** One SQS record, as intake sees it. */
export interface IntakeRecord {
  readonly messageId: string;
  readonly body: string;
  /** SQS `SenderId`: the IAM identity that sent the message. */
  readonly senderId: string | undefined;
  /** The first sender of a message an operator moved back from the DLQ (message attribute `REDRIVEN_FOR`). */
  readonly redrivenFor?: string | undefined;
  /** SQS `SentTimestamp`, as an instant: when the origin sent it (waiting dispatches are admitted oldest first by it). */
  readonly sentAt?: string | undefined;
}

export type IntakeResult =
  | {
      readonly outcome: 'submitted' | 'retrying' | 'blocked' | 'duplicate' | 'waiting';
      readonly dispatchId: string;
      readonly target: string;
      readonly reason?: string;
      /** The message's W3C trace context, for the handler's log line (CONTRACT §1 v2). */
      readonly traceparent?: string;
    }
  | { readonly outcome: 'rejected'; readonly reason: Rejection['reason']; readonly dispatchId?: string };

/** What the monitor and the API need, and who may speak for which origin. `claimSeconds`: how long a writer is presumed busy before a duplicate takes over. */
export interface IntakeDeps extends DispatchWorkDeps {
  /** Intake writes the accepted message, its claims and rejections (`LedgerWrites`). */
  readonly store: LedgerStoreWithWrites;
  readonly principals: PrincipalRegistry;
  readonly principalMode: PrincipalMode;
}

/**
 * A duplicate delivery arrived while the first is still being handled. Thrown so the record is
 * reported back to SQS and redelivered after the visibility timeout — never acknowledged while the
 * work it carries is not yet recorded.
 */
export class DispatchInProgressError extends Error {
  override readonly name = 'DispatchInProgressError';
  constructor(readonly dispatchId: string) {
    super(`dispatch ${dispatchId} is being written by another delivery`);
  }
}

/** Bodies and task payloads up to this size are kept in the item; larger ones go to the blob store. */
export const INLINE_BYTES = 8 * 1024;
/** Previews shown in rejections, views and items: bounded whatever the message. */
export const PREVIEW_CHARS = 512;

const preview = (text: string): string => clip(text, PREVIEW_CHARS + 1);

/** Keeps the original bytes a person may need: inline when small, in the blob store when not. */
async function keepBody(blobs: BlobStore, key: string, body: string): Promise<{ bodyPreview: string; bodyRef: string | null; bodyBytes: number }> {
  const bodyBytes = Buffer.byteLength(body, 'utf8');
  if (bodyBytes <= INLINE_BYTES) return { bodyPreview: body, bodyRef: null, bodyBytes };
  await blobs.put(key, body, 'application/octet-stream');
  return { bodyPreview: preview(body), bodyRef: key, bodyBytes };
}

/** Listed for the operator alone: the message speaks for no origin its sender may speak for. */
const OPERATOR_ONLY: RejectionAudience = { origin: false, dispatch: false };

async function reject(
  deps: IntakeDeps,
  record: IntakeRecord,
  reason: Rejection['reason'],
  ids: { dispatchId?: string | undefined; origin?: string | undefined },
  audience: RejectionAudience = OPERATOR_ONLY,
): Promise<IntakeResult> {
  const kept = await keepBody(deps.blobs, OBJECTS.rejectionBody(record.messageId), record.body);
  // Keyed by the SQS message id: a redelivered message finds its rejection already recorded.
  await deps.store.putRejection(
    {
      messageId: record.messageId,
      at: deps.now().toISOString(),
      reason,
      dispatchId: ids.dispatchId ?? null,
      origin: ids.origin ?? null,
      senderId: record.senderId ?? null,
      ...kept,
    },
    audience,
  );
  return { outcome: 'rejected', reason, ...(ids.dispatchId ? { dispatchId: ids.dispatchId } : {}) };
}

/** The message's sender (its first sender, for a DLQ redrive) may speak for `origin`. */
async function speaksFor(deps: IntakeDeps, record: IntakeRecord, origin: string): Promise<boolean> {
  const sender = await effectiveSender(deps.principals, deps.principalMode, record.senderId, record.redrivenFor);
  return mayActForOrigin(deps.principals, deps.principalMode, sender, origin);
}

/** The rules the pure reader cannot check without a clock: `notBefore` at most 30 days ahead (CONTRACT §1 v2). */
function withClockRules(read: ReadMessage, now: Date): ReadMessage {
  if (read.kind !== 'valid' || read.message.notBefore === undefined) return read;
  const problem = notBeforeProblem(read.message.notBefore, now);
  if (!problem) return read;
  const { dispatchId, origin, target } = read.message;
  return { kind: 'invalid', dispatchId, origin, target, errors: [{ field: 'notBefore', message: problem }], parsed: read.parsed };
}

/**
 * Takes one dispatch message to exactly one effect: a submitted (or retrying) dispatch, a blocked
 * dispatch, a duplicate no-op, or a recorded rejection. Safe under redelivery and concurrent
 * duplicates at every step:
 *
 *  1. the accepted message is written once, conditional on the dispatchId being new (the anchor);
 *     a different content or origin under that id is a `conflict` rejection, the original untouched;
 *  2. the hot state is created once, conditional too, after the first submission was tried;
 *  3. a crash between them leaves the anchor without a state: the redelivery (or a duplicate, once the
 *     writer's claim has lapsed) submits again with the same Idempotency-Key and finds the same run.
 */
export async function takeDispatchMessage(deps: IntakeDeps, record: IntakeRecord): Promise<IntakeResult> {
  const read = withClockRules(readDispatchMessage(record.body), deps.now());
  if (read.kind === 'unreadable') {
    // Its origin's own refused message when the origin can be read and the sender may speak for it (CONTRACT §15 v3).
    const own = read.origin !== undefined && (await speaksFor(deps, record, read.origin));
    return reject(deps, record, read.reason, { dispatchId: read.dispatchId, origin: read.origin }, { origin: own, dispatch: false });
  }
  const { dispatchId, origin } = read.kind === 'valid' ? read.message : read;
  if (!(await speaksFor(deps, record, origin))) {
    return reject(deps, record, 'origin_not_allowed', { dispatchId, origin });
  }

  // The same dispatch is the same meaning, not the same spelling: a valid message is hashed as the
  // schema reads it (defaults written out), so a face that spells the defaults out (the MCP server's
  // tools get their input parsed) and one that leaves them out send one dispatch.
  const hash = contentHash(read.kind === 'valid' ? read.message : read.parsed);
  const now = deps.now();
  const anchor = await anchorFor(deps, record, read.kind === 'valid' ? { message: read.message } : { errors: read.errors, target: read.target }, {
    dispatchId,
    origin,
    hash,
    now,
  });
  const written = await deps.store.putAcceptedMessage(anchor);
  let message = anchor;
  if (written.kind === 'exists' && written.existing.claimBy !== anchor.claimBy) {
    const existing = written.existing;
    // An anchor written before that was hashed on the message as sent: that hash still matches (hashed
    // only here, when an anchor exists, not for every message).
    const sameContent = existing.contentHash === hash || (read.kind === 'valid' && existing.contentHash === contentHash(read.parsed));
    if (!sameContent || existing.origin !== origin) {
      // Told to its sender's origin; listed among the dispatch's conflicts only when that origin owns it:
      // another owner's view never names this origin's message, nor this origin's list the owner.
      return reject(deps, record, 'conflict', { dispatchId, origin }, { origin: true, dispatch: existing.origin === origin });
    }
    const state = await deps.store.getState(dispatchId);
    if (state) return { outcome: 'duplicate', dispatchId, target: state.target };
    // Written but no state: another delivery is at work, or one crashed before recording the state.
    // Taken-in work is resumed at any age (a DLQ redrive can come days later): never dropped as old.
    // (A state outlives any redelivery: SQS keeps a message at most 14 days in each queue, the
    // retention starts only when the dispatch is final, and the anchor outlives the state.)
    if (Date.parse(existing.claimUntil) > now.getTime()) throw new DispatchInProgressError(dispatchId);
    const claimUntil = new Date(now.getTime() + deps.claimSeconds * 1000).toISOString();
    const { claimBy } = anchor;
    if (!claimBy || !(await deps.store.renewClaim(dispatchId, existing.claimUntil, claimUntil, claimBy))) throw new DispatchInProgressError(dispatchId);
    message = { ...existing, claimUntil, claimBy };
  }
  crashPoint('intake.after_claim', dispatchId);
  return firstSubmission(deps, message, read.kind === 'valid' ? read.message.task : undefined, record.sentAt);
}

async function anchorFor(
  deps: IntakeDeps,
  record: IntakeRecord,
  content: { message: DispatchMessage } | { errors: readonly FieldError[]; target: string | null },
  ids: { dispatchId: string; origin: string; hash: string; now: Date },
): Promise<AcceptedMessage> {
  const base = {
    dispatchId: ids.dispatchId,
    origin: ids.origin,
    contentHash: ids.hash,
    messageId: record.messageId,
    senderId: record.senderId ?? null,
    receivedAt: ids.now.toISOString(),
    claimUntil: new Date(ids.now.getTime() + deps.claimSeconds * 1000).toISOString(),
    // This delivery's own: an anchor found with it is this put's, applied with its answer lost.
    claimBy: randomBytes(8).toString('base64url'),
  };
  if ('errors' in content) {
    // Keyed by content too: a conflicting message under the same id can never overwrite the original's bytes.
    const kept = await keepBody(deps.blobs, OBJECTS.invalidBody(ids.dispatchId, ids.hash), record.body);
    return { ...base, content: { valid: false, target: content.target, errors: content.errors, ...kept } };
  }
  const { message } = content;
  const taskJson = canonicalJson(message.task);
  const taskBytes = Buffer.byteLength(taskJson, 'utf8');
  let taskRef: string | null = null;
  if (taskBytes > INLINE_BYTES) {
    // Same key for the same content (a redelivery rewrites identical bytes), another key for other
    // content: a conflicting message under this id can never overwrite the original task.
    taskRef = OBJECTS.task(ids.dispatchId, ids.hash);
    await deps.blobs.put(taskRef, taskJson, 'application/json');
  }
  return {
    ...base,
    content: {
      valid: true,
      target: message.target,
      task: taskRef ? null : message.task,
      taskRef,
      taskPreview: taskRef ? preview(taskJson) : null,
      taskBytes,
      expectedEvidence: message.expectedEvidence,
      deliveryMode: message.delivery.mode,
      timeouts: message.timeouts,
      parentDispatchId: message.parentDispatchId ?? null,
      maxHops: message.maxHops,
      resultDelivery: message.resultDelivery,
      notBefore: message.notBefore ?? null,
      priority: message.priority,
      traceparent: message.traceparent ?? null,
    },
  };
}


async function firstSubmission(deps: IntakeDeps, message: AcceptedMessage, inHand: Record<string, unknown> | undefined, sentAt?: string): Promise<IntakeResult> {
  const now = deps.now();
  const content = message.content;
  if (!content.valid) {
    const detail = content.errors.map((error) => `${error.field}: ${error.message}`).join('; ');
    const start = accepted(
      {
        dispatchId: message.dispatchId,
        origin: message.origin,
        target: content.target ?? 'unknown',
        hop: 0,
        maxHops: 0,
        parentDispatchId: null,
        deliveryMode: 'callback',
        timeouts: DEFAULT_TIMEOUTS,
        writtenAt: message.receivedAt,
      },
      now,
    );
    return record(deps, start, blocked(start, 'invalid_fields', detail, now));
  }

  // Hop is derived from the stored parent, never taken from the sender, and checked before any contact.
  // A parent not recorded, or whose own hop is not known yet, holds the child (CONTRACT §1 V3).
  const lineage = content.parentDispatchId ? await parentOf(deps, content.parentDispatchId, message.origin) : undefined;
  const parent = lineage?.kind === 'recorded' ? lineage.parent : undefined;
  const hop = parent ? parent.hop + 1 : 0;
  const maxHops = parent ? Math.min(parent.maxHops, content.maxHops) : content.maxHops;
  const start = accepted(
    {
      dispatchId: message.dispatchId,
      origin: message.origin,
      target: content.target,
      hop,
      maxHops,
      parentDispatchId: content.parentDispatchId,
      deliveryMode: content.deliveryMode,
      timeouts: content.timeouts,
      writtenAt: message.receivedAt,
      expectedCount: content.expectedEvidence.length,
      ...(content.resultDelivery ? { resultDelivery: content.resultDelivery } : {}),
      ...(content.priority === undefined ? {} : { priority: content.priority }),
      notBefore: content.notBefore ?? null,
      ...(sentAt ? { sentAt } : {}),
    },
    now,
  );
  // Not recorded yet (SQS does not keep order): held, and the monitor looks again until PARENT_WAIT_SECONDS.
  if (lineage && lineage.kind !== 'recorded') return record(deps, start, childAfter(start, lineage, now, deps));
  if (hop > maxHops) return record(deps, start, blocked(start, 'hop_budget_exceeded', `hop ${hop} > maxHops ${maxHops}`, now));
  const traced = content.traceparent ? { traceparent: content.traceparent } : {};
  return { ...outcomeOf(start, await startAttempt(deps, notStored(start), message, inHand)), ...traced };
}

/** Creates the state `state` from `start` (never stored, version 0): another delivery's create first makes this one a duplicate. */
async function record(deps: IntakeDeps, start: DispatchState, state: NextState): Promise<IntakeResult> {
  return outcomeOf(start, await commitStep(deps, notStored(start), state));
}

function outcomeOf(start: DispatchState, attempt: AttemptOutcome): IntakeResult {
  if (attempt.kind === 'conflict') return { outcome: 'duplicate', dispatchId: start.dispatchId, target: attempt.existing?.target ?? start.target };
  const state = attempt.state;
  const outcome = state.phase === 'submitted' ? 'submitted' : state.phase === 'blocked' ? 'blocked' : state.waitingFor ? 'waiting' : 'retrying';
  return {
    outcome,
    dispatchId: state.dispatchId,
    target: state.target,
    ...(state.blockedReason ? { reason: state.blockedReason } : outcome === 'retrying' && state.submission.lastError ? { reason: state.submission.lastError } : outcome === 'waiting' ? { reason: `waiting for ${state.waitingFor ?? ''}` } : {}),
  };
}
