import { DEFAULT_LIST_LIMIT } from '@dispatch-ledger/protocol';
import { parseCommandArgs } from './args.js';
import type { Counts } from '../shared/dispatch/counts.js';
import { printAnswer } from './answer.js';
import { connect, CONNECTION_OPTIONS, connectionArgs, type Connect } from './connect.js';
import { nextPage, shown, table } from './table.js';

/**
 * The operator's overview (CONTRACT §2 v2): `ledger list`, every origin's dispatches newest first,
 * and `ledger counts`, what the ledger holds by phase, execution status and evidence outcome. Both are
 * operator routes: called as the operator, locally and on a stack alike.
 */

type Print = (line: string) => void;

/** A dispatch as `GET /dispatches` lists it: the origin history's entry and its origin. */
export interface ListedDispatch {
  readonly dispatchId: string;
  readonly origin: string;
  readonly target: string;
  readonly createdAt: string;
  readonly phase: string;
  readonly status: string | null;
  readonly runId: string | null;
  readonly attempt: number;
  readonly blockedReason: string | null;
}

const FILTERS = ['status', 'target', 'origin', 'phase'] as const;

/**
 * `ledger list`'s page for people: the table `ledger status` prints with an origin column, then the
 * command for the next page (the same filters, the cursor) when there is one. Every cell escaped.
 */
export function describeList(page: { readonly items: readonly ListedDispatch[]; readonly cursor: string | null }, next: readonly string[]): string {
  const lines = [
    page.items.length === 0
      ? 'no dispatches'
      : table(
          ['created', 'dispatch', 'origin', 'target', 'phase', 'status', 'run / reason'],
          page.items.map((item) => [item.createdAt, item.dispatchId, item.origin, item.target, item.phase, item.status ?? '—', item.blockedReason ?? item.runId ?? '—']),
        ),
  ];
  if (page.cursor) lines.push('', ...nextPage('list', next, page.cursor));
  return lines.join('\n');
}

/** `ledger list [--status S] [--target T] [--origin O] [--phase P] [--limit N] [--cursor C] [--json]` (operator). */
export async function list(args: string[], print: Print, connectTo: Connect = connect): Promise<number> {
  const { values } = parseCommandArgs({
    args,
    options: {
      ...CONNECTION_OPTIONS,
      status: { type: 'string' },
      target: { type: 'string' },
      origin: { type: 'string' },
      phase: { type: 'string' },
      limit: { type: 'string', default: String(DEFAULT_LIST_LIMIT) },
      cursor: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  const filters = FILTERS.flatMap((name): Array<[string, string]> => {
    const value = values[name];
    return value === undefined ? [] : [[name, value]];
  });
  const query = new URLSearchParams([...filters, ['limit', values.limit], ...(values.cursor ? [['cursor', values.cursor] as [string, string]] : [])]);
  const ledger = await connectTo(values);
  const answer = await ledger.raw('listDispatches', { query: Object.fromEntries(query), as: 'operator' });
  // The next page's command keeps what chose this one: the filters, the limit and the connection.
  const next = [...filters.flatMap(([name, value]) => [`--${name}`, value]), '--limit', values.limit, ...connectionArgs(values)];
  return printAnswer(answer, values.json, print, (body) => describeList(body as { items: ListedDispatch[]; cursor: string | null }, next));
}

/** `ledger counts`'s lines for people: the total, then each group's states in the contract's order, zeros included. */
export function describeCounts(counts: Counts & { readonly asOf?: string }): string {
  const rows = (['phase', 'execution', 'evidence'] as const).flatMap((group) => Object.entries(counts[group]).map(([state, count], index) => [index === 0 ? group : '', state, String(count)]));
  return [
    shown`${counts.total} dispatch${counts.total === 1 ? '' : 'es'} held${counts.asOf ? ` as of ${counts.asOf}` : ''} (kept from the table's stream: a moment behind the dispatches)`,
    table(['by', 'state', 'dispatches'], rows),
  ].join('\n');
}

/** `ledger counts [--json]`: what the ledger holds now, by phase, execution status and evidence outcome (operator). */
export async function counts(args: string[], print: Print, connectTo: Connect = connect): Promise<number> {
  const { values } = parseCommandArgs({ args, options: { ...CONNECTION_OPTIONS, json: { type: 'boolean', default: false } } });
  const ledger = await connectTo(values);
  const answer = await ledger.raw('counts', { as: 'operator' });
  return printAnswer(answer, values.json, print, (body) => describeCounts(body as Counts & { asOf: string }));
}
