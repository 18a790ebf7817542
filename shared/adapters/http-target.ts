import { randomUUID } from 'node:crypto';
import { lookup as dnsLookup } from 'node:dns/promises';
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import * as z from 'zod/mini';
import { MAX_EVIDENCE_REFS, MAX_REF_BYTES, routePath, TARGET_ROUTES } from '@dispatch-ledger/protocol';
import { lazy } from '../lazy.js';
import { NATIVE_STATUS, TARGET_RUN_STATUSES, type SubmitRequest, type TargetPort, type HttpTargetRegistration, type TargetRegistration } from '../targets/port.js';
import { type ApprovalOutcome, type CancelOutcome, type LookupOutcome, type SubmitOutcome, type TargetRunView } from '../dispatch/target-answers.js';
import { isTerminal } from '../dispatch/state.js';
import { errorMessageOf, exchanger, parseBody, unreadable, type BodyRead } from './http-exchange.js';
import { baseUrlProblem, guardedLookup, type AddressPolicy, type Resolver } from './target-address.js';

/**
 * The `http` target adapter (CONTRACT §8): the ledger's side of the target HTTP protocol.
 *
 * Whatever the target does (refuses, times out, answers garbage, answers far too much, echoes our
 * credentials back) becomes an outcome with a bounded, secret-free reason; only misuse by our own
 * code (a malformed base URL, a runId no target could have given us) throws.
 */

const DEFAULT_TIMEOUT_MS = 10_000;
const SUMMARY_CHARS = 1_000;
/**
 * A W3C trace context as intake accepts it (`00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`, 55
 * characters). Anything else is not sent: W3C has a receiver ignore a malformed one anyway, and a header
 * Node refuses would make every try of the submission unavailable, for a field that is only a courtesy.
 */
const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;
/**
 * The 4xx answers to a submission that are "ask again later", like a 5xx: 408 and 429, and 401 —
 * CONTRACT V3 §8: during a secret rotation the target and the ledger's secret cache briefly disagree,
 * which backoff outlives; blocking the dispatch on it would lose work to a routine rotation.
 */
const RETRIED_4XX: ReadonlySet<number> = new Set([401, 408, 429]);

export interface HttpTargetOptions {
  /**
   * Where the target may live (CONTRACT §8 v2): `public-only` in AWS (https, never loopback, link-local,
   * unspecified or metadata addresses), `allow-loopback` for the local platform. Checked on the base URL
   * here, and on every address the host resolves to before each connection.
   * @default 'allow-loopback' (the functions' wiring chooses `public-only` in AWS)
   */
  readonly addressPolicy?: AddressPolicy;
  /** How host names are resolved before each connection. @default `dns.lookup` with `all: true` */
  readonly resolve?: Resolver;
  /** Budget for one call, answer body included. @default 10000 */
  readonly timeoutMs?: number;
  /**
   * The `authorization` header value, resolved before every call (so a rotated secret is picked up);
   * `undefined` sends none. If it throws, the call is `unavailable`. The value never appears in a reason.
   * @default no authorization header
   */
  readonly authHeader?: () => Promise<string | undefined>;
  /** The `x-request-id` sent with each call. @default `crypto.randomUUID` */
  readonly newRequestId?: () => string;
}

