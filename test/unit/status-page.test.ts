import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { check } from '../../cli/dispatch.js';
import { cancel } from '../../cli/flow.js';
import { approve, redispatch } from '../../cli/lifecycle.js';
import { receipt } from '../../cli/receipt.js';
import { manual } from '../../cli/manual.js';
import { closeFakeApis, fakeApi } from '../support/fake-api.js';
import { proxyDecision, RELAYED } from '../../ui/routes.js';
import { appendOlder, mergeNewest, renewed, type Run } from '../../ui/page/paging.js';
import { ATTENTION_ORDER, bannersFor, commandsFor, monitorLine, monitorWords } from '../../ui/page/words.js';
import { shellWord } from '../../shared/dispatch/commands.js';
import { ATTENTION_KINDS } from '../../shared/dispatch/attention.js';
import type { DispatchView } from '../../shared/dispatch/view.js';

afterEach(async () => {
  await closeFakeApis();
});

const decide = (path: string, query = '') => proxyDecision(path, new URLSearchParams(query));

describe('proxyDecision (the status page relays only its read routes)', () => {
  it('maps each allowed read to the ledger path, keeping only its own bounded query', () => {
    expect(decide('/api/attention', 'kind=unknown&limit=100')).toEqual({ kind: 'proxy', route: 'attention', params: {}, query: { kind: 'unknown', limit: '100' }, path: '/attention?kind=unknown&limit=100' });
    expect(decide('/api/counts')).toEqual({ kind: 'proxy', route: 'counts', params: {}, query: {}, path: '/counts' });
    expect(decide('/api/dispatches', 'status=running&origin=planner&limit=50&cursor=abc')).toMatchObject({ kind: 'proxy', route: 'listDispatches', path: '/dispatches?status=running&origin=planner&limit=50&cursor=abc' });
    expect(decide('/api/dispatches/d-1', 'refresh=true')).toEqual({ kind: 'proxy', route: 'getDispatch', params: { dispatchId: 'd-1' }, query: { refresh: 'true' }, path: '/dispatches/d-1?refresh=true' });
    expect(decide('/api/dispatches/d%3A1/operator-receipts', 'cursor=c')).toEqual({ kind: 'proxy', route: 'listOperatorReceipts', params: { dispatchId: 'd:1' }, query: { cursor: 'c' }, path: '/dispatches/d%3A1/operator-receipts?cursor=c' });
    expect(decide('/api/rejections', 'limit=5')).toMatchObject({ kind: 'proxy', route: 'rejections', path: '/rejections?limit=5' });
  });

  it('relays exactly the GETs of the route table the operator may call', () => {
    expect(RELAYED.map((entry) => entry.name).sort()).toEqual(['attention', 'counts', 'getDispatch', 'listDispatches', 'listManualAttestations', 'listOperatorReceipts', 'listReceipts', 'listRuns', 'rejections']);
  });

  it('refuses every route outside the allowlist, a path that smuggles one in, and unknown or repeated parameters', () => {
    for (const path of ['/api/origins/planner/dispatches', '/api/targets/t/slots/release', '/api/dispatches/d-1/cancel', '/api/dispatches/..%2Fcounts', '/api/dispatches/d-1/receipts/x', '/api/runs/r/events', '/api', '/api/', '/attention']) {
      expect(decide(path), path).toMatchObject({ kind: 'refused', status: 404 });
    }
    expect(decide('/api/dispatches/%E0%A4%A')).toMatchObject({ kind: 'refused', status: 400 });
    expect(decide('/api/counts', 'x=1')).toMatchObject({ kind: 'refused', status: 400 });
    expect(decide('/api/dispatches/d-1', 'refresh=yes')).toMatchObject({ kind: 'refused', status: 400 });
    expect(decide('/api/attention', 'limit=1&limit=2')).toMatchObject({ kind: 'refused', status: 400 });
    expect(decide('/api/attention', `cursor=${'c'.repeat(4097)}`)).toMatchObject({ kind: 'refused', status: 400 });
  });
});

const view = (over: Omit<Partial<DispatchView>, 'execution'> & { execution?: Partial<DispatchView['execution']> }): DispatchView =>
  ({
    dispatchId: 'd-1',
    origin: 'team-a',
    target: 'demo-agent',
    runId: "r-'1",
    attempt: 1,
    phase: 'submitted',
    blockedReason: null,
    ownerDelivery: { state: 'unconfirmed', receiptId: null, basis: null },
    ...over,
    execution: { status: 'unknown', pendingApproval: null, ...over.execution },
  }) as DispatchView;

