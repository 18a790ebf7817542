/**
 * What the API takes (`@dispatch-ledger/protocol/requests`): the body or query of every route that reads
 * one (docs/protocol.md §2, §5, §6, §10, §13), as zod/mini schemas, strict — the ledger refuses a field
 * it does not know — and the types inferred from them. The ledger parses with these; the client checks a
 * request with them before sending it, so a request the ledger would refuse never leaves.
 *
 * Each schema is built on its first use (call it: `ClaimBody().safeParse(…)`), not when the module is
 * imported: a Lambda bundle that serves one route never pays for the others at cold start, and one that
 * calls none leaves them out.
 */
import * as z from 'zod/mini';
import './english.js';
import {
  APPROVAL_DECISIONS,
  ATTENTION_KINDS,
  DISPATCH_ID,
  lazy,
  EXECUTION_STATUSES,
  EVIDENCE_STATUSES,
  MANUAL_ATTESTATION_KINDS,
  MAX_APPROVAL_ID_CHARS,
  MAX_CLAIM_RESULTS,
  MAX_CLAIM_TOKEN_CHARS,
  MAX_CURSOR_CHARS,
  MAX_EVIDENCE_REFS,
  MAX_LEASE_SECONDS,
  MAX_LIST_LIMIT,
  MAX_NOTE_CHARS,
  MAX_REASON_CHARS,
  MAX_RESULT_ID_CHARS,
  MAX_CALLBACK_ID_CHARS,
  MAX_RUN_ID_CHARS,
  MAX_SEQ,
  MAX_SUMMARY_CHARS,
  MAX_VERIFIED_BY_CHARS,
  MAX_WAIT_SECONDS,
  MIN_LEASE_SECONDS,
  NATIVE_STATUS,
  NATIVE_STATUS_RULE,
  OPERATOR_RECEIPT_KINDS,
  OPERATOR_RECEIPT_STATES,
  ORIGIN,
  PHASES,
  RECORD_ID,
  RECORD_ID_RULE,
  refProblem,
  RESULT_DELIVERY_MODES,
  RESULT_STATES,
  RUN_EVENT_TYPES,
  STATES_OF_KIND,
  TARGET_NAME,
  type OperatorReceiptKind,
  type OperatorReceiptState,
} from './index.js';


const isBlank = (text: string): boolean => text.trim() === '';
/** A reason a person gives (cancel, redispatch, slot release, evidence mark): not blank, bounded. */
const reason = /* @__PURE__ */ lazy(() => z.string().check(z.trim(), z.minLength(1), z.maxLength(MAX_REASON_CHARS)));
const safeRef = /* @__PURE__ */ lazy(() => z.string().check(z.refine((ref) => refProblem(ref) === undefined, 'unsafe evidence ref')));
const approvalId = /* @__PURE__ */ lazy(() => z.string().check(z.minLength(1), z.maxLength(MAX_APPROVAL_ID_CHARS)));
/** A target's run id. */
export const RunIdText = /* @__PURE__ */ lazy(() => z.string().check(z.minLength(1), z.maxLength(MAX_RUN_ID_CHARS)));
/** A receipt's or an attestation's id. */
export const RecordId = /* @__PURE__ */ lazy(() => z.string().check(z.regex(RECORD_ID, RECORD_ID_RULE)));

// --- The owner's actions on a dispatch (§2, §6) ------------------------------------------------------

/** `POST /dispatches/{id}/cancel`; `ledger mcp`'s `cancel_dispatch` tool takes the same. */
export const CancelBody = /* @__PURE__ */ lazy(() => z.strictObject({ reason: reason() }));
/** `POST /dispatches/{id}/redispatch`; `force` (with a reason) fences a run that may still be active. */
export const RedispatchBody = /* @__PURE__ */ lazy(() => z.strictObject({ reason: reason(), force: z.optional(z.boolean()) }));
/** `POST /dispatches/{id}/approval`. */
export const ApprovalBody = /* @__PURE__ */ lazy(() => z.strictObject({ approvalId: approvalId(), decision: z.enum(APPROVAL_DECISIONS) }));
/** `POST /dispatches/{id}/evidence-status`: one evidence file of the current attempt. */
export const EvidenceStatusBody = /* @__PURE__ */ lazy(() => z.strictObject({ ref: safeRef(), status: z.enum(EVIDENCE_STATUSES), reason: reason() }));