/**
 * A {@link TargetPort} that speaks CONTRACT §8 over HTTP to `registration.baseUrl`.
 *
 * Outcome mapping, per call:
 * - `submit`: 2xx with a valid `{ runId, status }` → `accepted` (`requestId`: the target's own
 *   `x-request-id` if it sent a well-formed one, else ours); 4xx other than 401/408/429 → `rejected`;
 *   anything else (5xx, 401, 408, 429, 3xx, no connection, timeout, an unreadable or oversized 2xx
 *   body) → `unavailable`. A 401 is a secret rotation in progress (CONTRACT V3 §8), on every call. Retrying after `unavailable` is safe: the Idempotency-Key returns the same run.
 * - `lookup`: valid 2xx for the same runId → `found`; 404 → `not_found`; else `unavailable`.
 * - `decideApproval`: 2xx → `decided`; 409 or 422 → `conflict`; 404 → `not_found`; else `unavailable`.
 * - `cancel`: 2xx → `cancelled` (the status the target reports, `cancelled` if it reports none);
 *   404 → `not_found`; else `unavailable`.
 *
 * - `submit` answered 409 `{"code":"in_progress"}` (the target is still creating the run for this
 *   Idempotency-Key) → `unavailable`: asked again later, like a 5xx; any other 409 is `rejected`.
 *
 * `submit` sends the request's `traceparent` (CONTRACT §1 v2) as the `traceparent` header when it is a
 * well-formed W3C trace context, and no such header otherwise.
 *
 * Redirects are not followed (a 3xx is `unavailable`), so credentials only ever go to the base URL.
 * Every connection first resolves the host and checks each address against `addressPolicy`; a refused
 * address makes the call `unavailable` (`refused to connect: … resolves to …`) without connecting.
 *
 * @throws TypeError if `baseUrl` is not an http(s) URL without credentials, query or fragment, or is
 *   one `addressPolicy` refuses.
 * @throws RangeError if `timeoutMs` is not a positive integer.
 *
 * @example
 * const target = httpTarget(
 *   { name: 'demo-agent', kind: 'http', baseUrl: 'http://127.0.0.1:4100/' },
 *   { timeoutMs: 5_000, authHeader: async () => `Bearer ${await secrets.get('demo-agent')}` },
 * );
 * const outcome = await target.submit({ dispatchId: 'd-1', attempt: 1, origin: 'planner',
 *   task: { behavior: 'complete' }, expectedEvidence: ['out/report.md'], callbackUrl: apiUrl });
 * if (outcome.kind === 'accepted') record(outcome.runId, outcome.requestId);
 */
export function httpTarget(registration: TargetRegistration, options: HttpTargetOptions = {}): TargetPort {
  if (registration.kind !== 'http') throw new TypeError(`target "${registration.name}" is a ${registration.kind} target, not http`);
  const policy = options.addressPolicy ?? 'allow-loopback';
  const base = baseOf(registration, policy);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) {
    throw new RangeError(`timeoutMs must be a positive integer, got ${timeoutMs}`);
  }
  const resolve: Resolver = options.resolve ?? ((hostname) => dnsLookup(hostname, { all: true }));
  const exchange = exchanger({
    // A keep-alive pool of this target's own: a connection is reused only by calls under the policy
    // (and the resolver) it was checked with, never one another adapter opened.
    agent: base.startsWith('https:') ? new HttpsAgent({ keepAlive: true }) : new HttpAgent({ keepAlive: true }),
    lookup: guardedLookup(policy, resolve),
    timeoutMs,
    authHeader: options.authHeader,
    newRequestId: options.newRequestId ?? randomUUID,
  });

  return {
    async submit(request: SubmitRequest): Promise<SubmitOutcome> {
      const { dispatchId, attempt, origin, task, expectedEvidence, callbackUrl, timeouts, traceparent } = request;
      const answer = await exchange('POST', `${base}${TARGET_ROUTES.submit.path}`, {
        headers: {
          'Idempotency-Key': `${dispatchId}:${attempt}`,
          // CONTRACT §1 v2: the origin's trace goes on into the target, as a header (never into the body).
          ...(traceparent !== undefined && TRACEPARENT.test(traceparent) ? { traceparent } : {}),
        },
        json: { dispatchId, attempt, origin, task, expectedEvidence, callbackUrl, ...(timeouts ? { timeouts } : {}) },
      });
      if (answer.kind === 'failed') return { kind: 'unavailable', reason: answer.reason };
      const { status } = answer;
      if (isSuccess(status)) {
        const run = parseBody(answer.body, SubmittedSchema());
        if (!run) return { kind: 'unavailable', reason: answer.explain(`HTTP ${status}: ${unreadable(answer.body, '{ runId, status }')}`) };
        return { kind: 'accepted', runId: run.runId, status: run.status, requestId: answer.requestId };
      }
      // Not a refusal: the first call with this key is still being worked on. Ask again later.
      if (status === 409 && isInProgress(answer.body)) {
        return { kind: 'unavailable', reason: 'HTTP 409: in_progress' };
      }
      if (status >= 400 && status < 500 && !RETRIED_4XX.has(status)) {
        return { kind: 'rejected', httpStatus: status, reason: answer.explain(errorMessageOf(answer.body) ?? `HTTP ${status}`) };
      }
      return { kind: 'unavailable', reason: answer.failure() };
    },

    async lookup(runId: string): Promise<LookupOutcome> {
      const answer = await exchange('GET', runUrl(base, runId));
      if (answer.kind === 'failed') return { kind: 'unavailable', reason: answer.reason };
      if (answer.status === 404) return { kind: 'not_found' };
      if (!isSuccess(answer.status)) return { kind: 'unavailable', reason: answer.failure() };
      const view = parseBody(answer.body, RunViewSchema());
      if (!view) return { kind: 'unavailable', reason: answer.explain(`HTTP ${answer.status}: ${unreadable(answer.body, 'run view')}`) };
      // A view of some other run is a confused target, not an observation of ours.
      if (view.runId !== runId) return { kind: 'unavailable', reason: answer.explain('the target answered for another run') };
      return { kind: 'found', run: toRunView(view) };
    },

    async decideApproval(runId: string, approvalId: string, decision: 'approve' | 'cancel'): Promise<ApprovalOutcome> {
      const answer = await exchange('POST', runUrl(base, runId, TARGET_ROUTES.decide), { json: { approvalId, decision } });
      if (answer.kind === 'failed') return { kind: 'unavailable', reason: answer.reason };
      const { status } = answer;
      if (isSuccess(status)) return { kind: 'decided', approvalId, decision };
      // 422 too: a target that validates the decision against its state may say so either way.
      if (status === 409 || status === 422) {
        return { kind: 'conflict', reason: answer.explain(errorMessageOf(answer.body) ?? `HTTP ${status}`) };
      }
      if (status === 404) return { kind: 'not_found' };
      return { kind: 'unavailable', reason: answer.failure() };
    },

    async cancel(runId: string): Promise<CancelOutcome> {
      const answer = await exchange('POST', runUrl(base, runId, TARGET_ROUTES.cancel));
      if (answer.kind === 'failed') return { kind: 'unavailable', reason: answer.reason };
      // The target acted on the cancel; what it says about the run afterwards is a bonus.
      if (isSuccess(answer.status)) return { kind: 'cancelled', status: parseBody(answer.body, CancelledSchema())?.status ?? 'cancelled' };
      if (answer.status === 404) return { kind: 'not_found' };
      return { kind: 'unavailable', reason: answer.failure() };
    },
  };
}

