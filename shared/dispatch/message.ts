import * as z from 'zod/mini';
import '../zod-english.js';
import { refProblem } from './refs.js';

import { DISPATCH_ID, ORIGIN, TARGET_NAME } from './ids.js';

export { DISPATCH_ID, ORIGIN, TARGET_NAME };

export const DEFAULT_TIMEOUTS = {
  stallAfterSeconds: 600,
  approvalWaitSeconds: 1800,
  deliveryGraceSeconds: 300,
} as const;
export const DEFAULT_MAX_HOPS = 4;
/** Upper bounds the contract leaves open: a month for any clock, 32 hops. */
const MAX_SECONDS = 30 * 24 * 3600;
const MAX_HOPS_LIMIT = 32;

const seconds = z.int().check(z.minimum(1), z.maximum(MAX_SECONDS));
const safeRef = z.string().check(
  z.superRefine((ref, ctx) => {
    const problem = refProblem(ref);
    if (problem) ctx.addIssue({ code: 'custom', message: `unsafe evidence ref (${problem})` });
  }),
);

/** The dispatch message, schema v1 (CONTRACT §1). Unknown fields are refused, so a typo is never silently dropped. */
export const DispatchMessageSchema = z.strictObject({
  dispatchId: z.string().check(z.regex(DISPATCH_ID, '1..128 characters of [A-Za-z0-9._:-]')),
  origin: z.string().check(z.regex(ORIGIN, '1..64 characters of [a-z0-9-]')),
  target: z.string().check(z.regex(TARGET_NAME, 'a target name: 1..64 characters of [a-z0-9-]')),
  // A JSON object; z.record would add ~3 KB to every Lambda bundle for a check this simple.
  task: z.custom<Record<string, unknown>>((value) => typeof value === 'object' && value !== null && !Array.isArray(value), 'expected a JSON object'),
  expectedEvidence: z._default(z.array(safeRef).check(z.maxLength(32, 'at most 32 refs')), []),
  delivery: z._default(z.strictObject({ mode: z.enum(['callback', 'detached']) }), { mode: 'callback' }),
  timeouts: z._default(
    z.strictObject({
      stallAfterSeconds: z._default(seconds, DEFAULT_TIMEOUTS.stallAfterSeconds),
      approvalWaitSeconds: z._default(seconds, DEFAULT_TIMEOUTS.approvalWaitSeconds),
      deliveryGraceSeconds: z._default(seconds, DEFAULT_TIMEOUTS.deliveryGraceSeconds),
    }),
    { ...DEFAULT_TIMEOUTS },
  ),
  parentDispatchId: z.optional(z.string().check(z.regex(DISPATCH_ID, '1..128 characters of [A-Za-z0-9._:-]'))),
  maxHops: z._default(z.int().check(z.minimum(0), z.maximum(MAX_HOPS_LIMIT)), DEFAULT_MAX_HOPS),
});

export type DispatchMessage = z.output<typeof DispatchMessageSchema>;

export interface FieldError {
  /** Dotted path of the field, e.g. `timeouts.stallAfterSeconds` or `expectedEvidence.2`. */
  readonly field: string;
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
      readonly errors: readonly FieldError[];
      readonly parsed: unknown;
    }
  /** Not JSON, not an object, or no readable dispatchId/origin: a rejection. */
  | { readonly kind: 'unreadable'; readonly reason: UnreadableReason; readonly dispatchId?: string; readonly origin?: string };

export type UnreadableReason = 'not_json' | 'not_an_object' | 'no_readable_dispatch_id' | 'no_readable_origin';

const MAX_ERRORS = 20;

/**
 * Where the parsed message holds an own `__proto__` key, if anywhere. JSON.parse keeps it as data, but
 * validators and spreads drop or misread it, so the task stored and submitted would differ from the
 * content hashed: such a message is refused with a field error instead.
 */
function protoKeyPath(value: unknown, path: string[] = []): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  if (!Array.isArray(value) && Object.hasOwn(value, '__proto__')) return [...path, '__proto__'].join('.');
  for (const [key, child] of Object.entries(value)) {
    const found = protoKeyPath(child, [...path, key]);
    if (found) return found;
  }
  return undefined;
}

function fieldErrors(error: z.core.$ZodError): FieldError[] {
  return error.issues.slice(0, MAX_ERRORS).map((issue) => ({
    field: issue.path.map(String).join('.') || '(message)',
    message: issue.message,
  }));
}

/**
 * Reads a dispatch message body: valid, invalid-but-attributable (blocked), or unreadable (rejection).
 * Pure: no I/O, no clock.
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
  const result = DispatchMessageSchema.safeParse(parsed);
  const protoPath = protoKeyPath(parsed);
  const protoError: FieldError[] = protoPath ? [{ field: protoPath, message: 'the key "__proto__" is not allowed' }] : [];
  if (result.success && !protoPath) return { kind: 'valid', message: result.data, parsed };
  if (dispatchId === undefined || origin === undefined) {
    return {
      kind: 'unreadable',
      reason: dispatchId === undefined ? 'no_readable_dispatch_id' : 'no_readable_origin',
      ...(dispatchId ? { dispatchId } : {}),
      ...(origin ? { origin } : {}),
    };
  }
  const target = typeof record.target === 'string' && TARGET_NAME.test(record.target) ? record.target : null;
  return { kind: 'invalid', dispatchId, origin, target, errors: [...protoError, ...(result.success ? [] : fieldErrors(result.error))], parsed };
}
