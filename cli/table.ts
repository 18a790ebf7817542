/** A plain-text table for people: columns padded to their widest cell, values cut at `maxWidth`. */
export function table(headers: readonly string[], rows: ReadonlyArray<readonly string[]>, maxWidth = 60): string {
  const cut = (value: string): string => (value.length > maxWidth ? `${value.slice(0, maxWidth - 1)}…` : value);
  const cells = [headers, ...rows].map((row) => row.map((cell) => cut(cell.replace(/\s+/g, ' '))));
  const widths = headers.map((_, column) => Math.max(...cells.map((row) => (row[column] ?? '').length)));
  const line = (row: readonly string[]): string => row.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join('  ').trimEnd();
  const [head, ...body] = cells;
  return [line(head ?? []), line(widths.map((width) => '─'.repeat(width))), ...body.map(line)].join('\n');
}