// --- What the target may answer --------------------------------------------------------------------
// Each schema is built when a target first answers, not at cold start: a tick with nothing due calls none.

const RunStatusSchema = /* @__PURE__ */ lazy(() => z.enum(TARGET_RUN_STATUSES));

/** 1..128 printable characters, and never a dot segment, which a URL path cannot carry. */
const RunIdSchema = /* @__PURE__ */ lazy(() => z.string().check(
  z.minLength(1),
  z.maxLength(128),
  z.refine((id) => isUsableRunId(id), 'not a usable run id'),
));

const SubmittedSchema = /* @__PURE__ */ lazy(() => z.object({ runId: RunIdSchema(), status: RunStatusSchema() }));

const CancelledSchema = /* @__PURE__ */ lazy(() => z.object({ status: RunStatusSchema() }));

/** `null` and absence mean the same: targets differ in how they say "none". */
const RunViewSchema = /* @__PURE__ */ lazy(() => z.object({
  runId: RunIdSchema(),
  status: RunStatusSchema(),
  // CONTRACT V3 §2: read if it is one; a malformed word is left out (see toRunView), not a lost lookup.
  nativeStatus: z.optional(z.unknown()),
  // `body`: a final run's result body (any JSON, as its final event would carry it); the answer itself is at most 64 KB.
  result: z.nullish(z.object({ summary: z.nullish(z.string()), body: z.optional(z.unknown()) })),
  evidence: z.nullish(z.array(z.string().check(z.minLength(1), z.maxLength(MAX_REF_BYTES))).check(z.maxLength(MAX_EVIDENCE_REFS))),
  pendingApproval: z.nullish(
    z.object({ approvalId: z.string().check(z.minLength(1), z.maxLength(128)), requestedAt: z.nullish(z.string().check(z.maxLength(64))) }),
  ),
}));

