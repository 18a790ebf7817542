import type { attentionEntry } from '../../shared/dispatch/attention.js';
import type { Counts as LedgerCounts } from '../../shared/dispatch/counts.js';
import type { historyEntry } from '../../shared/dispatch/view.js';
import type { TargetAtCapacity } from '../../shared/usecases/flow.js';
import { load, routeUrl, type Loaded, type PageConfig } from './api.js';
import { appendOlder, renewed, type Run } from './paging.js';
import { badge, cell, dispatchLink, el, facts, replaceKeepingFocus, section, when, type Child } from './dom.js';
import { ATTENTION_ORDER, attentionCommand, checkCommand, monitorWords } from './words.js';

/** A dispatch on the attention list (`GET /attention`); `missing` on an orphan. */
type AttentionLine = ReturnType<typeof attentionEntry> & { readonly missing?: readonly string[] };
type AttentionItem = AttentionLine | TargetAtCapacity;

/** `GET /dispatches` (operator, CONTRACT §2 v2): every origin's dispatches, newest first — an origin history's entry and its origin. */
type ListItem = ReturnType<typeof historyEntry> & { readonly origin: string };

/** `GET /counts`: counts by phase, execution status and evidence outcome, and when. */
type Counts = LedgerCounts & { readonly asOf: string };

/** A dispatch's place in the list: its id (the operator's list holds every origin's, and ids are the ledger's). */
const keyOf = (item: ListItem): string => item.dispatchId;

/** How many more pages a refresh reads to meet the older pages loaded, before it drops them. */
const CATCH_UP_PAGES = 4;

const couldNotLoad = (what: string, problem: string): HTMLElement => el('p', { className: 'problem', attrs: { role: 'status' } }, `Could not load ${what}: ${problem}`);

function attentionCard(item: AttentionItem, config: PageConfig): HTMLElement {
  if (item.kind === 'at_capacity') {
    const target = item as TargetAtCapacity;
    return el(
      'li',
      { className: 'card' },
      el('p', { className: 'card-title' }, el('strong', {}, target.target)),
      facts([
        ['slots held', `${target.held} of ${target.limit}`],
        ['held by runs of unknown status', target.heldByUnknownRuns],
        ['waiting', target.waiting],
        ['full since', target.since ?? '—'],
      ]),
    );
  }
  const line = item as AttentionLine;
  const words = line.kind === 'unknown' || line.kind === 'approval_wait_expired' ? monitorWords(line.monitorStatus) : null;
  const missing = line.missing ?? [];
  return el(
    'li',
    { className: 'card' },
    el('p', { className: 'card-title' }, dispatchLink(line.dispatchId), ' ', badge(line.status ?? line.kind)),
    el('p', { className: 'meta' }, `${line.origin} → ${line.target} · attempt ${line.attempt} · since `, when(line.since)),
    words ? el('p', {}, words) : null,
    missing.length > 0 ? el('p', {}, 'Missing: ', ...missing.flatMap((ref, index): Child[] => [index > 0 ? ', ' : null, el('code', {}, ref)])) : null,
    // The ledger's own words where they add to ours; for a lost run, the command that looks it up.
    line.kind === 'unknown'
      ? el('p', { className: 'reason' }, 'Look it up: ', el('code', {}, checkCommand(line.dispatchId, line.origin, config.connection, config.remote)))
      : line.reason && line.kind !== 'orphan_no_delivery'
        ? el('p', { className: 'reason' }, line.reason)
        : null,
  );
}

/** What needs a person: the entries read, and the kinds with more than were read (each kind's own list has a next page). */
interface Attention {
  readonly items: readonly AttentionItem[];
  readonly more: ReadonlySet<string>;
}

/** One read of the whole list while it fits a page; past that, a page of each kind. */
const ATTENTION_PAGE = 100;
const ATTENTION_PER_KIND = 25;