/** The rules that tie an operator receipt's kind, state and evidenceRef together (a stored receipt is held to them too). */
export function checkReceiptClaim(receipt: { kind: OperatorReceiptKind; state: OperatorReceiptState; evidenceRef?: string | null | undefined }, ctx: z.core.$RefinementCtx): void {
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
/** Who verified an operator receipt, in the recorder's words: not blank. */
export const VerifiedBy = /* @__PURE__ */ lazy(() => z.string().check(z.minLength(1), z.maxLength(MAX_VERIFIED_BY_CHARS), z.refine((text) => !isBlank(text), 'verifiedBy is blank')));
/** A note on an operator receipt. */
export const ReceiptNote = /* @__PURE__ */ lazy(() => z.string().check(z.maxLength(MAX_NOTE_CHARS)));
/** The fields an operator receipt is recorded with (a stored receipt has these and the ledger's own). */
export const OPERATOR_RECEIPT_FIELDS = /* @__PURE__ */ lazy(() => ({
  receiptId: RecordId(),
  runId: RunIdText(),
  kind: z.enum(OPERATOR_RECEIPT_KINDS),
  state: z.enum(OPERATOR_RECEIPT_STATES),
  evidenceRef: z.optional(z.nullable(z.string())),
  verifiedBy: VerifiedBy(),
  note: z.optional(z.nullable(ReceiptNote())),
}));
/**
 * `POST /dispatches/{id}/receipts` (§5). Invalid → 422 (the kind's states, a confirmed delivery without
 * an evidenceRef, an unsafe ref).
 *
 * @example
 * OperatorReceiptBody().parse({ receiptId: 'rc-1', runId: 'r-1', kind: 'owner_delivery', state: 'confirmed', evidenceRef: 'out/report.md', verifiedBy: 'alice' });
 */
export const OperatorReceiptBody = /* @__PURE__ */ lazy(() => z.strictObject(OPERATOR_RECEIPT_FIELDS()).check(z.superRefine(checkReceiptClaim)));
export type OperatorReceiptBody = z.infer<ReturnType<typeof OperatorReceiptBody>>;

const attestationNote = /* @__PURE__ */ lazy(() => z.string().check(z.minLength(1), z.maxLength(MAX_NOTE_CHARS), z.refine((text) => !isBlank(text), 'note is blank')));
const attestationRef = /* @__PURE__ */ lazy(() => z.string().check(z.refine((ref) => !isBlank(ref) && refProblem(ref) === undefined, 'unsafe evidence ref')));
/** The fields a manual attestation is recorded with (a stored one has these and the ledger's own). */
export const MANUAL_ATTESTATION_FIELDS = /* @__PURE__ */ lazy(() => ({
  attestationId: RecordId(),
  kind: z.enum(MANUAL_ATTESTATION_KINDS),
  note: attestationNote(),
  evidenceRef: z.optional(z.nullable(attestationRef())),
}));
/**
 * `POST /dispatches/{id}/manual` (§13). Invalid → 422 (an unknown kind, a blank note, an unsafe ref).
 *
 * @example
 * ManualAttestationBody().parse({ attestationId: 'ma-1', kind: 'manual_result_attested', note: 'Alice filed the report by hand', evidenceRef: 'out/report.md' });
 */
export const ManualAttestationBody = /* @__PURE__ */ lazy(() => z.strictObject(MANUAL_ATTESTATION_FIELDS()));
export type ManualAttestationBody = z.infer<ReturnType<typeof ManualAttestationBody>>;

// --- The operator (§11) ------------------------------------------------------------------------------

/** `POST /targets/{target}/slots/release`: the run whose slot to free; `dispatchId` when the caller knows it. */
export const SlotReleaseBody = /* @__PURE__ */ lazy(() => z.strictObject({ runId: RunIdText(), reason: reason(), dispatchId: z.optional(z.string().check(z.regex(DISPATCH_ID))) }));

// --- A target's run events (§2) ----------------------------------------------------------------------

/** `POST /runs/{runId}/events`. A final event may carry the result's body, any JSON (bounded after parsing: MAX_RESULT_BODY_DEPTH). */
export const RunEventBody = /* @__PURE__ */ lazy(() => z.strictObject({
  dispatchId: z.string().check(z.regex(DISPATCH_ID)),
  seq: z.int().check(z.minimum(0), z.maximum(MAX_SEQ)),
  type: z.enum(RUN_EVENT_TYPES),
  approvalId: z.optional(approvalId()),
  // A durable function's approval (CONTRACT §17): its callback id instead of an approvalId, kept apart by the ledger.
  callbackId: z.optional(z.string().check(z.minLength(1), z.maxLength(MAX_CALLBACK_ID_CHARS))),
  result: z.optional(z.strictObject({ summary: z.optional(z.string().check(z.maxLength(MAX_SUMMARY_CHARS))), body: z.optional(z.unknown()) })),
  evidence: z.optional(z.array(safeRef()).check(z.maxLength(MAX_EVIDENCE_REFS))),
  // A final event's own word for its status (e.g. worker_restarted), kept as the view's nativeStatus.
  nativeStatus: z.optional(z.string().check(z.regex(NATIVE_STATUS, NATIVE_STATUS_RULE))),
}));
export type RunEventBody = z.infer<ReturnType<typeof RunEventBody>>;

// --- The origin's inbox (§10) ------------------------------------------------------------------------

/** A result id, as the inbox routes take it. */
export const ResultId = /* @__PURE__ */ lazy(() => z.string().check(z.minLength(1), z.maxLength(MAX_RESULT_ID_CHARS)));
const claimToken = /* @__PURE__ */ lazy(() => z.string().check(z.minLength(1), z.maxLength(MAX_CLAIM_TOKEN_CHARS)));
const leaseSeconds = /* @__PURE__ */ lazy(() => z.int().check(z.minimum(MIN_LEASE_SECONDS), z.maximum(MAX_LEASE_SECONDS)));
/** `POST /origins/{o}/inbox/claim`: `waitSeconds` > 0 is a long poll; `resultIds` claims those only. */
export const ClaimBody = /* @__PURE__ */ lazy(() => z.strictObject({
  mode: z.optional(z.enum(RESULT_DELIVERY_MODES)),
  max: z.optional(z.int().check(z.minimum(1), z.maximum(MAX_CLAIM_RESULTS))),
  leaseSeconds: z.optional(leaseSeconds()),
  waitSeconds: z.optional(z.int().check(z.minimum(0), z.maximum(MAX_WAIT_SECONDS))),
  resultIds: z.optional(z.array(ResultId()).check(z.minLength(1), z.maxLength(MAX_CLAIM_RESULTS))),
}));
export type ClaimBody = z.infer<ReturnType<typeof ClaimBody>>;
/** `POST /origins/{o}/inbox/{resultId}/ack`: the claim token the claim answered. */
export const AckBody = /* @__PURE__ */ lazy(() => z.strictObject({ claimToken: claimToken() }));
/** `POST /origins/{o}/inbox/{resultId}/release`, with why. */
/** A release's reason is optional and not kept; at most MAX_REASON_CHARS, and a blank one is taken (an older client sends an empty error message). */
export const ReleaseBody = /* @__PURE__ */ lazy(() => z.strictObject({ claimToken: claimToken(), reason: z.optional(z.string().check(z.maxLength(MAX_REASON_CHARS))) }));
/** `POST /origins/{o}/inbox/{resultId}/renew`. */
export const RenewBody = /* @__PURE__ */ lazy(() => z.strictObject({ claimToken: claimToken(), leaseSeconds: leaseSeconds() }));

// --- Queries -----------------------------------------------------------------------------------------
// A list's query has its home here: the ledger reads the query string with its list's schema (the
// fields the schema names; it ignores any other) and the client checks one before sending it (it
// refuses any other), both through `queryValues`, so the two agree on every value.

/** A list's cursor, as the list gave it back. */
const cursorField = /* @__PURE__ */ lazy(() => z.optional(z.string().check(z.minLength(1), z.maxLength(MAX_CURSOR_CHARS))));
/** A list's `limit` (DEFAULT_LIST_LIMIT when none is given) and `cursor`. */
const pageFields = /* @__PURE__ */ lazy(() => ({
  limit: z.optional(z.int().check(z.minimum(1), z.maximum(MAX_LIST_LIMIT))),
  cursor: cursorField(),
}));
/**
 * `GET /origins/{o}/dispatches`: `status` is an execution status (`unknown` among them) or a phase.
 * `ledger mcp`'s `dispatch_status` tool takes the same.
 */
export const HistoryQuery = /* @__PURE__ */ lazy(() => z.strictObject({ status: z.optional(z.enum([...EXECUTION_STATUSES, ...PHASES])), ...pageFields() }));
export type HistoryQuery = z.infer<ReturnType<typeof HistoryQuery>>;
/** `GET /dispatches` (the operator's list): each filter exact; `status` also takes `none` (never submitted). */
export const OperatorListQuery = /* @__PURE__ */ lazy(() => z.strictObject({
  status: z.optional(z.enum(['none', ...EXECUTION_STATUSES])),
  phase: z.optional(z.enum(PHASES)),
  target: z.optional(z.string().check(z.regex(TARGET_NAME))),
  origin: z.optional(z.string().check(z.regex(ORIGIN))),
  ...pageFields(),
}));
export type OperatorListQuery = z.infer<ReturnType<typeof OperatorListQuery>>;
/** A list that takes a page and nothing else: an origin's rejections (§15), the operator's. */
export const PageQuery = /* @__PURE__ */ lazy(() => z.strictObject(pageFields()));
export type PageQuery = z.infer<ReturnType<typeof PageQuery>>;
/** `GET /origins/{o}/inbox` (§10): `state` one of RESULT_STATES. */
export const InboxListQuery = /* @__PURE__ */ lazy(() => z.strictObject({ state: z.optional(z.enum(RESULT_STATES)), ...pageFields() }));
export type InboxListQuery = z.infer<ReturnType<typeof InboxListQuery>>;
/** `GET /attention`: `kind` one of ATTENTION_KINDS, or `at_capacity` (the targets at their limit, §11). */
export const AttentionQuery = /* @__PURE__ */ lazy(() => z.strictObject({ kind: z.optional(z.enum([...ATTENTION_KINDS, 'at_capacity'])), ...pageFields() }));
export type AttentionQuery = z.infer<ReturnType<typeof AttentionQuery>>;
/** A dispatch's own lists (its runs, receipts, attestations): pages of a fixed size, newest first; a cursor only. */
export const CursorQuery = /* @__PURE__ */ lazy(() => z.strictObject({ cursor: cursorField() }));
export type CursorQuery = z.infer<ReturnType<typeof CursorQuery>>;

/**
 * A query string's values as a list's schema reads them: `limit` as a number (`Number("abc")` is NaN,
 * which the schema refuses), an empty `cursor` as none (the first page, as the lists have always read
 * `cursor=`: a shell loop's first pass sends it), every other value as it is.
 *
 * @example
 * PageQuery().safeParse(queryValues({ limit: '500' })).success // false: at most MAX_LIST_LIMIT
 */
export function queryValues(values: Readonly<Record<string, unknown>>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(values)
      .filter(([name, value]) => !(name === 'cursor' && value === ''))
      .map(([name, value]) => [name, name === 'limit' && typeof value === 'string' ? Number(value) : value]),
  );
}

/** A list's query string read with its schema (through `queryValues`), or its first problem in words (`limit: …`). */
export function readQuery<S extends z.ZodMiniObject>(schema: S, values: Readonly<Record<string, unknown>>): { readonly ok: true; readonly query: z.output<S> } | { readonly ok: false; readonly problem: string } {
  const parsed = schema.safeParse(queryValues(values));
  if (parsed.success) return { ok: true, query: parsed.data };
  const issue = parsed.error.issues[0];
  return { ok: false, problem: `${String(issue?.path[0])}: ${issue?.message ?? 'not valid'}` };
}
