import * as z from 'zod/mini';
import '@dispatch-ledger/protocol/english';
import { DISPATCH_ID, ORIGIN, TARGET_NAME } from '../dispatch/ids.js';
import type { Rejection } from '../dispatch/records.js';
import { OPERATOR_RECEIPT_KINDS, OPERATOR_RECEIPT_STATES, RECEIPT_ID } from '../dispatch/receipts.js';
import { MAX_REASON_CHARS, NATIVE_STATUS, RUN_STATUSES as TARGET_RUN_STATUSES } from '@dispatch-ledger/protocol';

/**
 * The ledger's events (CONTRACT §3): every detail-type published on the bus today, with the schema of
 * its `detail`. The JSON Schemas under `schemas/events/` are generated from these
 * (`npm run schemas`), so the published contract and the code cannot drift apart.
 *
 * Details are strict objects: a field not named here is a bug in the publisher, not an extension.
 */

const REJECTION_REASONS = ['not_json', 'not_an_object', 'too_deep', 'no_readable_dispatch_id', 'no_readable_origin', 'origin_not_allowed', 'conflict'] as const;
// Both directions: a reason added to Rejection without adding it here fails the build.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const rejectionReasonsComplete: Same<(typeof REJECTION_REASONS)[number], Rejection['reason']> = true;
void rejectionReasonsComplete;

const eventId = z
  .string()
  .check(
    z.regex(/^[0-9a-f]{32}$/),
    z.describe('Stable id of this state change: publishing the same change again never yields another eventId. Deduplicate on it.'),
  );
const at = z.iso.datetime().check(z.describe('When the state change was committed (not when it was published).'));
const dispatchId = z.string().check(z.regex(DISPATCH_ID), z.describe('The origin-chosen dispatch id.'));
const origin = z.string().check(z.regex(ORIGIN), z.describe('The profile that commissioned the dispatch.'));
const target = z.string().check(z.regex(TARGET_NAME), z.describe('The registered target that executes the work.'));
const attempt = z.number().check(z.int(), z.minimum(1), z.describe('The submission attempt, numbered from 1.'));
const runId = z.string().check(z.minLength(1), z.describe("The target's run handle (unique within its dispatch)."));
const nativeStatus = z
  .string()
  .check(
    z.regex(NATIVE_STATUS),
    z.describe(
      "The last status the target itself reported, or a lookup returned: one of queued, running, waiting_for_approval, completed, failed, cancelled, or a final run's own word for its status (e.g. worker_restarted; CONTRACT V3 §2).",
    ),
  );
const lastActivityAt = z.nullable(z.iso.datetime()).check(z.describe('The last time the run was heard from.'));
const howToCheck = z.string().check(z.minLength(1), z.describe('A command that looks the run up at its target now.'));

const envelope = { eventId, at };
const dispatchFields = { ...envelope, dispatchId, origin, target, attempt };
const runFields = { ...dispatchFields, runId, nativeStatus };