/**
 * What needs a person. The ledger lists the kinds one after another, so past one page a backlog of an
 * early kind (100,000 retrying in a target's outage) hid every later kind — a dropped result, a pending
 * cancel — and the page said "Retrying (100)" as if that were all. So: one read while the whole list
 * fits a page (the usual case); when it does not, each kind read on its own, its count marked "+" when
 * it has more than was read.
 */
async function loadAttention(config: PageConfig): Promise<Loaded<Attention>> {
  const all = await load<{ items: AttentionItem[]; cursor?: string | null }>(routeUrl(config, 'attention', {}, { limit: String(ATTENTION_PAGE) }));
  if (!all.ok || !all.body.cursor) return all.ok ? { ok: true, body: { items: all.body.items, more: new Set() } } : all;
  const first = all.body.items;
  const kinds = ATTENTION_ORDER.map((entry) => entry.kind);
  const pages = await Promise.all(kinds.map((kind) => load<{ items: AttentionItem[]; cursor?: string | null }>(routeUrl(config, 'attention', {}, { kind, limit: String(ATTENTION_PER_KIND) }))));
  // Every kind's own read failed: the ledger is not answering, and the page says so (not an empty list).
  const failed = pages.find((page): page is Extract<typeof page, { ok: false }> => !page.ok);
  if (failed && pages.every((page) => !page.ok)) return failed;
  const items: AttentionItem[] = [];
  const more = new Set<string>();
  kinds.forEach((kind, index) => {
    const page = pages[index];
    if (page?.ok) {
      items.push(...page.body.items);
      if (page.body.cursor) more.add(kind);
    } else {
      // That kind's own read failed: what the first page held of it, marked as not all.
      items.push(...first.filter((item) => item.kind === kind));
      more.add(kind);
    }
  });
  // A kind this page has no title for (a newer ledger's): as the first page held it.
  const known = new Set(kinds);
  for (const item of first.filter((entry) => !known.has(entry.kind))) {
    items.push(item);
    more.add(item.kind);
  }
  return { ok: true, body: { items, more } };
}

function renderAttention({ items, more }: Attention, config: PageConfig): Child[] {
  if (items.length === 0 && more.size === 0) return [el('p', { className: 'quiet' }, 'Nothing needs a person right now.')];
  const known = new Set(ATTENTION_ORDER.map((entry) => entry.kind));
  const groups = [...ATTENTION_ORDER, ...[...new Set(items.map((item) => item.kind))].filter((kind) => !known.has(kind)).map((kind) => ({ kind, title: kind, meaning: '' }))];
  return groups.flatMap(({ kind, title, meaning }) => {
    const mine = items.filter((item) => item.kind === kind);
    if (mine.length === 0 && !more.has(kind)) return [];
    const rest = more.has(kind) ? el('p', { className: 'more' }, mine.length === 0 ? 'Some may be waiting; the list: ' : `More than ${mine.length}; the whole list: `, el('code', {}, attentionCommand(kind, config.connection))) : null;
    return [
      section(`attention-${kind}`, `${title} (${mine.length}${more.has(kind) ? '+' : ''})`, 'h3', meaning ? el('p', { className: 'meaning' }, meaning) : null, el('ul', { className: 'cards' }, ...mine.map((item) => attentionCard(item, config))), rest),
    ];
  });
}

function countTable(caption: string, counts: Readonly<Record<string, number>>): HTMLTableElement {
  // The buckets that hold something, largest first; the empty ones on one line, so the list stays in view.
  const rows = Object.entries(counts).filter(([, count]) => count > 0).sort(([, a], [, b]) => b - a);
  const empty = Object.entries(counts).filter(([, count]) => count === 0).map(([name]) => name);
  return el(
    'table',
    { className: 'counts' },
    el('caption', {}, caption),
    el('thead', {}, el('tr', {}, el('th', { attrs: { scope: 'col' } }, 'state'), el('th', { attrs: { scope: 'col' }, className: 'number' }, 'count'))),
    el(
      'tbody',
      {},
      ...rows.map(([name, count]) => el('tr', {}, el('th', { attrs: { scope: 'row' } }, badge(name)), el('td', { className: 'number' }, count))),
      empty.length > 0 ? el('tr', {}, el('td', { className: 'note', attrs: { colspan: '2' } }, `0: ${empty.join(', ')}`)) : null,
    ),
  );
}

