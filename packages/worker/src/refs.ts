/**
 * Safe evidence refs (CONTRACT §6), checked by the kit before anything is sent: non-empty, POSIX
 * relative, ≤ 512 bytes; no leading `/`, no `\`, no control characters or NUL, no `.` or `..`
 * segment — also when percent-encoded — and no empty segment. The ledger applies the same rule to
 * what arrives; checking here turns a refused upload into an error the run sees at once.
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