export const DispatchAcceptedDetail = z.strictObject(dispatchFields);
export const DispatchSubmittedDetail = z.strictObject({ ...dispatchFields, runId });
export const DispatchBlockedDetail = z.strictObject({
  ...dispatchFields,
  runId: z.optional(runId),
  reason: z.string().check(z.minLength(1), z.describe('`code: detail` — why the dispatch is blocked.')),
});
export const MessageRejectedDetail = z.strictObject({
  ...envelope,
  messageId: z.string().check(z.minLength(1), z.describe('The SQS message id of the rejected message.')),
  reason: z.enum(REJECTION_REASONS),
  dispatchId: z.optional(dispatchId).check(z.describe('Present when a dispatchId could be read from the message.')),
  origin: z.optional(origin).check(z.describe('Present when an origin could be read from the message.')),
});
export const RunCompletedDetail = z.strictObject(runFields);
export const RunFailedDetail = z.strictObject(runFields);
export const RunCancelledDetail = z.strictObject(runFields);
export const RunRecoveredDetail = z.strictObject(runFields);
const refs = z.array(z.string().check(z.minLength(1), z.maxLength(512))).check(z.maxLength(32));
export const DispatchHandledDetail = z.strictObject({
  ...dispatchFields,
  runId,
  expected: refs.check(z.describe('The evidence refs the dispatch expected.')),
  missing: refs.check(z.describe('Always empty: every expected file was found.')),
});
export const DispatchOrphanedDetail = z.strictObject({
  ...dispatchFields,
  runId,
  expected: refs.check(z.describe('The evidence refs the dispatch expected.')),
  missing: refs.check(z.describe('The expected refs not found (or not valid) when the grace window closed.')),
});
export const ApprovalRequestedDetail = z.strictObject({
  ...runFields,
  approvalId: z.optional(z.string().check(z.minLength(1))).check(z.describe('The pending approval, to pass to POST /dispatches/{dispatchId}/approval.')),
});
export const RunSupersededDetail = z.strictObject(runFields);
export const RunStalledDetail = z.strictObject({
  ...runFields,
  status: z.literal('unknown'),
  monitorStatus: z.literal('stalled'),
  lastActivityAt,
  howToCheck,
});
export const RunUnobservableDetail = z.strictObject({
  ...runFields,
  status: z.literal('unknown'),
  monitorStatus: z.enum(['lookup_unavailable', 'target_not_found']),
  reason: z.enum(['lookup_unavailable', 'target_not_found']).check(z.describe('Why the run cannot be observed.')),
  lastActivityAt,
  howToCheck,
});
export const ApprovalWaitExpiredDetail = z.strictObject({
  ...runFields,
  status: z.enum([...TARGET_RUN_STATUSES, 'unknown']).check(z.describe('The execution status; the approval stays pending.')),
  monitorStatus: z.literal('approval_wait_expired'),
  lastActivityAt,
  howToCheck,
  approvalId: z.string().check(z.minLength(1), z.describe('The approval still pending (approve or cancel still work).')),
  requestedAt: z.iso.datetime().check(z.describe('When the approval was requested.')),
});
export const ReceiptRecordedDetail = z.strictObject({
  ...envelope,
  dispatchId,
  origin,
  receiptId: z.string().check(z.regex(RECEIPT_ID), z.describe('The operator-chosen receipt id (unique within its dispatch).')),
  kind: z
    .enum(OPERATOR_RECEIPT_KINDS)
    .check(z.describe('What the receipt attests: acceptance of the artifact, or delivery to the owner. Never both.')),
  state: z
    .enum(OPERATOR_RECEIPT_STATES)
    .check(z.describe('accepted or rejected for artifact_acceptance; confirmed or failed for owner_delivery.')),
});

const resultId = z.string().check(z.minLength(1), z.maxLength(160), z.describe('The result of this attempt in the origin\'s inbox (stable per dispatch and attempt).'));
const resultFields = {
  ...dispatchFields,
  runId: z.optional(runId).check(z.describe('Present when the attempt had a run.')),
  resultId,
  resultDelivery: z.enum(['inject', 'after_turn']).check(z.describe('Which claims may take it: inject results also go to an active turn.')),
};
export const ResultReadyDetail = z.strictObject(resultFields);
export const ResultDeliveredDetail = z.strictObject({
  ...resultFields,
  deliveryAttempts: z.number().check(z.int(), z.minimum(0), z.describe('Releases and lapsed leases before the acknowledged claim.')),
});
export const ResultDroppedDetail = z.strictObject({
  ...resultFields,
  reason: z.enum(['attempts', 'expired', 'superseded']).check(z.describe('Why it will never be delivered: too many delivery attempts, older than the origin\'s TTL, or its attempt was superseded.')),
});

export const DispatchCancelledDetail = z.strictObject({
  ...dispatchFields,
  reason: z.string().check(z.maxLength(MAX_REASON_CHARS), z.describe('Why its origin cancelled it (the reason as given, at most the API\'s 500 characters).')),
});

