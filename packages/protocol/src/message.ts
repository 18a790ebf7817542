/**
 * The dispatch message (CONTRACT §1) as a zod/mini schema: what the ledger's intake reads a message with
 * and what `@dispatch-ledger/client` checks a message against before it is sent, so a message the ledger
 * would refuse never leaves. Its defaults and rules are in the zod-free root module (`@dispatch-ledger/protocol`).
 */
import * as z from 'zod/mini';
import './english.js';
import {
  DEFAULT_MAX_HOPS,
  DEFAULT_PRIORITY,
  DEFAULT_RESULT_DELIVERY,
  DEFAULT_TIMEOUTS,
  DISPATCH_ID,
  DISPATCH_ID_RULE,
  MAX_EVIDENCE_REFS,
  MAX_HOPS_LIMIT,
  MAX_PRIORITY,
  MAX_TIMEOUT_SECONDS,
  NOT_BEFORE_MAX_DAYS,
  ORIGIN,
  refProblem,
  resultDeliveryOf,
  TARGET_NAME,
  type ResultDelivery,
} from './index.js';

const seconds = /* @__PURE__ */ z.int().check(z.minimum(1), z.maximum(MAX_TIMEOUT_SECONDS));
const safeRef = /* @__PURE__ */ z.string().check(
  z.superRefine((ref, ctx) => {
    const problem = refProblem(ref);
    if (problem) ctx.addIssue({ code: 'custom', message: `unsafe evidence ref (${problem})` });
  }),
);

/** `YYYY-MM-DDTHH:MM:SS[.fraction]Z`, years 2000..2099: a UTC instant, no offset, no local time. */
const UTC_INSTANT = /^(20\d\d)-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?Z$/;
const INSTANT_MESSAGE = 'an ISO 8601 UTC instant in 2000..2099, e.g. 2026-12-02T09:00:00Z';

/** The epoch milliseconds of a real UTC instant in 2000..2099 (no Feb 30, no 24:00, no leap second), or undefined. */
function instantMs(text: string): number | undefined {
  const match = text.length <= 40 ? UTC_INSTANT.exec(text) : null;
  if (!match) return undefined;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const ms = Number(((match[7] ?? '') + '000').slice(0, 3));
  const at = Date.UTC(year, month - 1, day, hour, minute, second, ms);
  const date = new Date(at);
  const real =
    date.getUTCFullYear() === year &&
    date.getUTCMonth() === month - 1 &&
    date.getUTCDate() === day &&
    date.getUTCHours() === hour &&
    date.getUTCMinutes() === minute &&
    date.getUTCSeconds() === second;
  return real ? at : undefined;
}

/**
 * The ≤ 30-days-ahead rule of CONTRACT v2 §1, which the reader cannot check (it has no clock): why
 * `notBefore` is not acceptable at `now`, or undefined when it is. A `notBefore` in the past is
 * acceptable (submit at once). The answer is a short message ending in a code, for a FieldError on
 * `notBefore`: `(too_far_ahead)`, or `(not_an_instant)` for a text the reader would have refused.
 */
export function notBeforeProblem(notBefore: string, now: Date): string | undefined {
  const at = instantMs(notBefore);
  if (at === undefined) return `not ${INSTANT_MESSAGE} (not_an_instant)`;
  if (at - now.getTime() > NOT_BEFORE_MAX_DAYS * 24 * 3600 * 1000) return `more than ${NOT_BEFORE_MAX_DAYS} days ahead of now (too_far_ahead)`;
  return undefined;
}

/** W3C Trace Context, version 00: `00-<trace id: 32 lowercase hex>-<parent id: 16 lowercase hex>-<flags: 2 hex>`, ids not all zero. */
const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;

/** The dispatch message, schema v2 (CONTRACT §1). Unknown fields are refused, so a typo is never silently dropped. */
export const DispatchMessageSchema = /* @__PURE__ */ z.strictObject({
  dispatchId: z.string().check(z.regex(DISPATCH_ID, DISPATCH_ID_RULE)),
  origin: z.string().check(z.regex(ORIGIN, '1..64 characters of [a-z0-9-]')),
  target: z.string().check(z.regex(TARGET_NAME, 'a target name: 1..64 characters of [a-z0-9-]')),
  // A JSON object; z.record would add ~3 KB to every Lambda bundle for a check this simple. Its depth,
  // keys and scalars are checked by `scan` (iteratively), before this schema runs.
  task: z.custom<Record<string, unknown>>((value) => typeof value === 'object' && value !== null && !Array.isArray(value), 'expected a JSON object'),
  expectedEvidence: z._default(z.array(safeRef).check(z.maxLength(MAX_EVIDENCE_REFS, `at most ${MAX_EVIDENCE_REFS} refs`)), []),
  delivery: z._default(z.strictObject({ mode: z.enum(['callback', 'detached']) }), { mode: 'callback' }),
  timeouts: z._default(
    z.strictObject({
      stallAfterSeconds: z._default(seconds, DEFAULT_TIMEOUTS.stallAfterSeconds),
      approvalWaitSeconds: z._default(seconds, DEFAULT_TIMEOUTS.approvalWaitSeconds),
      deliveryGraceSeconds: z._default(seconds, DEFAULT_TIMEOUTS.deliveryGraceSeconds),
    }),
    { ...DEFAULT_TIMEOUTS },
  ),
  parentDispatchId: z.optional(z.string().check(z.regex(DISPATCH_ID, DISPATCH_ID_RULE))),
  maxHops: z._default(z.int().check(z.minimum(0), z.maximum(MAX_HOPS_LIMIT)), DEFAULT_MAX_HOPS),
  // `overwrite` rather than pipe + transform: the same effect for ~1 KB less of zod in every bundle.
  resultDelivery: z._default(z.string().check(z.overwrite(resultDeliveryOf)), DEFAULT_RESULT_DELIVERY),
  // Given in the ledger's own form (`toISOString`, millisecond precision), so it compares as text.
  notBefore: z.optional(
    z.string().check(
      z.refine((text) => instantMs(text) !== undefined, INSTANT_MESSAGE),
      z.overwrite((text) => {
        const at = instantMs(text);
        return at === undefined ? text : new Date(at).toISOString();
      }),
    ),
  ),
  priority: z._default(z.int().check(z.minimum(0), z.maximum(MAX_PRIORITY)), DEFAULT_PRIORITY),
  traceparent: z.optional(
    z.string().check(z.regex(TRACEPARENT, 'a W3C traceparent: 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, lowercase, ids not all zero')),
  ),
});

/** The message as read: the schema's output, with `resultDelivery` narrowed to what the schema's overwrite leaves. */
export type DispatchMessage = Omit<z.output<typeof DispatchMessageSchema>, 'resultDelivery'> & { resultDelivery: ResultDelivery };
/** A message as an origin writes it: the schema's input (defaults may be left out). */
export type DispatchMessageInput = z.input<typeof DispatchMessageSchema>;