function renderCounts(counts: Counts): Child[] {
  return [
    el('p', { className: 'meta' }, `${counts.total} dispatches · as of `, when(counts.asOf)),
    el('div', { className: 'count-grid' }, countTable('Phase', counts.phase), countTable('Execution', counts.execution), countTable('Evidence', counts.evidence)),
  ];
}

function listRow(item: ListItem): HTMLTableRowElement {
  return el(
    'tr',
    {},
    cell('created', when(item.createdAt)),
    cell('dispatch', dispatchLink(item.dispatchId)),
    cell('origin → target', `${item.origin} → ${item.target}`),
    cell('phase', badge(item.phase)),
    cell('execution', badge(item.status)),
    cell('run / reason', item.blockedReason ?? item.runId ?? '—'),
  );
}

const matches = (item: ListItem, search: string): boolean =>
  search === '' || [item.dispatchId, item.origin, item.target, item.runId ?? '', item.blockedReason ?? ''].some((value) => value.toLowerCase().includes(search));

function select(name: string, label: string, values: readonly string[]): HTMLElement {
  const id = `filter-${name}`;
  return el('p', { className: 'field' }, el('label', { attrs: { for: id } }, label), el('select', { id, attrs: { name } }, el('option', { attrs: { value: '' } }, 'any'), ...values.map((value) => el('option', { attrs: { value } }, value))));
}

function input(name: string, label: string, type: string, placeholder: string): HTMLElement {
  const id = `filter-${name}`;
  return el('p', { className: 'field' }, el('label', { attrs: { for: id } }, label), el('input', { id, attrs: { name, type, placeholder, maxlength: '128', autocomplete: 'off' } }));
}

