/**
 * What each route of ROUTES answers and does: the statuses on success, the errors it gives on purpose
 * (CONTRACT §2: 400 malformed, 403 not the operator, 404 not found or not yours, 409, 413, 422, 502), the
 * query parameters it reads when it has no query schema (a list's are its schema's, in ROUTE_SCHEMAS), and a
 * summary in words. For docs/protocol.md, the client and the tests; apart
 * from the table so that the API's bundle does not carry them.
 */
import type { RouteName } from './routes.js';

export interface RouteDoc {
  readonly ok: readonly number[];
  readonly errors: readonly number[];
  readonly query?: readonly string[];
  readonly summary: string;
}

export const ROUTE_DOCS: Record<RouteName, RouteDoc> = {
  getDispatch: { ok: [200], errors: [400, 404], query: ['refresh'], summary: 'the dispatch view; refresh=true looks the run up at its target first and records what it finds' },
  listReceipts: { ok: [200], errors: [400, 404], summary: "the dispatch's receipts past the view's newest, paged" },
  listOperatorReceipts: { ok: [200], errors: [400, 404], summary: 'the operator receipts past the view’s newest, paged' },
  listManualAttestations: { ok: [200], errors: [400, 404], summary: 'the attestations of a manual dispatch past the view’s newest, paged' },
  listRuns: { ok: [200], errors: [400, 404], summary: 'the runs of every attempt past the view’s newest, paged' },
  decideApproval: { ok: [200], errors: [400, 404, 409, 422, 502], summary: "decides the run's pending approval (approve or cancel), passed on to the target" },
  recordReceipt: { ok: [200, 201], errors: [400, 404, 409, 422], summary: 'records an operator receipt (201 new, 200 the same again)' },
  redispatch: { ok: [202], errors: [400, 404, 409, 422, 502], summary: 'a new attempt, after the current run was looked up (force with a reason fences it)' },
  cancel: { ok: [202], errors: [400, 404, 409, 422], summary: 'cancels the dispatch: at once before submission, else asked of the target until it answers' },
  evidenceStatus: { ok: [200], errors: [400, 404, 409, 422], summary: 'marks an evidence file invalid, superseded or rejected (the gate then fails)' },
  attestManual: { ok: [200, 201], errors: [400, 404, 409, 422], summary: "a person's attestation on a manual dispatch (201 new, 200 the same again)" },
  putEvidence: { ok: [201], errors: [400, 404, 409, 413, 422], query: ['runId'], summary: 'uploads an evidence file of the run (≤ 4 MiB, a safe ref)' },
  getTask: { ok: [200], errors: [400, 404, 409], query: ['runId'], summary: "the run's task, for a target that was sent a task too large to carry" },
  postRunEvent: { ok: [200, 202], errors: [400, 404, 409, 413, 422], summary: 'a run event (202 applied, 200 already known, coalesced or late)' },
  getRunControl: { ok: [200], errors: [400, 404, 409], query: ['dispatchId'], summary: 'whether the run was superseded or asked to cancel, and its pending approval' },
  releaseSlot: { ok: [200], errors: [400, 403, 404, 409, 422, 502], summary: "frees the slot of a run its target no longer knows (looked up first)" },
  history: { ok: [200], errors: [400, 404], summary: "the origin's dispatches, newest first" },
  originRejections: { ok: [200], errors: [400, 404], summary: "the origin's own refused messages, newest first (a conflict included)" },
  inboxClaim: { ok: [200], errors: [400, 404, 409, 422], summary: 'claims results under one claim token for a lease (waitSeconds ≤ 20: a long poll)' },
  inboxAck: { ok: [200], errors: [400, 404, 409, 422], summary: 'the result is delivered: owner delivery confirmed, basis origin_ack' },
  inboxRelease: { ok: [200], errors: [400, 404, 409, 422], summary: 'gives a claimed result back, with a reason (deliveryAttempts + 1)' },
  inboxRenew: { ok: [200], errors: [400, 404, 409, 422], summary: "extends a claimed result's lease" },
  inboxList: { ok: [200], errors: [400, 404], summary: "the origin's results by state, oldest first" },
  inboxBody: { ok: [200], errors: [404], summary: "a result's whole body" },
  listDispatches: { ok: [200], errors: [400, 403], summary: "every origin's dispatches, newest first" },
  counts: { ok: [200], errors: [403], summary: 'dispatches by phase, status and evidence outcome' },
  attention: { ok: [200], errors: [400, 403], summary: 'what needs a person across origins; targets at capacity lead the first page' },
  rejections: { ok: [200], errors: [400, 403], summary: 'every refused message, newest first' },
};
