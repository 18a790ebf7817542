/**
 * The dispatch message (CONTRACT §1) as a zod/mini schema, and the intake's reader of a message body
 * (`readDispatchMessage`, below): what the ledger reads every message with, and what
 * `@dispatch-ledger/client` and the MCP server read the text they are about to send with, so a message the
 * ledger would refuse never leaves — one reader, not a second copy of its rules. Its defaults and rules
 * are in the zod-free root module (`@dispatch-ledger/protocol`).
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
  MAX_BODY_DEPTH,
  MAX_PRIORITY,
  MAX_TASK_DEPTH,
  MAX_TIMEOUT_SECONDS,
  NOT_BEFORE_MAX_DAYS,
  ORIGIN,
  refProblem,
  resultDeliveryOf,
  TARGET_NAME,
  type ResultDelivery,
} from './index.js';
import { clip, printable } from './text.js';

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

// --- The reader -----------------------------------------------------------------------------------------

/** At most this many field errors are returned, the last one counting the rest when they are cut. */
export const MAX_ERRORS = 20;
/** Each error's `field` and `message`, in UTF-16 units. */
export const MAX_ERROR_TEXT = 200;
/** All errors joined as `field: message; …` (as the intake writes a blocked reason), in UTF-8 bytes. */
export const MAX_ERRORS_BYTES = 1024;


export interface FieldError {
  /** Dotted path of the field, e.g. `timeouts.stallAfterSeconds` or `expectedEvidence.2`; ≤ 200 characters. */
  readonly field: string;
  /** ≤ 200 characters; ends in a `(code)` for the ledger's own checks, e.g. `(too_deep)`. */
  readonly message: string;
}

/** What a message body is, before anything is written (CONTRACT §1 intake outcomes). */
export type ReadMessage =
  | { readonly kind: 'valid'; readonly message: DispatchMessage; readonly parsed: unknown }
  /** dispatchId and origin are readable: the dispatch is recorded as blocked with these errors. */
  | {
      readonly kind: 'invalid';
      readonly dispatchId: string;
      readonly origin: string;
      /** The target named, when it is at least a well-formed name. */
      readonly target: string | null;
      /** 1..MAX_ERRORS errors, each text ≤ MAX_ERROR_TEXT, joined ≤ MAX_ERRORS_BYTES; the last counts the rest when cut. */
      readonly errors: readonly FieldError[];
      /** The parsed body, for the content hash: possibly nested deeper than MAX_BODY_DEPTH. */
      readonly parsed: unknown;
    }
  /** Not JSON, not an object, too deep, or no readable dispatchId/origin: a rejection. */
  | { readonly kind: 'unreadable'; readonly reason: UnreadableReason; readonly dispatchId?: string; readonly origin?: string };

/**
 * Why a body is a rejection. `too_deep`: nested deeper than MAX_BODY_DEPTH and no readable dispatchId
 * or origin (with both readable, a too-deep message is invalid instead). A body that is not an object
 * is `not_an_object` whatever its depth.
 */
export type UnreadableReason = 'not_json' | 'not_an_object' | 'too_deep' | 'no_readable_dispatch_id' | 'no_readable_origin';

const TOO_DEEP_MESSAGE = `nested deeper than ${MAX_TASK_DEPTH} levels (too_deep)`;
const PROTO_MESSAGE = 'the key "__proto__" is not allowed';
const NON_FINITE_MESSAGE = 'a number beyond the range of a double, read as Infinity (non_finite_number)';
const LONE_SURROGATE_MESSAGE = 'an unpaired UTF-16 surrogate: not valid Unicode (lone_surrogate)';

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');

/** One value met by `scan`: where it is, for a path built only when a problem is found there. */
interface Node {
  readonly value: unknown;
  readonly key: string;
  readonly parent: Node | undefined;
  /** Container levels from the body down to this value, the body being 1. */
  readonly depth: number;
  /** The top-level field this value is under. */
  readonly field: string;
}

/** The dotted path of a node, below the body, stopped once it is longer than an error may be. */
function pathOf(node: Node, last?: string): string {
  const keys: string[] = last === undefined ? [] : [last];
  for (let at: Node | undefined = node; at?.parent; at = at.parent) keys.push(at.key);
  let path = '';
  for (let index = keys.length - 1; index >= 0 && path.length <= MAX_ERROR_TEXT; index -= 1) {
    path += (path ? '.' : '') + (keys[index] as string).slice(0, MAX_ERROR_TEXT + 1);
  }
  return path;
}

