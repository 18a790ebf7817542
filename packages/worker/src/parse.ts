import type { Decision, Submission, Timeouts } from './model.js';
import { DISPATCH_ID, DISPATCH_ID_RULE, MAX_EVIDENCE_REFS, MAX_TIMEOUT_SECONDS, refProblem } from '@dispatch-ledger/protocol';

/**
 * Reading what the ledger sends (CONTRACT §8), by hand: the HTTP and Lambda workers carry no schema
 * library (only the `/stepfunctions` subpath loads zod, for the event Step Functions passes). Each reader
 * returns the value or the first problem, in words fit for a 400 answer.
 */

export type Parsed<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly problem: string };

/** The longest any of a submission's `timeouts` may be (30 days, in seconds): the ledger's own bound, from the protocol. */
export { MAX_TIMEOUT_SECONDS };
const TIMEOUT_FIELDS = ['stallAfterSeconds', 'approvalWaitSeconds', 'deliveryGraceSeconds'] as const;
/** W3C trace context version 00, as the ledger forwards it: `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`. */
const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;

const fail = (problem: string): { readonly ok: false; readonly problem: string } => ({ ok: false, problem });

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * A spilled task as the ledger answers it (`GET /dispatches/{id}/task`): the task object the origin sent.
 * Throws with fixed words, never the answer's text (a proxy's page is not the run's to repeat).
 */
export function spilledTaskOf(text: string): Readonly<Record<string, unknown>> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error('the spilled task is not JSON');
  }
  if (!isPlainObject(value)) throw new Error('the spilled task is not a JSON object');
  return value;
}

/**
 * The body of `POST /runs`.
 *
 * @example
 * parseSubmission({ dispatchId: 'd-1', attempt: 1, origin: 'planner', task: {}, callbackUrl: 'http://127.0.0.1:4000' })
 * // { ok: true, value: { …, expectedEvidence: [], timeouts: {} } }
 */
export function parseSubmission(body: unknown): Parsed<Submission> {
  if (!isPlainObject(body)) return fail('the body must be a JSON object');
  const { dispatchId, attempt, origin, task, taskRef, expectedEvidence, callbackUrl, timeouts } = body;
  if (typeof dispatchId !== 'string' || !DISPATCH_ID.test(dispatchId)) return fail(`dispatchId: ${DISPATCH_ID_RULE}`);
  if (typeof attempt !== 'number' || !Number.isSafeInteger(attempt) || attempt < 1) return fail('attempt: an integer >= 1');
  if (typeof origin !== 'string' || origin.length < 1 || origin.length > 64) return fail('origin: 1..64 characters');
  if (task !== undefined && task !== null && !isPlainObject(task)) return fail('task: a JSON object');
  const hasTask = isPlainObject(task);
  if (!hasTask && (taskRef === undefined || taskRef === null)) return fail('task (or taskRef) is required');
  let refs: string[] = [];
  if (expectedEvidence !== undefined && expectedEvidence !== null) {
    if (!Array.isArray(expectedEvidence) || expectedEvidence.length > MAX_EVIDENCE_REFS || !expectedEvidence.every((ref) => typeof ref === 'string')) {
      return fail(`expectedEvidence: at most ${MAX_EVIDENCE_REFS} refs`);
    }
    refs = expectedEvidence.filter((ref): ref is string => typeof ref === 'string');
    // The ledger refuses an unsafe ref at intake (CONTRACT §6): one here came from elsewhere.
    const unsafe = refs.findIndex((ref) => refProblem(ref) !== undefined);
    if (unsafe >= 0) return fail(`expectedEvidence[${unsafe}]: not a safe ref (${refProblem(refs[unsafe]) ?? ''})`);
  }
  if (typeof callbackUrl !== 'string' || !isHttpUrl(callbackUrl)) return fail('callbackUrl: an http(s) URL');
  // Over the ledger's bound is refused, not left out: the ledger never sends one, and a timer derived from
  // it could exceed what Node's timers take.
  const overlong = isPlainObject(timeouts) ? TIMEOUT_FIELDS.find((field) => exceeds(timeouts[field], MAX_TIMEOUT_SECONDS)) : undefined;
  if (overlong !== undefined) return fail(`timeouts.${overlong}: at most ${MAX_TIMEOUT_SECONDS} seconds (30 days)`);
  return {
    ok: true,
    value: {
      dispatchId,
      attempt,
      origin,
      ...(hasTask ? { task } : { taskRef }),
      expectedEvidence: refs,
      callbackUrl,
      timeouts: timeoutsOf(timeouts),
    },
  };
}

/**
 * The trace context a submission carried, or undefined. A malformed one is ignored, as W3C asks of a
 * receiver: it never costs the submission.
 *
 * @example
 * traceparentOf('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01') // the same string
 * traceparentOf('not-a-trace') // undefined
 */
export function traceparentOf(value: unknown): string | undefined {
  return typeof value === 'string' && TRACEPARENT.test(value) ? value : undefined;
}

/**
 * The clocks the kit can use; anything that is not a whole number of seconds >= 1 is left out (one over
 * {@link MAX_TIMEOUT_SECONDS} has already been refused).
 */
function timeoutsOf(value: unknown): Timeouts {
  if (!isPlainObject(value)) return {};
  const seconds = (field: unknown): number | undefined => (typeof field === 'number' && Number.isSafeInteger(field) && field >= 1 ? field : undefined);
  const stallAfterSeconds = seconds(value['stallAfterSeconds']);
  const approvalWaitSeconds = seconds(value['approvalWaitSeconds']);
  const deliveryGraceSeconds = seconds(value['deliveryGraceSeconds']);
  return {
    ...(stallAfterSeconds !== undefined && { stallAfterSeconds }),
    ...(approvalWaitSeconds !== undefined && { approvalWaitSeconds }),
    ...(deliveryGraceSeconds !== undefined && { deliveryGraceSeconds }),
  };
}

function exceeds(value: unknown, max: number): boolean {
  return typeof value === 'number' && value > max;
}

function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}

/** The body of `POST /runs/{runId}/approval`. */
export function parseDecision(body: unknown): Parsed<{ readonly approvalId: string; readonly decision: Decision }> {
  if (!isPlainObject(body)) return fail('the body must be a JSON object');
  const { approvalId, decision } = body;
  if (typeof approvalId !== 'string' || approvalId.length < 1 || approvalId.length > 128) return fail('approvalId: 1..128 characters');
  if (decision !== 'approve' && decision !== 'cancel') return fail('decision: "approve" or "cancel"');
  return { ok: true, value: { approvalId, decision } };
}

/** The ledger's error code (`{"error":{"code"}}`, or a bare `{"code"}`), if the text is one. */
export function errorCodeOf(text: string): string | undefined {
  try {
    const body: unknown = JSON.parse(text);
    if (!isPlainObject(body)) return undefined;
    const nested = body['error'];
    const code = isPlainObject(nested) ? nested['code'] : body['code'];
    return typeof code === 'string' ? code : undefined;
  } catch {
    return undefined;
  }
}
