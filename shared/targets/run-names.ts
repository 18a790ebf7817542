import { createHash } from 'node:crypto';

/**
 * The name the ledger gives an orchestrator's execution of one attempt (CONTRACT §17): the runtime
 * answers the same execution for the same name, so the name carries the dispatch and the attempt, and
 * no two attempts of any dispatches may ever share one.
 *
 * Readable where it fits: the dispatch id with `_` written `__`, `.` written `_d` and `:` written `_c`,
 * then `_` and the attempt — read left to right it decodes to exactly one (dispatchId, attempt), and it
 * always ends in a digit. Where that is longer than the runtime allows, a prefix of it for people, `_`,
 * the SHA-256 of `{dispatchId}:{attempt}` in base64url, and `h`: it ends in a letter, so it is never
 * mistaken for a readable name, and two of them are equal only if their inputs are.
 */
export function executionNameOf(dispatchId: string, attempt: number, maxLength: number): string {
  if (!Number.isSafeInteger(attempt) || attempt < 1) throw new RangeError(`attempt must be a whole number ≥ 1, got ${attempt}`);
  if (maxLength < DIGEST_LENGTH + 2) throw new RangeError(`an execution name needs at least ${DIGEST_LENGTH + 2} characters`);
  const escaped = escapeId(dispatchId);
  const readable = `${escaped}_${attempt}`;
  if (readable.length <= maxLength) return readable;
  const digest = createHash('sha256').update(`${dispatchId}:${attempt}`, 'utf8').digest('base64url');
  return `${cutEscaped(escaped, Math.min(PREFIX_LENGTH, maxLength - DIGEST_LENGTH - 2))}_${digest}h`;
}

/** Step Functions: 1..80 characters (CONTRACT §17: of `[A-Za-z0-9-_]`). */
export const STEP_FUNCTIONS_NAME_LENGTH = 80;

const DIGEST_LENGTH = 43;
const PREFIX_LENGTH = 32;
const ESCAPES: Readonly<Record<string, string>> = { _: '__', '.': '_d', ':': '_c' };

function escapeId(dispatchId: string): string {
  let out = '';
  for (const char of dispatchId) {
    const escape = ESCAPES[char];
    if (escape) out += escape;
    else if (/^[A-Za-z0-9-]$/.test(char)) out += char;
    else throw new RangeError(`a dispatch id holds only [A-Za-z0-9._:-], got ${JSON.stringify(char)}`);
  }
  return out;
}

/** The first `length` characters or fewer of an escaped id, never cutting an escape in two (a prefix for people only). */
function cutEscaped(escaped: string, length: number): string {
  let end = 0;
  while (end < escaped.length) {
    const step = escaped[end] === '_' ? 2 : 1;
    if (end + step > length) break;
    end += step;
  }
  return escaped.slice(0, end);
}

/**
 * The dispatch and attempt a readable execution name carries (`executionNameOf`'s inverse); undefined
 * for a digest name (the execution's input names them then) or a name the ledger never gives.
 */
export function parseExecutionName(name: string): { readonly dispatchId: string; readonly attempt: number } | undefined {
  let dispatchId = '';
  for (let at = 0; at < name.length; at += 1) {
    const char = name[at] as string;
    if (char !== '_') {
      if (!/^[A-Za-z0-9-]$/.test(char)) return undefined;
      dispatchId += char;
      continue;
    }
    const next = name[at + 1];
    const unescaped = next === '_' ? '_' : next === 'd' ? '.' : next === 'c' ? ':' : undefined;
    if (unescaped !== undefined) {
      dispatchId += unescaped;
      at += 1;
      continue;
    }
    const attempt = name.slice(at + 1);
    if (!/^[1-9]\d{0,8}$/.test(attempt) || dispatchId === '') return undefined;
    return { dispatchId, attempt: Number(attempt) };
  }
  return undefined;
}