interface Scan {
  /** Top-level fields whose value nests deeper than MAX_TASK_DEPTH levels, in body order. */
  readonly tooDeep: readonly string[];
  /** The ledger's own field errors, first the depth ones, then one each for the first `__proto__` key, non-finite number and lone surrogate. */
  readonly errors: readonly FieldError[];
}

/**
 * Walks the whole parsed body once, without recursion (no depth can exhaust the stack), and in linear
 * time. Everywhere: depth and own `__proto__` keys — JSON.parse keeps `__proto__` as data, but
 * validators and spreads drop or misread it, so the task stored and submitted would differ from the
 * content hashed. In the task: numbers that overflowed to Infinity and strings or keys with a lone
 * surrogate, which no store keeps as sent (DynamoDB refuses Infinity; UTF-8 has no lone surrogate),
 * and RFC 8785 has no form for. Other fields' values are checked by the schema.
 */
function scan(body: Record<string, unknown>): Scan {
  const tooDeep = new Set<string>();
  let proto: string | undefined;
  let nonFinite: string | undefined;
  let loneSurrogate: string | undefined;
  const root: Node = { value: body, key: '', parent: undefined, depth: 1, field: '' };
  const stack: Node[] = [root];
  while (stack.length > 0) {
    const node = stack.pop() as Node;
    const { value } = node;
    const inTask = node.field === 'task';
    if (typeof value !== 'object' || value === null) {
      if (!inTask) continue;
      if (nonFinite === undefined && typeof value === 'number' && !Number.isFinite(value)) nonFinite = pathOf(node);
      if (loneSurrogate === undefined && typeof value === 'string' && LONE_SURROGATE.test(value)) loneSurrogate = pathOf(node);
      continue;
    }
    if (node.depth > MAX_BODY_DEPTH) tooDeep.add(node.field);
    const depth = node.depth + 1;
    if (Array.isArray(value)) {
      for (let index = value.length - 1; index >= 0; index -= 1) {
        stack.push({ value: value[index], key: String(index), parent: node, depth, field: node.field });
      }
      continue;
    }
    if (proto === undefined && Object.hasOwn(value, '__proto__')) proto = pathOf(node, '__proto__');
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record);
    for (let index = keys.length - 1; index >= 0; index -= 1) {
      const key = keys[index] as string;
      const field = node.parent ? node.field : key;
      const child: Node = { value: record[key], key, parent: node, depth, field };
      if (loneSurrogate === undefined && field === 'task' && node.parent && LONE_SURROGATE.test(key)) loneSurrogate = pathOf(child);
      stack.push(child);
    }
  }
  const errors: FieldError[] = [...tooDeep].map((field) => ({ field, message: TOO_DEEP_MESSAGE }));
  if (proto !== undefined) errors.push({ field: proto, message: PROTO_MESSAGE });
  if (nonFinite !== undefined) errors.push({ field: nonFinite, message: NON_FINITE_MESSAGE });
  if (loneSurrogate !== undefined) errors.push({ field: loneSurrogate, message: LONE_SURROGATE_MESSAGE });
  return { tooDeep: [...tooDeep], errors };
}

/** Error text as stored and shown: printable, well-formed Unicode, at most MAX_ERROR_TEXT units. */
function errorText(text: string): string {
  // Clip first (linear in the kept part only), then clean; cleaning never lengthens the text.
  return clip(printable(clip(text, MAX_ERROR_TEXT * 2).replace(LONE_SURROGATES, '\ufffd')), MAX_ERROR_TEXT);
}

const utf8Bytes = (text: string): number => Buffer.byteLength(text, 'utf8');
/** `field: message; ` as the intake joins errors. */
const joinedBytes = (error: FieldError): number => utf8Bytes(error.field) + utf8Bytes(error.message) + 4;
/** Room kept for the closing `(message): …and N more errors`. */
const MORE_RESERVE = 64;

/**
 * The errors to return, bounded whatever their number and size (CONTRACT v2 §1: every error text
 * ≤ 1 KB): the first ones, each text clipped, at most MAX_ERRORS entries and MAX_ERRORS_BYTES joined,
 * the last entry saying how many more there were when any are cut. Only the entries kept are built.
 */
