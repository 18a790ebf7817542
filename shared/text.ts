/**
 * Text that people read and small items store: bounded, well-formed, without control characters.
 * `printable` and `clip` live in the protocol, whose message reader bounds its errors with them (its
 * `./text` subpath imports nothing, so the status page's browser bundle takes this module too).
 */
import { clip } from '@dispatch-ledger/protocol/text';

export { clip, printable } from '@dispatch-ledger/protocol/text';

// Every character a terminal may act on or that can disguise text: C0 controls (newline and tab
// included), DEL, C1 controls, the Arabic letter mark, zero-width and bidi marks, line and paragraph
// separators, bidi embeddings, overrides and isolates, invisible operators, and the BOM.
const CONTROLS = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]/g;

/** Whether `text` holds a character `escapeControls` would escape. */
export const hasControls = (text: string): boolean => new RegExp(CONTROLS.source).test(text);

/**
 * Shows text as written while keeping a terminal inert (CONTRACT §8 v2: target-supplied text is shown
 * with control and bidi characters escaped): each such character becomes `\uXXXX` (U+202E → `\u202e`,
 * ESC → `\u001b`). The output is printable ASCII wherever the input was not, so escaping is idempotent;
 * a JSON text stays the same JSON (inside a string literal `\u202e` is the same character).
 */
export function escapeControls(text: string): string {
  return text.replace(CONTROLS, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** At most `maxBytes` of UTF-8, cut like `clip` (a preview of a body stored elsewhere). */
export function clipBytes(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return text;
  // The longest clip that fits: binary search over its length in UTF-16 units.
  let low = 1;
  let high = Math.min(text.length, maxBytes);
  while (low < high) {
    const middle = Math.ceil((low + high) / 2);
    if (Buffer.byteLength(clip(text, middle), 'utf8') <= maxBytes) low = middle;
    else high = middle - 1;
  }
  return clip(text, low);
}
