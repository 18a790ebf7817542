import { InvalidCursorError } from '../ledger/port.js';

/** How many entries of each list the dispatch view carries; older ones are paged (CONTRACT §2 v2). */
export const VIEW_LIST_LIMIT = 50;

export type ListName = 'receipts' | 'operatorReceipts' | 'manualAttestations' | 'runs';

/** The cursor of the entries before `end` (exclusive) of one list: opaque, checked when it comes back. */
const encode = (list: ListName, end: number): string => Buffer.from(`${list}:${end}`, 'utf8').toString('base64url');

/**
 * The newest `limit` entries before the cursor (oldest first, as the lists are kept), and the cursor to
 * the ones before them. A cursor of another list, or one the ledger could not have issued, is 400.
 */
export function newestPage<T>(list: ListName, entries: readonly T[], cursor: string | undefined, limit = VIEW_LIST_LIMIT): { items: T[]; more: string | null } {
  let end = entries.length;
  if (cursor !== undefined) {
    const match = /^([A-Za-z]+):(\d{1,9})$/.exec(cursor.length <= 64 ? Buffer.from(cursor, 'base64url').toString('utf8') : '');
    if (!match || match[1] !== list || encode(list, Number(match[2])) !== cursor || Number(match[2]) < 1 || Number(match[2]) > entries.length) {
      throw new InvalidCursorError();
    }
    end = Number(match[2]);
  }
  const start = Math.max(0, end - limit);
  return { items: entries.slice(start, end), more: start > 0 ? encode(list, start) : null };
}
