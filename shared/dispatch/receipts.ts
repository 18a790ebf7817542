import * as z from 'zod/mini';
import { OPERATOR_RECEIPT_KINDS, OPERATOR_RECEIPT_STATES, type OperatorReceiptKind, type OperatorReceiptState } from '@dispatch-ledger/protocol';
import { checkReceiptClaim, ReceiptNote, RecordId, RunIdText, VerifiedBy, type OperatorReceiptBody } from '@dispatch-ledger/protocol/requests';
import '@dispatch-ledger/protocol/english';
import { lazy } from '../lazy.js';
import { contentHash } from './canonical.js';
import { DISPATCH_ID, ORIGIN } from './ids.js';
import type { DispatchReceipt } from './state.js';

/**
 * Receipts (CONTRACT §5): the dispatch receipts the ledger appends to a dispatch's state, and the
 * operator receipts people record about it. Both are validated whenever they are read for the gate:
 * a stored receipt that fails these schemas is an audit failure, never skipped.
 *
 * Every schema here is built on its first use (call it: `StoredOperatorReceipt().safeParse(…)`): a
 * function that imports this module for a type or a helper, as most do, never builds them at cold start.
 */

/** The kinds of operator receipt and their states: the protocol's words. */
export { RECORD_ID as RECEIPT_ID, OPERATOR_RECEIPT_KINDS, OPERATOR_RECEIPT_STATES, STATES_OF_KIND, type OperatorReceiptKind, type OperatorReceiptState } from '@dispatch-ledger/protocol';
/** The body of `POST /dispatches/{dispatchId}/receipts`, as the protocol declares it. */
export { OperatorReceiptBody } from '@dispatch-ledger/protocol/requests';

/** What an operator receipt rests on: a person's word, not something the platform checked. */
export const OPERATOR_ATTESTATION = 'operator_attestation';

/** One operator receipt as stored: one item per receipt, written once (CONTRACT §5). */
export interface OperatorReceipt {
  readonly receiptId: string;
  readonly dispatchId: string;
  readonly origin: string;
  readonly runId: string;
  readonly kind: OperatorReceiptKind;
  readonly state: OperatorReceiptState;
  readonly evidenceRef: string | null;
  readonly verifiedBy: string;
  readonly note: string | null;
  readonly basis: typeof OPERATOR_ATTESTATION;
  readonly recordedAt: string;
  /**
   * The principal id of the caller that recorded it (CONTRACT §5 v2): its IAM identity in AWS
   * (`AROA…:session`), `local:<origin>` on the local platform. Unlike `verifiedBy` (free text the caller
   * writes) the ledger sets it. Absent on receipts stored before v2.
   */
  readonly recordedBy?: string;
  /**
   * `contentHash` of what the operator submitted (see `receiptPayload`): an identical retry has the same.
   * `recordedBy` is not in it: a retry from another session of the same role (a renewed credential is
   * another session id) is the same receipt, and the first recorder stands.
   */
  readonly payloadHash: string;
}

/** A receipt's id (an attestation's too): chosen by the person recording it, unique within its dispatch. */
export const recordId = RecordId;

/** What the payload hash covers: the submitted fields, an absent optional field the same as null. */
export function receiptPayload(body: OperatorReceiptBody | OperatorReceipt) {
  return {
    receiptId: body.receiptId,
    runId: body.runId,
    kind: body.kind,
    state: body.state,
    evidenceRef: body.evidenceRef ?? null,
    verifiedBy: body.verifiedBy,
    note: body.note ?? null,
  };
}

/**
 * The receipt to store for a validated body: bound to the dispatch and its origin, with its payload
 * hash, and `recordedBy` the caller's principal id (the API always gives it).
 */
export function operatorReceipt(dispatch: { readonly dispatchId: string; readonly origin: string }, body: OperatorReceiptBody, now: Date, recordedBy?: string): OperatorReceipt {
  const payload = receiptPayload(body);
  return {
    ...payload,
    dispatchId: dispatch.dispatchId,
    origin: dispatch.origin,
    basis: OPERATOR_ATTESTATION,
    recordedAt: now.toISOString(),
    ...(recordedBy === undefined ? {} : { recordedBy }),
    payloadHash: contentHash(payload),
  };
}

/** An ISO 8601 instant with a zone, as the ledger writes them (a regex: z.iso costs ~2.4 KB of the API bundle). */
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;
export const instant = /* @__PURE__ */ lazy(() => z.string().check(
  z.regex(ISO_INSTANT, 'an ISO 8601 date-time with a zone'),
  z.refine((value) => !Number.isNaN(Date.parse(value)), 'not a real date-time'),
));

