import { escapeControls } from '../shared/text.js';

/**
 * A plain-text table for people: columns padded to their widest cell, values cut at `maxWidth`. Every
 * cell is shown with its control and bidi characters escaped (CONTRACT §8 v2: a target's runId or a
 * reason quoting it cannot move the cursor, recolour the terminal or reverse what follows), then its
 * remaining whitespace runs collapsed to one space.
 */
export function table(headers: readonly string[], rows: ReadonlyArray<readonly string[]>, maxWidth = 60): string {
  const cut = (value: string): string => (value.length > maxWidth ? `${value.slice(0, maxWidth - 1)}…` : value);
  const cells = [headers, ...rows].map((row) => row.map((cell) => cut(escapeControls(cell).replace(/\s+/g, ' '))));
  const widths = headers.map((_, column) => Math.max(...cells.map((row) => (row[column] ?? '').length)));
  const line = (row: readonly string[]): string => row.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join('  ').trimEnd();
  const [head, ...body] = cells;
  return [line(head ?? []), line(widths.map((width) => '─'.repeat(width))), ...body.map(line)].join('\n');
}

/**
 * A line for people from a template whose every value is escaped (its newlines too), so a value cannot
 * add a line or a control sequence of its own: `` shown`run ${view.runId}` ``.
 */
export function shown(strings: TemplateStringsArray, ...values: unknown[]): string {
  return strings.reduce((line, text, index) => `${line}${index > 0 ? escapeControls(String(values[index - 1])) : ''}${text}`, '');
}

/**
 * What reaches the terminal, as the last guard: every printed line with its control and bidi
 * characters escaped, the newlines between lines kept. A `--json` line stays the same JSON:
 * JSON.stringify escapes C0 controls itself but leaves DEL, C1, U+2028/9, bidi overrides and isolates
 * raw, and `\u202e` inside a JSON string is the very same character.
 */
export function forTerminal(text: string): string {
  return text.split('\n').map(escapeControls).join('\n');
}
