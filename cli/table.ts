import { escapeControls } from '../shared/text.js';
import { shellWord } from '../shared/dispatch/commands.js';

export interface TableOptions {
  /** The widest a line of the grid may be. @default the terminal's width, else 80 */
  readonly width?: number;
  /**
   * Columns of free text (a summary, a preview) cut at this many characters, marked `…`. No other
   * column is ever cut: ids, refs and commands are copied by people, so they are shown whole.
   */
  readonly clip?: Readonly<Record<string, number>>;
}

/**
 * A plain-text table for people: columns padded to their widest cell. When the grid would be wider than
 * `width`, its widest columns leave it, one at a time, and each row's value of them is printed whole on
 * its own line below the row (`  why: …`), so nothing an operator copies is ever cut. Every cell is
 * shown with its control and bidi characters escaped (CONTRACT §8 v2: a target's runId or a reason
 * quoting it cannot move the cursor, recolour the terminal or reverse what follows), then its remaining
 * whitespace runs collapsed to one space.
 *
 * @example
 * table(['kind', 'dispatch', 'why'], [['unknown', 'd-1', 'stalled; check: npx ledger check d-1 --refresh']], { width: 40 })
 * // kind     dispatch
 * // ───────  ────────
 * // unknown  d-1
 * //   why: stalled; check: npx ledger check d-1 --refresh
 */
export function table(headers: readonly string[], rows: ReadonlyArray<readonly string[]>, options: TableOptions = {}): string {
  const width = options.width ?? (process.stdout.columns || 80);
  const cut = (header: string, value: string): string => {
    const max = options.clip?.[header];
    return max !== undefined && value.length > max ? `${value.slice(0, max - 1)}…` : value;
  };
  const cells = rows.map((row) => headers.map((header, column) => cut(header, escapeControls(row[column] ?? '').replace(/\s+/g, ' '))));
  let kept = headers.map((_, column) => column);
  const widthOf = (column: number): number => Math.max((headers[column] ?? '').length, ...cells.map((row) => (row[column] ?? '').length));
  const gridWidth = (columns: readonly number[]): number => columns.reduce((sum, column) => sum + widthOf(column), 0) + 2 * Math.max(0, columns.length - 1);
  // The widest column leaves the grid first, until it fits (the first column always stays).
  while (kept.length > 1 && gridWidth(kept) > width) {
    const widest = kept.slice(1).reduce((best, column) => (widthOf(column) > widthOf(best) ? column : best));
    kept = kept.filter((column) => column !== widest);
  }
  const moved = headers.map((_, column) => column).filter((column) => !kept.includes(column));
  const line = (row: readonly string[]): string => kept.map((column) => (row[column] ?? '').padEnd(widthOf(column))).join('  ').trimEnd();
  const out = [line(headers), line(headers.map((_, column) => '─'.repeat(widthOf(column))))];
  for (const row of cells) {
    out.push(line(row));
    for (const column of moved) out.push(`  ${headers[column] ?? ''}: ${row[column] ?? ''}`);
  }
  return out.join('\n');
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

/**
 * The line for the next page of a list, when its answer has a cursor: the whole command, `flags` being
 * what chose this page (the filters, the limit, the origin, the connection) — a cursor read with other
 * flags is refused, or reads another list.
 *
 * @example
 * nextPage('inbox list', ['--state', 'pending'], 'c-2') // ['more: npx ledger inbox list --state pending --cursor c-2']
 */
export function nextPage(command: string, flags: readonly string[], cursor: unknown): string[] {
  // Each flag and value one shell word: they are the person's own (a URL with `&`, a filter with a space).
  return typeof cursor === 'string' && cursor !== '' ? [shown`more: npx ledger ${[command, ...[...flags, '--cursor', cursor].map(shellWord)].join(' ')}`] : [];
}