/** What every record people wrote (operator receipts, manual attestations) carries as stored. */
export const recordedBy = /* @__PURE__ */ lazy(() => z.string().check(z.minLength(1), z.maxLength(256)));
export const storedRecordFields = /* @__PURE__ */ lazy(() => ({
  dispatchId: z.string().check(z.regex(DISPATCH_ID)),
  origin: z.string().check(z.regex(ORIGIN)),
  recordedAt: instant(),
  payloadHash: z.string().check(z.regex(/^sha256:[0-9a-f]{64}$/)),
}));

/** A stored operator receipt, as read back: its payload hash must still match what it says. */
export const StoredOperatorReceipt = /* @__PURE__ */ lazy(() => z
  .strictObject({
    receiptId: RecordId(),
    ...storedRecordFields(),
    runId: RunIdText(),
    kind: z.enum(OPERATOR_RECEIPT_KINDS),
    state: z.enum(OPERATOR_RECEIPT_STATES),
    evidenceRef: z.nullable(z.string()),
    verifiedBy: VerifiedBy(),
    note: z.nullable(ReceiptNote()),
    basis: z.enum([OPERATOR_ATTESTATION]),
    recordedBy: z.optional(recordedBy()),
  })
  .check(
    z.superRefine(checkReceiptClaim),
    z.superRefine((receipt, ctx) => {
      // Tampering or a partial write shows as a hash that no longer matches the fields it covers.
      if (contentHash(receiptPayload(receipt)) !== receipt.payloadHash) {
        ctx.addIssue({ code: 'custom', path: ['payloadHash'], message: 'does not match the receipt it covers' });
      }
    }),
  ));


/**
 * A stored dispatch receipt (CONTRACT §5): what the ledger itself appended to the state. One strict
 * schema per `event`, chosen by it — a discriminated union by hand, because zod's costs ~3.6 KB of
 * the API bundle; the messages stay field-specific.
 */
const DISPATCH_RECEIPT_SCHEMAS = /* @__PURE__ */ lazy(() => {
  const at = instant();
  const attempt = z.int().check(z.minimum(1));
  return {
    dispatch_written: z.strictObject({ event: z.enum(['dispatch_written']), at, attempt }),
    dispatch_submitted: z.strictObject({ event: z.enum(['dispatch_submitted']), at, attempt, runId: z.string().check(z.minLength(1)), requestId: z.string().check(z.minLength(1)) }),
    dispatch_blocked: z.strictObject({ event: z.enum(['dispatch_blocked']), at, attempt, reason: z.string().check(z.minLength(1)) }),
    dispatch_completed: z.strictObject({ event: z.enum(['dispatch_completed']), at, attempt, runId: z.string().check(z.minLength(1)), evidenceCount: z.int().check(z.minimum(0)) }),
  };
});
type DispatchReceiptEvent = keyof ReturnType<typeof DISPATCH_RECEIPT_SCHEMAS>;
const EventOnly = /* @__PURE__ */ lazy(() => z.object({ event: z.enum(Object.keys(DISPATCH_RECEIPT_SCHEMAS()) as [DispatchReceiptEvent, ...DispatchReceiptEvent[]]) }));
type StoredDispatchReceiptValue = z.output<ReturnType<typeof DISPATCH_RECEIPT_SCHEMAS>[DispatchReceiptEvent]>;

export const StoredDispatchReceipt = {
  safeParse(value: unknown): { readonly success: true; readonly data: StoredDispatchReceiptValue } | { readonly success: false; readonly error: z.core.$ZodError } {
    const tagged = EventOnly().safeParse(value);
    if (!tagged.success) return { success: false, error: tagged.error };
    const result = DISPATCH_RECEIPT_SCHEMAS()[tagged.data.event].safeParse(value);
    return result.success ? { success: true, data: result.data } : { success: false, error: result.error };
  },
};
// Both directions: a receipt added to DispatchReceipt without a schema here fails the build.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const dispatchReceiptSchemaComplete: Same<StoredDispatchReceiptValue['event'], DispatchReceipt['event']> = true;
void dispatchReceiptSchemaComplete;

/** `field: message; …` of a failed validation, for an audit reason people can act on. */
export function validationProblems(error: z.core.$ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : '(receipt)'}: ${issue.message}`)
    .join('; ');
}
