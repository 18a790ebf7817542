import * as z from 'zod/mini';
import '@dispatch-ledger/protocol/english';
import { clip, printable } from '../text.js';
import { DISPATCH_ID, ORIGIN, TARGET_NAME } from './ids.js';
import { MAX_TASK_DEPTH } from './state.js';
import { MAX_BODY_DEPTH, MAX_TIMEOUT_SECONDS } from '@dispatch-ledger/protocol';
import { resultDeliveryOf } from '@dispatch-ledger/protocol';
import { DispatchMessageSchema, type DispatchMessage } from '@dispatch-ledger/protocol/message';

export { DISPATCH_ID, ORIGIN, TARGET_NAME };
/** The message's schema and rules live in the protocol (docs/protocol.md §1); the intake reads with them. */
export {
  DEFAULT_MAX_HOPS,
  DEFAULT_PRIORITY,
  DEFAULT_RESULT_DELIVERY,
  DEFAULT_TIMEOUTS,
  MAX_PRIORITY,
  NOT_BEFORE_MAX_DAYS,
  RESULT_DELIVERY_MODES,
  resultDeliveryOf,
  type ResultDelivery,
} from '@dispatch-ledger/protocol';
export { DispatchMessageSchema, notBeforeProblem, type DispatchMessage } from '@dispatch-ledger/protocol/message';
export { MAX_TIMEOUT_SECONDS };
/**
 * CONTRACT v2 §1: `task` nests at most 64 levels, the task object itself being level 1. The message
 * object is level 1 of the body and the task level 2, so a body nests at most 65 levels; every other
 * field is shallow, so a deeper body is always invalid, and its depth tells which field is at fault.
 * Arrays and objects both count as levels; scalars do not.
 */
export { MAX_BODY_DEPTH, MAX_TASK_DEPTH };

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