describe('the commands the dispatch page suggests', () => {
  it('checks first, and offers a forced redispatch only beside a cancel while the run may be active', () => {
    const lines = commandsFor(view({}), [], false).map((command) => command.line);
    expect(lines[0]).toBe('npx ledger check d-1 --refresh --origin team-a');
    expect(lines).toContain("npx ledger cancel d-1 --reason 'WHY' --origin team-a");
    expect(lines).toContain("npx ledger redispatch d-1 --reason 'WHY' --force --origin team-a");
    // A target's run id is quoted for the shell, whatever it holds.
    expect(lines).toContain(`npx ledger receipt d-1 --run 'r-'\\''1' --kind artifact_acceptance --state accepted --verified-by YOU --origin team-a`);
  });

  it('suggests commands a shell hands back word for word and the CLI reads as meant, whatever the ids (regression: a dash-led dispatch, run or approval id was read as an option)', async () => {
    const api = await fakeApi(() => ({ status: 500, body: { error: { code: 'internal', message: 'only the request is looked at' } } }));
    const commands = { check, cancel, approve, redispatch, receipt, manual } as const;
    const pending = { approvalId: "-a 1'", requestedAt: '2026-12-05T10:00:00.000Z' };
    const waitingForPerson = view({ dispatchId: '-d-2', phase: 'accepted', runId: null, submission: { waitingFor: 'person' } as DispatchView['submission'], execution: { status: null } });
    for (const running of [
      view({ dispatchId: '-d-1', runId: '-r 1/$x', execution: { status: 'waiting_for_approval', pendingApproval: pending } }),
      // zsh reads a word that begins with '=' as a command's path, and a bare '~' as the home folder.
      view({ runId: '=ls', execution: { status: 'waiting_for_approval', pendingApproval: { approvalId: '~', requestedAt: pending.requestedAt } } }),
      waitingForPerson,
    ]) {
      for (const { line } of commandsFor(running, ['--stack', 'my stack'], true)) {
        // What a person pastes, as /bin/sh splits it.
        const [npx, ledger, verb = '', ...args] = execFileSync('/bin/sh', ['-c', `printf '%s\\0' ${line}`], { encoding: 'utf8' }).split('\0').slice(0, -1);
        expect([npx, ledger], line).toEqual(['npx', 'ledger']);
        const command = commands[verb as keyof typeof commands];
        expect(command, line).toBeDefined();
        await command(args, () => undefined, api.connect);
        const seen = api.seen.at(-1);
        expect(seen?.path, line).toContain(`/dispatches/${encodeURIComponent(running.dispatchId)}`);
        if (verb === 'approve') expect(seen?.body, line).toMatchObject({ approvalId: running.execution.pendingApproval?.approvalId });
        if (verb === 'receipt') expect(seen?.body, line).toMatchObject({ runId: running.runId });
      }
    }
    // What /bin/sh (dash) keeps as it is, zsh would not: those words are quoted.
    const zsh = commandsFor(view({ runId: '=ls', execution: { status: 'waiting_for_approval', pendingApproval: { approvalId: '~', requestedAt: pending.requestedAt } } }), [], false).map((command) => command.line);
    expect(zsh.filter((line) => line.includes("--run '=ls' ") || line.includes("--approval-id '~' "))).toHaveLength(3);
  });

  it('redispatches without force once the run is over, and names the connection on a deployed stack', () => {
    const lines = commandsFor(view({ execution: { status: 'failed' } }), ['--stack', 'prod'], true).map((command) => command.line);
    expect(lines).toContain("npx ledger redispatch d-1 --reason 'WHY' --stack prod");
    expect(lines.some((line) => line.includes('--force') || line.includes('cancel'))).toBe(false);
  });

  it('offers a redriven run only the forced redispatch that stops it (was: a plain redispatch, which the ledger refuses as a second writer)', () => {
    const lines = commandsFor(view({ execution: { status: 'failed', redriven: { at: '2026-12-05T10:02:00.000Z', count: 1 } } }), [], false).map((command) => command.line);
    expect(lines.filter((line) => line.includes('redispatch'))).toEqual(["npx ledger redispatch d-1 --reason 'WHY' --force --origin team-a"]);
  });

  it('says what a monitor verdict means, and leaves an unknown one as it is', () => {
    expect(monitorWords('target_not_found')).toMatch(/404/);
    expect(monitorWords(null)).toBeNull();
    expect(monitorWords('something_new')).toBe('something_new');
    expect(shellWord('a b')).toBe("'a b'");
  });
});

