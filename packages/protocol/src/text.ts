/**
 * Text that people read and small items store: bounded, well-formed, without control characters.
 * Imports nothing (no node:, no zod): the status page's browser bundle takes it too.
 */

// C0 controls, DEL, C1 controls, and the bidi/zero-width characters that can disguise text.
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069]+/g;

/** Control and invisible characters become single spaces; the ends are trimmed. */
export function printable(text: string): string {
  return text.replace(UNPRINTABLE, ' ').trim();
}

/**
 * At most `max` UTF-16 units, ending in `…` when cut, never splitting a surrogate pair (a cut emoji
 * would leave invalid Unicode in items, events and views).
 */
export function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max - 1;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return `${text.slice(0, end)}…`;
}
