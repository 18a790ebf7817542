import * as z from 'zod/mini';
import { MAX_RUN_ID_CHARS } from '@dispatch-ledger/protocol';
import '../zod-english.js';
import { lazy } from '../lazy.js';
import { contentHash } from './canonical.js';
import { DISPATCH_ID, ORIGIN } from './ids.js';
import { refProblem } from './refs.js';
import type { DispatchReceipt } from './state.js';

/**
 * Receipts (CONTRACT §5): the dispatch receipts the ledger appends to a dispatch's state, and the
 * operator receipts people record about it. Both are validated whenever they are read for the gate:
 * a stored receipt that fails these schemas is an audit failure, never skipped.
 *
 * Every schema here is built on its first use (call it: `StoredOperatorReceipt().safeParse(…)`): a
 * function that imports this module for a type or a helper, as most do, never builds them at cold start.
 */

export const RECEIPT_ID = /^[A-Za-z0-9._:-]{1,128}$/;
export const OPERATOR_RECEIPT_KINDS = ['artifact_acceptance', 'owner_delivery'] as const;
export const OPERATOR_RECEIPT_STATES = ['accepted', 'rejected', 'confirmed', 'failed'] as const;
export type OperatorReceiptKind = (typeof OPERATOR_RECEIPT_KINDS)[number];
export type OperatorReceiptState = (typeof OPERATOR_RECEIPT_STATES)[number];

/** Which states each kind takes: an acceptance is never "confirmed", a delivery never "accepted". */
export const STATES_OF_KIND: Readonly<Record<OperatorReceiptKind, readonly OperatorReceiptState[]>> = {
  artifact_acceptance: ['accepted', 'rejected'],
  owner_delivery: ['confirmed', 'failed'],
};

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

const isBlank = (text: string): boolean => text.trim() === '';

/** The rules that tie kind, state and evidenceRef together, for the request body and the stored receipt alike. */
function checkClaim(receipt: { kind: OperatorReceiptKind; state: OperatorReceiptState; evidenceRef?: string | null | undefined }, ctx: z.core.$RefinementCtx): void {
  const allowed = STATES_OF_KIND[receipt.kind];
  if (!allowed.includes(receipt.state)) {
    ctx.addIssue({ code: 'custom', path: ['state'], message: `${receipt.kind} takes state ${allowed.join(' or ')}, not ${receipt.state}` });
  }
  const ref = receipt.evidenceRef;
  if (ref !== null && ref !== undefined) {
    const problem = isBlank(ref) ? 'blank' : refProblem(ref);
    if (problem) ctx.addIssue({ code: 'custom', path: ['evidenceRef'], message: `unsafe evidence ref (${problem})` });
  }
  if (receipt.kind === 'owner_delivery' && receipt.state === 'confirmed' && (ref === null || ref === undefined || isBlank(ref))) {
    ctx.addIssue({ code: 'custom', path: ['evidenceRef'], message: 'a confirmed delivery needs a non-blank evidenceRef' });
  }
}

/** A receipt's id (an attestation's too): chosen by the person recording it, unique within its dispatch. */
export const recordId = /* @__PURE__ */ lazy(() => z.string().check(z.regex(RECEIPT_ID, '1..128 characters of [A-Za-z0-9._:-]')));
const receiptId = recordId;
const runId = /* @__PURE__ */ lazy(() => z.string().check(z.minLength(1), z.maxLength(MAX_RUN_ID_CHARS)));
const verifiedBy = /* @__PURE__ */ lazy(() => z.string().check(z.minLength(1), z.maxLength(128), z.refine((text) => !isBlank(text), 'verifiedBy is blank')));
const note = /* @__PURE__ */ lazy(() => z.string().check(z.maxLength(1000)));

/**
 * The body of `POST /dispatches/{dispatchId}/receipts`. Invalid → 422 (the kind's states, a confirmed
 * delivery without an evidenceRef, an unsafe ref).
 *
 * @example
 * OperatorReceiptBody().parse({ receiptId: 'rc-1', runId: 'r-1', kind: 'owner_delivery', state: 'confirmed', evidenceRef: 'out/report.md', verifiedBy: 'alice' });
 */
export const OperatorReceiptBody = /* @__PURE__ */ lazy(() => z
  .strictObject({
    receiptId: receiptId(),
    runId: runId(),
    kind: z.enum(OPERATOR_RECEIPT_KINDS),
    state: z.enum(OPERATOR_RECEIPT_STATES),
    evidenceRef: z.optional(z.nullable(z.string())),
    verifiedBy: verifiedBy(),
    note: z.optional(z.nullable(note())),
  })
  .check(z.superRefine(checkClaim)));
export type OperatorReceiptBody = z.infer<ReturnType<typeof OperatorReceiptBody>>;

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
    receiptId: receiptId(),
    ...storedRecordFields(),
    runId: runId(),
    kind: z.enum(OPERATOR_RECEIPT_KINDS),
    state: z.enum(OPERATOR_RECEIPT_STATES),
    evidenceRef: z.nullable(z.string()),
    verifiedBy: verifiedBy(),
    note: z.nullable(note()),
    basis: z.enum([OPERATOR_ATTESTATION]),
    recordedBy: z.optional(recordedBy()),
  })
  .check(
    z.superRefine(checkClaim),
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