/** Every detail-type with its schema and what it means (the description goes into the JSON Schema). */
export const EVENT_CATALOG = {
  'Dispatch Accepted': { schema: DispatchAcceptedDetail, description: 'A dispatch was written to the ledger (receipt dispatch_written) without being submitted in the same write: blocked, waiting (capacity, notBefore, a person, its parent) or retrying.' },
  'Dispatch Submitted': { schema: DispatchSubmittedDetail, description: 'The target accepted a submission and returned its run handle (receipt dispatch_submitted). When the first submission commits in the same write as the acceptance, it stands for both: no Dispatch Accepted precedes it.' },
  'Dispatch Blocked': { schema: DispatchBlockedDetail, description: 'The dispatch is blocked with a reason (receipt dispatch_blocked).' },
  'Message Rejected': { schema: MessageRejectedDetail, description: 'A message did not become a dispatch: unreadable, not allowed, or conflicting with an existing dispatch.' },
  'Run Completed': { schema: RunCompletedDetail, description: 'The target reported the run completed.' },
  'Run Failed': { schema: RunFailedDetail, description: 'The target reported the run failed.' },
  'Run Cancelled': { schema: RunCancelledDetail, description: 'The target reported the run cancelled.' },
  'Run Recovered': { schema: RunRecoveredDetail, description: 'A lookup at the target found a final result the target never reported.' },
  'Approval Requested': { schema: ApprovalRequestedDetail, description: 'The run waits for its origin to approve or cancel.' },
  'Run Superseded': { schema: RunSupersededDetail, description: 'A forced redispatch superseded this run; its late events are recorded as late.' },
  'Run Stalled': { schema: RunStalledDetail, description: 'No activity for stallAfterSeconds and the target still says the run is active: its status is unknown.' },
  'Run Unobservable': { schema: RunUnobservableDetail, description: 'The run could not be looked up at the target (unavailable, or not found): its status is unknown, never failed.' },
  'Dispatch Handled': { schema: DispatchHandledDetail, description: 'The run completed and the platform found every expected evidence file (receipt dispatch_completed).' },
  'Dispatch Orphaned': { schema: DispatchOrphanedDetail, description: 'The run completed but expected evidence was still missing when deliveryGraceSeconds ran out: done, nothing delivered.' },
  'Approval Wait Expired': { schema: ApprovalWaitExpiredDetail, description: 'A pending approval is older than approvalWaitSeconds; it stays pending.' },
  'Result Ready': { schema: ResultReadyDetail, description: "The attempt's result is in its origin's inbox (written in the same write that settled the attempt)." },
  'Result Delivered': { schema: ResultDeliveredDetail, description: 'The origin acknowledged the result (owner delivery, basis origin_ack).' },
  'Result Dropped': { schema: ResultDroppedDetail, description: 'The result will never be delivered: too many delivery attempts, expired, or superseded by a redispatch. Its payload is kept.' },
  'Dispatch Cancelled': { schema: DispatchCancelledDetail, description: 'Its origin cancelled the dispatch before it was ever submitted: the target never saw it, no slot was taken.' },
  'Receipt Recorded': { schema: ReceiptRecordedDetail, description: 'An operator recorded a receipt (basis operator_attestation): artifact acceptance or owner delivery of a dispatch.' },
} as const;

export type DetailType = keyof typeof EVENT_CATALOG;

/** Every detail-type the ledger publishes today. */
export const DETAIL_TYPES = Object.keys(EVENT_CATALOG) as readonly DetailType[];

export type DetailOf<T extends DetailType> = z.infer<(typeof EVENT_CATALOG)[T]['schema']>;

/**
 * One event as the publisher puts it on the bus (`Source` is always EVENT_SOURCE).
 *
 * @example
 * const event: LedgerEvent = { detailType: 'Run Completed', detail: { eventId, at, dispatchId, origin, target, attempt: 1, runId: 'r-1', nativeStatus: 'completed' } };
 */
export type LedgerEvent = { [T in DetailType]: { readonly detailType: T; readonly detail: DetailOf<T> } }[DetailType];



/** Validates an event's detail against its detail-type's schema (tests, tools; not the hot path). */
export function parseDetail(event: LedgerEvent): z.util.SafeParseResult<unknown> {
  return EVENT_CATALOG[event.detailType].schema.safeParse(event.detail);
}