/**
 * A looked-up result: its summary bounded, and a final run's body as JSON text, so a run whose final event
 * never reached the ledger keeps the body its answer carries (within §10's bounds, or its summary alone,
 * by the one who records it: keepFoundBody; the worker kit leaves a body over 16 KB out of its answer).
 * A body nested too deep to be written again is left out, never a lost lookup.
 */
function lookedUpResult(status: TargetRunView['status'], result: { readonly summary?: string | null | undefined; readonly body?: unknown }): NonNullable<TargetRunView['result']> {
  let bodyJson: string | undefined;
  try {
    bodyJson = isTerminal(status) && result.body !== undefined ? JSON.stringify(result.body) : undefined;
  } catch {
    bodyJson = undefined;
  }
  return { ...(typeof result.summary === 'string' && { summary: result.summary.slice(0, SUMMARY_CHARS) }), ...(bodyJson !== undefined && { bodyJson }) };
}

/** The answer as the port reports it: absent fields left out, the summary bounded (mapped after parsing, not in the schema, to keep zod's pipe out of the bundles). */
function toRunView(raw: z.output<ReturnType<typeof RunViewSchema>>): TargetRunView {
  const { runId, status, nativeStatus, result, evidence, pendingApproval } = raw;
  return {
    runId,
    status,
    ...(typeof nativeStatus === 'string' && NATIVE_STATUS.test(nativeStatus) && { nativeStatus }),
    ...(result && { result: lookedUpResult(status, result) }),
    ...(evidence && { evidence }),
    ...(pendingApproval && {
      pendingApproval:
        typeof pendingApproval.requestedAt === 'string'
          ? { approvalId: pendingApproval.approvalId, requestedAt: pendingApproval.requestedAt }
          : { approvalId: pendingApproval.approvalId },
    }),
  };
}


/**
 * `{"code":"in_progress"}` (CONTRACT §8), or the same code in the §2 error shape: a code member of the
 * body (an escaped quote inside a string cannot match). A regex, not a schema: it costs the bundles less.
 */
function isInProgress(body: BodyRead): boolean {
  return body.kind === 'complete' && /"code"\s*:\s*"in_progress"/.test(body.text);
}

// --- Addresses -----------------------------------------------------------------------------------------

/** The base URL without its trailing slashes, so `{base}/runs` is right with or without one. */
function baseOf(registration: HttpTargetRegistration, policy: AddressPolicy): string {
  let url: URL;
  try {
    url = new URL(registration.baseUrl);
  } catch {
    throw new TypeError(`target ${registration.name}: baseUrl is not a URL`);
  }
  // Credentials belong in the auth header (from Secrets Manager), never in an address that gets logged.
  if (url.username !== '' || url.password !== '') {
    throw new TypeError(`target ${registration.name}: baseUrl must not carry credentials`);
  }
  if (url.search !== '' || url.hash !== '') {
    throw new TypeError(`target ${registration.name}: baseUrl must not have a query or fragment`);
  }
  // The scheme, and an IP literal (checked once: it resolves to itself); a name again before every connection.
  const problem = baseUrlProblem(registration.baseUrl, policy);
  if (problem) throw new TypeError(`target ${registration.name}: baseUrl ${problem}`);
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}

/** A route of the target protocol on one run (a lookup unless named), at the target's base URL. */
function runUrl(base: string, runId: string, spec: { readonly path: `/${string}` } = TARGET_ROUTES.lookUp): string {
  if (!isUsableRunId(runId)) {
    throw new RangeError(`not a run id a target could have given: ${JSON.stringify(runId.slice(0, 140))}`);
  }
  return `${base}${routePath(spec, { runId })}`;
}

/**
 * URL parsers resolve `.` and `..` segments (even percent-encoded), so such a runId would address
 * another resource; control characters would end up in logs and reasons.
 */
function isUsableRunId(runId: string): boolean {
  return (
    runId.length >= 1 &&
    runId.length <= 128 &&
    runId !== '.' &&
    runId !== '..' &&
    !/[\u0000-\u001f\u007f]/.test(runId)
  );
}

function isSuccess(status: number): boolean {
  return status >= 200 && status < 300;
}