/** The overview: what needs a person, counts by state, and every dispatch, filterable. */
export function mountOverview(main: HTMLElement, config: PageConfig): () => Promise<boolean> {
  const attentionBody = el('div', { className: 'attention-groups' });
  const countsBody = el('div');
  const listBody = el('div', { className: 'list' });
  const more = el('p');
  const form = el(
    'form',
    { className: 'filters', attrs: { role: 'search', 'aria-label': 'Filter dispatches' } },
    input('search', 'Search', 'search', 'dispatch, origin, target, run'),
    select('status', 'Execution', config.statuses),
    select('phase', 'Phase', config.phases),
    input('target', 'Target', 'text', 'any'),
    input('origin', 'Origin', 'text', 'any'),
  );
  main.replaceChildren(
    section('attention', 'Needs a person', 'h2', attentionBody),
    section('counts', 'Counts by state', 'h2', countsBody),
    section('dispatches', 'Dispatches', 'h2', form, listBody, more),
  );

  // One contiguous run of the list from its newest: the newest page is renewed on every refresh; older
  // pages someone asked for stay below it, merged with it so that nothing falls between (ui/page/paging.ts).
  let list: Run<ListItem> = { items: [], cursor: null };
  /**
   * The filter `list` was read under (its query without a cursor). Regression: a refresh for a new filter
   * that failed, or one for the old filter that answered after it, left the old filter's rows and cursor
   * under the new filter — rows that did not match it, and "Load older" paging the old list's cursor.
   */
  let listFor = '';
  let olderLoaded = false;
  let listProblem: string | null = null;
  const value = (name: string): string => (form.elements.namedItem(name) as HTMLInputElement | HTMLSelectElement | null)?.value.trim() ?? '';
  const query = (cursor?: string): string => {
    const params: Record<string, string> = { limit: '50' };
    for (const name of ['status', 'phase', 'target', 'origin']) if (value(name) !== '') params[name] = value(name);
    if (cursor) params['cursor'] = cursor;
    return routeUrl(config, 'listDispatches', {}, params);
  };

  const showList = (): void => {
    if (listProblem !== null) {
      replaceKeepingFocus(listBody, [couldNotLoad('the dispatches', listProblem)]);
      more.replaceChildren();
      return;
    }
    const search = value('search').toLowerCase();
    const { items } = list;
    const shown = items.filter((item) => matches(item, search));
    replaceKeepingFocus(listBody, [
      shown.length === 0
        ? el('p', { className: 'quiet' }, items.length > 0 ? 'No loaded dispatch matches the search.' : list.cursor ? 'None among the newest dispatches read; load older ones to look further.' : 'No dispatches.')
        : el(
            'table',
            { className: 'dispatches' },
            el('caption', { className: 'visually-hidden' }, 'Dispatches, newest first'),
            el('thead', {}, el('tr', {}, ...['created', 'dispatch', 'origin → target', 'phase', 'execution', 'run / reason'].map((name) => el('th', { attrs: { scope: 'col' } }, name)))),
            el('tbody', {}, ...shown.map(listRow)),
          ),
    ]);
    more.replaceChildren(list.cursor ? el('button', { attrs: { type: 'button' }, onClick: () => void loadOlder() }, 'Load older dispatches') : '');
  };

  const loadOlder = async (): Promise<void> => {
    const from = list;
    // A filter changed and its list is not read yet: this cursor is the old filter's.
    if (!from.cursor || query() !== listFor) return;
    const page = await load<Run<ListItem>>(query(from.cursor));
    // A refresh that started over (a filter changed) while this page was read: it belongs to no list shown.
    if (list !== from) return;
    if (!page.ok) {
      listProblem = page.problem;
    } else {
      list = appendOlder(list, page.body, keyOf);
      olderLoaded = true;
    }
    showList();
  };

  form.addEventListener('input', (event) => {
    if ((event.target as HTMLElement | null)?.getAttribute('name') === 'search') showList();
  });
  form.addEventListener('change', (event) => {
    if ((event.target as HTMLElement | null)?.getAttribute('name') !== 'search') void refresh(true);
  });
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void refresh(true);
  });

  /** Reads every section again; answers whether any of them could be read. */
  const refresh = async (restart = false): Promise<boolean> => {
    const filter = query();
    const [attention, counts, newest] = await Promise.all([
      loadAttention(config),
      load<Counts>(routeUrl(config, 'counts')),
      load<Run<ListItem>>(filter),
    ]);
    replaceKeepingFocus(attentionBody, attention.ok ? renderAttention(attention.body, config) : [couldNotLoad('what needs a person', attention.problem)]);
    replaceKeepingFocus(countsBody, counts.ok ? renderCounts(counts.body) : [couldNotLoad('the counts', counts.problem)]);
    if (query() !== filter) {
      // The filter changed while this was read: its refresh (under way) shows the list.
    } else if (newest.ok) {
      listProblem = null;
      // Another filter's list is dropped whole, older pages and cursor too.
      if (restart || filter !== listFor) {
        olderLoaded = false;
        list = { items: [], cursor: null };
      }
      const readAfter = async (cursor: string): Promise<Run<ListItem> | undefined> => {
        const page = await load<Run<ListItem>>(query(cursor));
        return page.ok ? page.body : undefined;
      };
      const renewedList = await renewed(list, newest.body, olderLoaded, readAfter, keyOf, CATCH_UP_PAGES);
      if (query() === filter) {
        list = renewedList;
        listFor = filter;
      }
    } else {
      listProblem = newest.problem;
    }
    showList();
    return attention.ok || counts.ok || newest.ok;
  };
  return () => refresh();
}
