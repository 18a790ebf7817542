/**
 * What the API answers (docs/protocol.md §2, §10, §11), as zod/mini schemas read leniently: objects keep
 * fields this version does not know, and enum-like fields are strings, so an answer from a newer ledger
 * parses; only a field every version has is required. `@dispatch-ledger/client` parses with these.
 */
import * as z from 'zod/mini';
import './english.js';

const nullableString = /* @__PURE__ */ z.nullable(z.string());
const cursor = /* @__PURE__ */ z.optional(z.nullable(z.string()));

/** A page of a list: its items and the cursor to the next page (null: none). */
export const pageOf = <T extends z.core.SomeType>(item: T) => z.looseObject({ items: z.array(item), cursor });

/** `GET /dispatches/{id}`: the dispatch view. Its three claims are kept apart: execution, evidence, owner delivery. */
export const DispatchViewAnswer = /* @__PURE__ */ z.looseObject({
  dispatchId: z.string(),
  origin: z.string(),
  target: z.string(),
  phase: z.string(),
  attempt: z.number(),
  runId: nullableString,
  blockedReason: z.optional(nullableString),
  execution: z.looseObject({
    status: nullableString,
    nativeStatus: z.optional(nullableString),
    monitorStatus: z.optional(nullableString),
    lastActivityAt: z.optional(nullableString),
    completedAt: z.optional(nullableString),
    /** The run's result as the ledger keeps it: a summary preview (docs/protocol.md's bounds); its body is the inbox's. */
    result: z.optional(z.nullable(z.looseObject({ summary: z.optional(z.string()) }))),
  }),
  evidence: z.looseObject({ outcome: z.string() }),
  ownerDelivery: z.looseObject({ state: z.string(), basis: z.optional(nullableString) }),
  receipts: z.array(z.unknown()),
  /** The current attempt's result in its origin's inbox (docs/protocol.md §10); null before it exists or when detached. */
  result: z.optional(z.nullable(z.looseObject({ resultId: z.string(), state: z.string(), deliveryAttempts: z.number() }))),
});

/** An entry of an origin's history (`GET /origins/{o}/dispatches`) or the operator's list (`GET /dispatches`, with `origin`). */
export const HistoryEntryAnswer = /* @__PURE__ */ z.looseObject({ dispatchId: z.string(), target: z.string(), phase: z.string(), status: nullableString });

/** A refused message (`GET /origins/{o}/rejections`, `GET /rejections`). */
export const RejectionAnswer = /* @__PURE__ */ z.looseObject({ reason: z.string() });

/** An attention entry (`GET /attention`): a dispatch, or a target at capacity. */
export const AttentionAnswer = /* @__PURE__ */ z.looseObject({ kind: z.string() });

/** One result a claim hands out (`POST /origins/{o}/inbox/claim`). */
export const ClaimedResultAnswer = /* @__PURE__ */ z.looseObject({
  resultId: z.string(),
  dispatchId: z.string(),
  attempt: z.number(),
  deliveryAttempts: z.number(),
  execution: z.looseObject({ status: nullableString }),
});

/** An empty claim is `{ claimToken: null, results: [] }` (docs/protocol.md §10): its lease may be left out. */
export const ClaimAnswer = /* @__PURE__ */ z.looseObject({ claimToken: nullableString, leaseExpiresAt: z.optional(nullableString), results: z.array(ClaimedResultAnswer) });

/** A result as ack, release and renew leave it. */
export const SettleAnswer = /* @__PURE__ */ z.looseObject({ resultId: z.string(), state: z.string(), deliveryAttempts: z.number() });

/** An inbox entry (`GET /origins/{o}/inbox`). */
export const InboxEntryAnswer = /* @__PURE__ */ z.looseObject({ resultId: z.string(), state: z.string() });

/** `GET /runs/{runId}/control` (a lambda run's control record): superseded, asked to cancel, its approval decided. */
export const RunControlAnswer = /* @__PURE__ */ z.looseObject({ superseded: z.boolean(), cancelRequested: z.boolean() });

/** Any answer whose fields the client passes through as they are (a receipt, an attestation, counts…). */
export const ObjectAnswer = /* @__PURE__ */ z.looseObject({});

export type DispatchView = z.infer<typeof DispatchViewAnswer>;
export type HistoryEntry = z.infer<typeof HistoryEntryAnswer>;
export type Rejection = z.infer<typeof RejectionAnswer>;
export type AttentionEntry = z.infer<typeof AttentionAnswer>;
export type ClaimedResult = z.infer<typeof ClaimedResultAnswer>;
export type Claim = z.infer<typeof ClaimAnswer>;
export type SettledResult = z.infer<typeof SettleAnswer>;
export type RunControl = z.infer<typeof RunControlAnswer>;
export type InboxEntry = z.infer<typeof InboxEntryAnswer>;
