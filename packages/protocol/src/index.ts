/**
 * `@dispatch-ledger/protocol`: the one home of the wire protocol's statuses, id rules, safe refs and
 * bounds (CONTRACT §15). The ledger (shared/), the worker kit (packages/worker) and the demo agent
 * (local/demo-agent) import these; none of them declares its own.
 *
 * This module imports nothing: the publisher and retention bundles import it and must stay free of zod.
 * The zod schemas built on these rules are in `@dispatch-ledger/protocol/schemas`.
 */

import { randomUUID } from 'node:crypto';

// ---------------------------------------------------------------------------------------------------
// Run statuses (CONTRACT §2 `execution.status`, §8)

/** Statuses a target reports for a run: CONTRACT §2 `execution.status`, minus the ledger's own `unknown`. */
export const RUN_STATUSES = ['queued', 'running', 'waiting_for_approval', 'completed', 'failed', 'cancelled'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/** Final statuses: a run that reached one never leaves it. */
export const FINAL_RUN_STATUSES = ['completed', 'failed', 'cancelled'] as const satisfies readonly RunStatus[];
export type FinalRunStatus = (typeof FINAL_RUN_STATUSES)[number];

export const isFinalRunStatus = (status: RunStatus): status is FinalRunStatus => (FINAL_RUN_STATUSES as readonly RunStatus[]).includes(status);

/**
 * CONTRACT V3 §2: the target's own word for a final status, when it says more than the status — e.g.
 * `worker_restarted` for a run the worker kit failed because its process restarted.
 */
export const NATIVE_STATUS = /^[A-Za-z0-9_.:-]{1,64}$/;
export const NATIVE_STATUS_RULE = 'nativeStatus is 1..64 characters of [A-Za-z0-9_.:-]';

// ---------------------------------------------------------------------------------------------------
// Identifiers (CONTRACT §1, §8)

/** CONTRACT §1: a dispatch id. */
export const DISPATCH_ID = /^[A-Za-z0-9._:-]{1,128}$/;
export const DISPATCH_ID_RULE = '1..128 characters of [A-Za-z0-9._:-]';
/** CONTRACT §1: the agent that commissions work. */
export const ORIGIN = /^[a-z0-9-]{1,64}$/;
/** CONTRACT §8: a registered target's name. */
export const TARGET_NAME = /^[a-z0-9][a-z0-9-]{0,63}$/;
/**
 * A request id taken from a caller's `x-request-id` (or a target's answer) and echoed back: anything
 * else is replaced by one of our own, so no header or log line carries what a caller made up.
 */
export const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/** The request id to answer with: the caller's own `x-request-id` when it is short and inert, else a fresh one (never an arbitrary string echoed back). */
export const requestIdOf = (sent: string | undefined): string => (sent !== undefined && REQUEST_ID.test(sent) ? sent : randomUUID());
/** One path segment (a run id), percent-decoded; a malformed escape is left as typed, so it simply matches no run. */
export function decodePathSegment(segment: string | undefined): string {
  if (segment === undefined) return '';
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
/**
 * CONTRACT §8, §17: a target's run id, as the ledger takes it in a run event path or a lookup: 1..1,024
 * characters, `/` allowed (a durable execution's ARN; a path carries it percent-encoded in one segment).
 */
export const MAX_RUN_ID_CHARS = 1024;

// ---------------------------------------------------------------------------------------------------
// Safe evidence refs (CONTRACT §6)

/**
 * Safe evidence refs (CONTRACT §6): non-empty, POSIX relative, ≤ 512 bytes; no leading `/`, no `\`,
 * no control characters or NUL, no `.` or `..` segment — also when percent-encoded — and no empty segment.
 */
export const MAX_REF_BYTES = 512;

export type RefProblem =
  | 'not_a_string'
  | 'empty'
  | 'too_long'
  | 'absolute'
  | 'backslash'
  | 'control_character'
  | 'empty_segment'
  | 'dot_segment'
  | 'bad_percent_encoding'
  | 'malformed_unicode';

// Every C0 control (NUL included), DEL and the C1 range.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * Why `ref` is unsafe, or `undefined` when it is safe. The ref is checked as given and once
 * percent-decoded (a `%2e%2e` segment is a `..` segment to any URL parser on the way).
 *
 * @example
 * refProblem('out/report.md')  // undefined
 * refProblem('out/../secret')  // 'dot_segment'
 * refProblem('out/%2e%2e/x')   // 'dot_segment'
 * refProblem('/etc/passwd')    // 'absolute'
 */
export function refProblem(ref: unknown): RefProblem | undefined {
  if (typeof ref !== 'string') return 'not_a_string';
  if (ref.length === 0) return 'empty';
  // A lone surrogate has no UTF-8 form: no store or file system can hold that name faithfully.
  if (!isWellFormedUtf16(ref)) return 'malformed_unicode';
  if (Buffer.byteLength(ref, 'utf8') > MAX_REF_BYTES) return 'too_long';
  let decoded: string;
  try {
    decoded = decodeURIComponent(ref);
  } catch {
    return 'bad_percent_encoding';
  }
  for (const form of ref === decoded ? [ref] : [ref, decoded]) {
    if (form.startsWith('/')) return 'absolute';
    if (form.includes('\\')) return 'backslash';
    if (CONTROL.test(form)) return 'control_character';
    const segments = form.split('/');
    if (segments.some((segment) => segment === '')) return 'empty_segment';
    if (segments.some((segment) => segment === '.' || segment === '..')) return 'dot_segment';
  }
  return undefined;
}

export const isSafeRef = (ref: unknown): ref is string => refProblem(ref) === undefined;

function isWellFormedUtf16(text: string): boolean {
  for (let index = 0; index < text.length; index += 1) {
    const unit = text.charCodeAt(index);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(index + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) return false;
      index += 1;
    } else if (unit >= 0xdc00 && unit <= 0xdfff) {
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------
// Bounds

/** CONTRACT §1, §6: at most this many evidence refs expected of a dispatch, or claimed by a run event. */
export const MAX_EVIDENCE_REFS = 32;
/** CONTRACT §1: the longest any of a dispatch's clocks may be (the contract leaves it open): 30 days, in seconds. */
export const MAX_TIMEOUT_SECONDS = 30 * 24 * 3600;
/** CONTRACT §1: a task nests at most this many levels (the task object is level 1). */
export const MAX_TASK_DEPTH = 64;
/** The message object is level 1 of its body and the task level 2: a message body nests at most 65 levels. */
export const MAX_BODY_DEPTH = MAX_TASK_DEPTH + 1;
/**
 * How deep any API body may nest. CONTRACT §2 lets `result.body` be any JSON of ≤ 256 KiB, and a body a
 * few hundred levels deep is still JSON a person could mean; one of 20,000 levels (40 KB) overflowed
 * JSON.stringify's stack. 1,000 levels keeps every recursive walk after intake far from the stack's end.
 */
export const MAX_API_BODY_DEPTH = 1_000;
/** CONTRACT §2: a run event's `result.body` sits two levels inside the event (event → result → body). */
export const MAX_RESULT_BODY_DEPTH = MAX_API_BODY_DEPTH - 2;
/**
 * CONTRACT §2 v2: a final event's `result.body` is any JSON of at most 256 KiB; one evidence file (§2, §6)
 * is at most 4 MiB. The kit refuses more before sending; the ledger answers 413.
 */
export const MAX_RESULT_BODY_BYTES = 256 * 1024;
export const MAX_EVIDENCE_BYTES = 4 * 1024 * 1024;
/** A dispatch message, as the queue is sent it: at most 1 MiB, SQS's maximum (a client refuses more before sending). */
export const MAX_MESSAGE_BYTES = 1024 * 1024;
/** CONTRACT §2: 0 ≤ seq ≤ 2^53 − 1 (the largest integer JSON numbers carry exactly); larger → 422. */
export const MAX_SEQ = Number.MAX_SAFE_INTEGER;
// ---------------------------------------------------------------------------------------------------
// The dispatch message's defaults and rules (CONTRACT §1); its schema is `@dispatch-ledger/protocol/message`.

/** CONTRACT §1's defaults. */
export const DEFAULT_TIMEOUTS = {
  stallAfterSeconds: 600,
  approvalWaitSeconds: 1800,
  deliveryGraceSeconds: 300,
} as const;
/** CONTRACT v2 §1: priorities run 0 (lowest) .. MAX_PRIORITY, DEFAULT_PRIORITY when not given. */
export const DEFAULT_PRIORITY = 5;
export const MAX_PRIORITY = 9;

export const DEFAULT_MAX_HOPS = 4;
/** The most hops a message may allow (the contract leaves it open). */
export const MAX_HOPS_LIMIT = 32;

/** CONTRACT v2 §1: how the result reaches the origin (§10). Any other string reads as `after_turn`. */
export const RESULT_DELIVERY_MODES = ['inject', 'after_turn'] as const;
export type ResultDelivery = (typeof RESULT_DELIVERY_MODES)[number];
export const DEFAULT_RESULT_DELIVERY: ResultDelivery = 'after_turn';
/** The delivery mode a `resultDelivery` string reads as: `inject`, or `after_turn` for anything else. */
export const resultDeliveryOf = (mode: string): ResultDelivery => (mode === 'inject' ? 'inject' : 'after_turn');
/** CONTRACT v2 §1: `notBefore` is at most this many days ahead of the time the intake reads it. */
export const NOT_BEFORE_MAX_DAYS = 30;

// ---------------------------------------------------------------------------------------------------
// The API's vocabularies and request bounds (CONTRACT §2, §5, §10, §13); the request schemas are
// `@dispatch-ledger/protocol/requests`.

/** A dispatch's phase, as its view and lists name it (CONTRACT §2). */
export const PHASES = ['accepted', 'submitted', 'blocked', 'cancelled'] as const;
export type Phase = (typeof PHASES)[number];
/** A dispatch's execution status: what its target last said, or `unknown` once the ledger lost sight of the run (CONTRACT §2). */
export const EXECUTION_STATUSES = [...RUN_STATUSES, 'unknown'] as const;
export type ExecutionStatus = (typeof EXECUTION_STATUSES)[number];
/** The events a target reports of a run (CONTRACT §2): the last three are final. */
export const RUN_EVENT_TYPES = ['heartbeat', 'progress', 'approval_requested', 'completed', 'failed', 'cancelled'] as const;
export type RunEventType = (typeof RUN_EVENT_TYPES)[number];
/** An owner's decision on a pending approval (CONTRACT §2). */
export const APPROVAL_DECISIONS = ['approve', 'cancel'] as const;
export type ApprovalDecision = (typeof APPROVAL_DECISIONS)[number];
/** What an owner may say of one evidence file (CONTRACT §6): anything but `valid` fails the gate. */
export const EVIDENCE_STATUSES = ['valid', 'invalid', 'superseded', 'rejected'] as const;
/**
 * Why a dispatch is on the operator's attention list (CONTRACT §2 v2, §11): each a state a person should look
 * at; `GET /attention?kind=` takes one of these, or `at_capacity` (a target at its limit, not a dispatch).
 */
export const ATTENTION_KINDS = ['unknown', 'approval_wait_expired', 'orphan_no_delivery', 'blocked', 'retrying', 'result_dropped', 'cancel_pending', 'redriven'] as const;
export type AttentionKind = (typeof ATTENTION_KINDS)[number];
/** A result's state in its origin's inbox (CONTRACT §10). */
export const RESULT_STATES = ['pending', 'claimed', 'delivered', 'dropped'] as const;
export type ResultState = (typeof RESULT_STATES)[number];
/** Operator receipts (CONTRACT §5): the two claims a person may record, and the states each takes. */
export const OPERATOR_RECEIPT_KINDS = ['artifact_acceptance', 'owner_delivery'] as const;
export const OPERATOR_RECEIPT_STATES = ['accepted', 'rejected', 'confirmed', 'failed'] as const;
export type OperatorReceiptKind = (typeof OPERATOR_RECEIPT_KINDS)[number];
export type OperatorReceiptState = (typeof OPERATOR_RECEIPT_STATES)[number];
/** Which states each kind takes: an acceptance is never "confirmed", a delivery never "accepted". */
export const STATES_OF_KIND: Readonly<Record<OperatorReceiptKind, readonly OperatorReceiptState[]>> = {
  artifact_acceptance: ['accepted', 'rejected'],
  owner_delivery: ['confirmed', 'failed'],
};
/** A person's attestations on a manual dispatch (CONTRACT §13). */
export const MANUAL_ATTESTATION_KINDS = ['manual_dispatch_written', 'manual_delivery_attested', 'manual_result_attested', 'manual_blocked'] as const;
export type ManualAttestationKind = (typeof MANUAL_ATTESTATION_KINDS)[number];
/** A receipt's or an attestation's id, chosen by the person recording it. */
export const RECORD_ID = /^[A-Za-z0-9._:-]{1,128}$/;
export const RECORD_ID_RULE = '1..128 characters of [A-Za-z0-9._:-]';

/** The longest reason a cancel, redispatch, release or evidence mark may give. */
export const MAX_REASON_CHARS = 500;
/** The longest note on a receipt or an attestation. */
export const MAX_NOTE_CHARS = 1_000;
/** The longest approval id, `verifiedBy` and result summary. */
export const MAX_APPROVAL_ID_CHARS = 128;
/**
 * CONTRACT §17: the callback id a durable function's `waitForCallback` waits on, as its worker reports it
 * with `approval_requested` (the ledger keeps it apart and chooses the approvalId): 1..1,024 characters.
 */
export const MAX_CALLBACK_ID_CHARS = 1024;
export const MAX_VERIFIED_BY_CHARS = 128;
export const MAX_SUMMARY_CHARS = 100_000;
/**
 * A result's summary as the ledger keeps it (in the dispatch's hot item) and shows it: a preview of its
 * first characters. Text that must arrive whole goes in `result.body`.
 */
export const RESULT_SUMMARY_PREVIEW_CHARS = 200;
/** A list's largest page (`limit`), its page when no `limit` is given, and the longest cursor a list takes back. */
export const MAX_LIST_LIMIT = 100;
export const DEFAULT_LIST_LIMIT = 25;
export const MAX_CURSOR_CHARS = 4_096;
/** The inbox (CONTRACT §10): a claim's lease, its long poll, how many results one claim takes, and its ids' lengths. */
export const MIN_LEASE_SECONDS = 5;
export const MAX_LEASE_SECONDS = 900;
export const MAX_WAIT_SECONDS = 20;
export const MAX_CLAIM_RESULTS = 50;
export const MAX_RESULT_ID_CHARS = 160;
export const MAX_CLAIM_TOKEN_CHARS = 64;

/**
 * A value built on its first use and kept: for what a module would otherwise build when it is imported
 * although only some paths use it (zod schemas, lookup tables). Call it marked pure —
 * `/* @__PURE__ *\/ lazy(() => …)` — so a bundle whose code never calls the getter leaves it out.
 */
export function lazy<T>(build: () => T): () => T {
  let built: { readonly value: T } | undefined;
  return () => (built ??= { value: build() }).value;
}

export * from './routes.js';
export * from './route-docs.js';

/** Text bounds the ledger applies to what people read (its errors, reasons and previews). */
export { clip, printable } from './text.js';