describe("the overview's list: one contiguous run from the newest, whatever arrives between refreshes", () => {
  const key = (id: string): string => id;
  /** The ledger's list, newest first; a cursor is the index of the next item. */
  const ledger: string[] = [];
  const arrive = (count: number): void => {
    for (let i = 0; i < count; i += 1) ledger.unshift(`d-${ledger.length}`);
  };
  const pageAt = (from: number, limit: number): Run<string> => {
    const items = ledger.slice(from, from + limit);
    return { items, cursor: from + limit < ledger.length ? `${ledger.indexOf(items[items.length - 1] ?? '') + 1}:${items[items.length - 1] ?? ''}` : null };
  };
  // A cursor is a position after an item, as the ledger's is: it goes on after that item wherever it now stands.
  const after = (cursor: string, limit: number): Run<string> => pageAt(ledger.indexOf(cursor.slice(cursor.indexOf(':') + 1)) + 1, limit);

  it('merges the renewed newest page into older pages loaded, so what it pushed off stays shown (the gap of keeping the old cursor)', () => {
    ledger.splice(0);
    arrive(10); // d-9 … d-0
    const first = pageAt(0, 3); // d-9 d-8 d-7
    const loaded = appendOlder(first, after(first.cursor ?? '', 3), key); // … d-4
    expect(loaded.items).toEqual(['d-9', 'd-8', 'd-7', 'd-6', 'd-5', 'd-4']);
    arrive(2); // d-11 d-10 push d-8 and d-7 off the newest page
    const newest = pageAt(0, 3);
    expect(newest.items).toEqual(['d-11', 'd-10', 'd-9']);
    const merged = mergeNewest(loaded, newest, key);
    expect(merged).toEqual({ items: ['d-11', 'd-10', 'd-9', 'd-8', 'd-7', 'd-6', 'd-5', 'd-4'], cursor: loaded.cursor });
    // The old way (the newest page, then the older pages after their kept cursor) skipped d-8 and d-7.
    expect([...newest.items, ...after(first.cursor ?? '', 3).items]).not.toContain('d-8');
  });

  it('drops a loaded dispatch the newest page passes over (gone, or out of the filter), and says when the two do not meet', () => {
    expect(mergeNewest({ items: ['c', 'b', 'a'], cursor: 'x' }, { items: ['d', 'b'], cursor: 'y' }, key)).toEqual({ items: ['d', 'b', 'a'], cursor: 'x' });
    expect(mergeNewest({ items: ['c', 'b', 'a'], cursor: 'x' }, { items: ['f', 'e'], cursor: 'y' }, key)).toBeUndefined();
    // The newest pages are the whole list: nothing else to meet.
    expect(mergeNewest({ items: ['c', 'b', 'a'], cursor: 'x' }, { items: ['f', 'e'], cursor: null }, key)).toEqual({ items: ['f', 'e'], cursor: null });
    // The newest page is the whole list (a filter left fewer): rows that left it are not kept.
    expect(mergeNewest({ items: ['c', 'b', 'a'], cursor: 'x' }, { items: ['c', 'a'], cursor: null }, key)).toEqual({ items: ['c', 'a'], cursor: null });
  });

  it('reads on until the newest pages meet what is loaded, and past its bound starts again from the newest, never with a gap', async () => {
    for (const [arrivals, maxPages, reads] of [[7, 4, 2], [40, 4, 4], [5, 0, 0]] as const) {
      ledger.splice(0);
      arrive(12);
      const first = pageAt(0, 3);
      const loaded = appendOlder(first, after(first.cursor ?? '', 3), key);
      arrive(arrivals);
      let read = 0;
      const readAfter = async (cursor: string): Promise<Run<string>> => {
        read += 1;
        return after(cursor, 3);
      };
      const result = await renewed(loaded, pageAt(0, 3), true, readAfter, key, maxPages);
      expect(read, `${arrivals} arrivals`).toBe(reads);
      // Contiguous from the newest: exactly the ledger's first items, each once, and the cursor goes on after the last.
      expect(result.items, `${arrivals} arrivals`).toEqual(ledger.slice(0, result.items.length));
      expect(after(result.cursor ?? '', 1).items).toEqual(ledger.slice(result.items.length, result.items.length + 1));
    }
    expect(await renewed({ items: ['a'], cursor: 'x' }, { items: ['b'], cursor: 'y' }, false, async () => undefined, key, 4)).toEqual({ items: ['b'], cursor: 'y' });
  });

  it('never skips or repeats a dispatch over any run of arrivals, refreshes and loads of older pages', async () => {
    let seed = 17;
    const random = (below: number): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % below;
    };
    ledger.splice(0);
    arrive(5);
    let list = pageAt(0, 4);
    let olderLoaded = false;
    for (let step = 0; step < 300; step += 1) {
      const move = random(3);
      if (move === 0) arrive(random(9));
      else if (move === 1 && list.cursor !== null) {
        list = appendOlder(list, after(list.cursor, 4), key);
        olderLoaded = true;
      } else list = await renewed(list, pageAt(0, 4), olderLoaded, async (cursor) => after(cursor, 4), key, 2);
      // Always one unbroken stretch of the ledger's list, its cursor right after it; from the very top once refreshed
      // (a load of older pages shows no new arrival: the next refresh does).
      const start = ledger.indexOf(list.items[0] ?? '');
      expect(list.items, `step ${step}`).toEqual(ledger.slice(start, start + list.items.length));
      expect(list.cursor === null, `step ${step}`).toBe(start + list.items.length === ledger.length);
      if (move === 2) expect(start, `step ${step}`).toBe(0);
    }
  });
});

