/**
 * Safe evidence refs (CONTRACT §6): non-empty, POSIX relative, ≤ 512 bytes; no leading `/`, no `\`,
 * no control characters or NUL, no `.` or `..` segment — also when percent-encoded — and no empty segment.
 */
export const MAX_REF_BYTES = 512;

export type RefProblem =
  | 'empty'
  | 'too_long'
  | 'absolute'
  | 'backslash'
  | 'control_character'
  | 'empty_segment'
  | 'dot_segment'
  | 'bad_percent_encoding'
  | 'malformed_unicode';

// Every C0 control, DEL and the C1 range.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** Why a ref is unsafe, or undefined when it is safe. Checks the ref as given and percent-decoded. */
export function refProblem(ref: string): RefProblem | undefined {
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

export const isSafeRef = (ref: string): boolean => refProblem(ref) === undefined;

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