function boundedErrors(total: number, errorAt: (index: number) => FieldError): FieldError[] {
  const kept: FieldError[] = [];
  let bytes = 0;
  for (let index = 0; index < total; index += 1) {
    const raw = errorAt(index);
    const error = { field: errorText(raw.field) || '(message)', message: errorText(raw.message) };
    const cost = joinedBytes(error);
    const last = index === total - 1;
    if (kept.length + 1 > (last ? MAX_ERRORS : MAX_ERRORS - 1)) break;
    if (bytes + cost > (last ? MAX_ERRORS_BYTES : MAX_ERRORS_BYTES - MORE_RESERVE)) break;
    kept.push(error);
    bytes += cost;
  }
  const more = total - kept.length;
  if (more > 0) kept.push({ field: '(message)', message: `…and ${more} more error${more === 1 ? '' : 's'}` });
  return kept;
}

function issueError(issue: z.core.$ZodIssue): FieldError {
  return { field: issue.path.map(String).join('.') || '(message)', message: issue.message };
}

/** What SQS refuses in a body, and what the local platform's queue refuses besides (see `sqsBody`). */
const NOT_FOR_SQS = /[\ufffe\uffff]/g;
const NOT_FOR_LOCAL_QUEUE = /[\ud800-\udfff\ufffe\uffff]/g;

/**
 * JSON text as an SQS message body carries it: the same JSON value, with each UTF-16 unit the queue
 * would refuse written as its `\uXXXX` escape. SQS refuses U+FFFE and U+FFFF; the local platform's
 * queue (fauxqs) also refuses every character outside the Basic Multilingual Plane — an emoji in a
 * task — which SQS takes raw (`localQueue`: those escaped too, 12 bytes each instead of 4). Such a unit
 * can only stand inside a JSON string, where the escape means the same character, so the ledger reads
 * the message unchanged (JSON.stringify already escapes a lone surrogate).
 *
 * @example
 * sqsBody('{"note":"🚀\uffff"}') // '{"note":"🚀\\uffff"}'
 * sqsBody('{"note":"🚀"}', { localQueue: true }) // '{"note":"\\ud83d\\ude80"}'
 */
export function sqsBody(json: string, options: { readonly localQueue?: boolean } = {}): string {
  return json.replace(options.localQueue ? NOT_FOR_LOCAL_QUEUE : NOT_FOR_SQS, (unit) => `\\u${unit.charCodeAt(0).toString(16)}`);
}

/**
 * Reads a dispatch message body: valid, invalid-but-attributable (blocked), or unreadable (rejection).
 * Pure: no I/O, no clock. No recursion any input can exhaust (JSON.parse in V8 is iterative; the
 * depth check runs before the schema); time linear in the body (keys sorted only for hashing, later);
 * every output bounded but `parsed` and the valid message's task.
 */
export function readDispatchMessage(body: string): ReadMessage {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return { kind: 'unreadable', reason: 'not_json' };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return { kind: 'unreadable', reason: 'not_an_object' };
  }
  const record = parsed as Record<string, unknown>;
  const dispatchId = typeof record.dispatchId === 'string' && DISPATCH_ID.test(record.dispatchId) ? record.dispatchId : undefined;
  const origin = typeof record.origin === 'string' && ORIGIN.test(record.origin) ? record.origin : undefined;
  const scanned = scan(record);
  if (dispatchId === undefined || origin === undefined) {
    return {
      kind: 'unreadable',
      reason: scanned.tooDeep.length > 0 ? 'too_deep' : dispatchId === undefined ? 'no_readable_dispatch_id' : 'no_readable_origin',
      ...(dispatchId ? { dispatchId } : {}),
      ...(origin ? { origin } : {}),
    };
  }
  // Safe at any depth: no part of the schema descends into a value of unbounded shape.
  const result = DispatchMessageSchema.safeParse(parsed);
  if (result.success && scanned.errors.length === 0) {
    return { kind: 'valid', message: { ...result.data, resultDelivery: resultDeliveryOf(result.data.resultDelivery) }, parsed };
  }
  const own = scanned.errors;
  const issues = result.success ? [] : result.error.issues;
  const errors = boundedErrors(own.length + issues.length, (index) =>
    index < own.length ? (own[index] as FieldError) : issueError(issues[index - own.length] as z.core.$ZodIssue),
  );
  const target = typeof record.target === 'string' && TARGET_NAME.test(record.target) ? record.target : null;
  return { kind: 'invalid', dispatchId, origin, target, errors, parsed };
}