describe("a dispatch page's banners and monitor line", () => {
  const base = (over: Omit<Partial<DispatchView>, 'execution'> & { execution?: Partial<DispatchView['execution']> }): DispatchView =>
    view({
      submission: { attempts: 1, nextRetryAt: null, lastError: null, waitingFor: null, priority: 5, notBefore: null },
      evidence: { expected: [], found: [], missing: [], invalid: [], files: [], outcome: 'unverified' },
      result: null,
      ...over,
    });
  const cases: Array<[string, DispatchView]> = [
    ['unknown', base({ execution: { status: 'unknown', monitorStatus: 'stalled' } } )],
    ['approval_wait_expired', base({ execution: { status: 'waiting_for_approval', monitorStatus: 'approval_wait_expired', pendingApproval: { approvalId: 'ap-1', requestedAt: '2026-12-05T10:00:00.000Z' } } })],
    ['orphan_no_delivery', base({ execution: { status: 'completed', nativeStatus: 'completed' }, evidence: { expected: ['out/r.md'], found: [], missing: ['out/r.md'], invalid: [], files: [], outcome: 'orphan_no_delivery' } } )],
    ['blocked', base({ phase: 'blocked', blockedReason: 'unknown_target: no target "x"', execution: { status: null } } )],
    ['retrying', base({ phase: 'accepted', execution: { status: null }, submission: { attempts: 2, nextRetryAt: '2026-12-05T10:01:00.000Z', lastError: 'HTTP 503', waitingFor: 'retry', priority: 5, notBefore: null } } )],
    ['result_dropped', base({ execution: { status: 'completed' }, result: { resultId: 'r1~d-1', state: 'dropped', resultDelivery: 'inject', readyAt: 'x', deliveryAttempts: 5, leaseExpiresAt: null, droppedReason: 'attempts' } } )],
    ['cancel_pending', base({ execution: { status: 'running', cancel: { requestedAt: 'x', reason: 'no longer needed', by: 'local:planner', asks: 2, answer: null, nextAskAt: null } } } )],
    ['redriven', base({ execution: { status: 'failed', nativeStatus: 'FAILED', redriven: { at: '2026-12-05T10:02:00.000Z', count: 1 } } })],
  ];

  it('has a banner case, a title and a meaning for every attention kind (was: a redriven run, a new kind, had none)', () => {
    expect(cases.map(([kind]) => kind).sort()).toEqual([...ATTENTION_KINDS].sort());
    const titled = ATTENTION_ORDER.map((entry) => entry.kind);
    for (const kind of ATTENTION_KINDS) expect(titled, kind).toContain(kind);
  });

  it('shows one banner for every attention kind the dispatch is in', () => {
    for (const [kind, shown] of cases) expect(bannersFor(shown).map((banner) => banner.kind), kind).toEqual([kind]);
    expect(bannersFor(cases[1]?.[1] as DispatchView)[0]?.text).toMatch(/^Approval wait expired: approval ap-1, pending since 2026-12-05T10:00:00.000Z, has waited past its window\. It is still pending: approve or cancel it\.$/);
    expect(bannersFor(base({ execution: { status: 'completed' } } ))).toEqual([]);
  });

  it('says what the monitor is doing for the state: never "watching" a run that is over', () => {
    expect(monitorLine(cases[2]?.[1] as DispatchView)).toBe('done: the run completed (evidence orphan_no_delivery)');
    expect(monitorLine(cases[0]?.[1] as DispatchView)).toMatch(/^looking the run up each tick — stalled: /);
    expect(monitorLine(cases[3]?.[1] as DispatchView)).toBe('nothing to watch: the dispatch is blocked');
    expect(monitorLine(base({ execution: { status: 'running' } } ))).toBe('watching: the run is looked up if it is silent past its stall window');
    expect(monitorLine(base({ execution: { status: 'failed' } } ))).toBe('done: the run failed');
  });
});
