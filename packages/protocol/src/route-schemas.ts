/**
 * Every route of ROUTES with its schemas (`@dispatch-ledger/protocol/route-schemas`): what its body and
 * query may be (strict: the ledger refuses what these refuse) and what it answers (lenient, as
 * `./answers.ts` explains). The client checks each request against this table before sending it and
 * reads each answer with it. A table of every schema, so it is for clients and docs: a Lambda bundle
 * imports the single schemas it parses with from `./requests.ts`, and carries no others.
 */
import * as z from 'zod/mini';
import type { RouteName } from './routes.js';
import { ROUTE_DOCS } from './route-docs.js';
import { AttentionAnswer, ClaimAnswer, DispatchViewAnswer, HistoryEntryAnswer, InboxEntryAnswer, ObjectAnswer, pageOf, RejectionAnswer, RunControlAnswer, SettleAnswer } from './answers.js';
import {
  AckBody,
  ApprovalBody,
  AttentionQuery,
  CancelBody,
  ClaimBody,
  CursorQuery,
  EvidenceStatusBody,
  HistoryQuery,
  InboxListQuery,
  ManualAttestationBody,
  OperatorListQuery,
  OperatorReceiptBody,
  PageQuery,
  RedispatchBody,
  ReleaseBody,
  RenewBody,
  RunEventBody,
  SlotReleaseBody,
} from './requests.js';

export interface RouteSchemas<A> {
  /** The JSON body it takes (built on first use), when it takes one. */
  readonly body?: () => z.ZodMiniType;
  /** Its query (every list's), read as typed values (`queryValues`: `limit` a number). */
  readonly query?: () => z.ZodMiniObject;
  readonly answer: z.ZodMiniType<A>;
}

const page = /* @__PURE__ */ pageOf(ObjectAnswer);

export const ROUTE_SCHEMAS = {
  getDispatch: { answer: DispatchViewAnswer },
  listReceipts: { query: CursorQuery, answer: page },
  listOperatorReceipts: { query: CursorQuery, answer: page },
  listManualAttestations: { query: CursorQuery, answer: page },
  listRuns: { query: CursorQuery, answer: page },
  decideApproval: { body: ApprovalBody, answer: ObjectAnswer },
  recordReceipt: { body: OperatorReceiptBody, answer: ObjectAnswer },
  redispatch: { body: RedispatchBody, answer: ObjectAnswer },
  cancel: { body: CancelBody, answer: ObjectAnswer },
  evidenceStatus: { body: EvidenceStatusBody, answer: ObjectAnswer },
  attestManual: { body: ManualAttestationBody, answer: ObjectAnswer },
  putEvidence: { answer: ObjectAnswer },
  getTask: { answer: ObjectAnswer },
  postRunEvent: { body: RunEventBody, answer: ObjectAnswer },
  getRunControl: { answer: RunControlAnswer },
  releaseSlot: { body: SlotReleaseBody, answer: ObjectAnswer },
  history: { query: HistoryQuery, answer: /* @__PURE__ */ pageOf(HistoryEntryAnswer) },
  originRejections: { query: PageQuery, answer: /* @__PURE__ */ pageOf(RejectionAnswer) },
  inboxClaim: { body: ClaimBody, answer: ClaimAnswer },
  inboxAck: { body: AckBody, answer: SettleAnswer },
  inboxRelease: { body: ReleaseBody, answer: SettleAnswer },
  inboxRenew: { body: RenewBody, answer: SettleAnswer },
  inboxList: { query: InboxListQuery, answer: /* @__PURE__ */ pageOf(InboxEntryAnswer) },
  inboxBody: { answer: /* @__PURE__ */ z.unknown() },
  listDispatches: { query: OperatorListQuery, answer: /* @__PURE__ */ pageOf(HistoryEntryAnswer) },
  counts: { answer: ObjectAnswer },
  attention: { query: AttentionQuery, answer: /* @__PURE__ */ pageOf(AttentionAnswer) },
  rejections: { query: PageQuery, answer: /* @__PURE__ */ pageOf(RejectionAnswer) },
} as const satisfies { readonly [N in RouteName]: RouteSchemas<unknown> };

/** What a route answers, as the client reads it. */
export type AnswerOf<N extends RouteName> = z.output<(typeof ROUTE_SCHEMAS)[N]['answer']>;

/**
 * The query parameters a route reads: a list's are its schema's fields; a route whose query is no list's
 * (a view's `refresh`, a target's `runId`) names them in ROUTE_DOCS.
 */
export function queryNamesOf(name: RouteName): readonly string[] {
  const schemas: RouteSchemas<unknown> = ROUTE_SCHEMAS[name];
  return schemas.query ? Object.keys(schemas.query().shape) : (ROUTE_DOCS[name].query ?? []);
}
