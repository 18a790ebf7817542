import { describe, expect, it } from 'vitest';
import { proxyDecision } from '../../ui/routes.js';
import { commandsFor, monitorWords, shellWord } from '../../ui/page/words.js';
import type { DispatchView } from '../../shared/dispatch/view.js';

const decide = (path: string, query = '') => proxyDecision(path, new URLSearchParams(query));

describe('proxyDecision (the status page relays only its read routes)', () => {
  it('maps each allowed read to the ledger path, keeping only its own bounded query', () => {
    expect(decide('/api/attention', 'kind=unknown&limit=100')).toEqual({ kind: 'proxy', path: '/attention?kind=unknown&limit=100' });
    expect(decide('/api/counts')).toEqual({ kind: 'proxy', path: '/counts' });
    expect(decide('/api/dispatches', 'status=running&origin=planner&limit=50&cursor=abc')).toEqual({ kind: 'proxy', path: '/dispatches?status=running&origin=planner&limit=50&cursor=abc' });
    expect(decide('/api/dispatches/d-1', 'refresh=true')).toEqual({ kind: 'proxy', path: '/dispatches/d-1?refresh=true' });
    expect(decide('/api/dispatches/d%3A1/operator-receipts', 'cursor=c')).toEqual({ kind: 'proxy', path: '/dispatches/d%3A1/operator-receipts?cursor=c' });
    expect(decide('/api/rejections', 'limit=5')).toEqual({ kind: 'proxy', path: '/rejections?limit=5' });
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

  it('redispatches without force once the run is over, and names the connection on a deployed stack', () => {
    const lines = commandsFor(view({ execution: { status: 'failed' } }), ['--stack', 'prod'], true).map((command) => command.line);
    expect(lines).toContain("npx ledger redispatch d-1 --reason 'WHY' --stack prod");
    expect(lines.some((line) => line.includes('--force') || line.includes('cancel'))).toBe(false);
  });

  it('says what a monitor verdict means, and leaves an unknown one as it is', () => {
    expect(monitorWords('target_not_found')).toMatch(/404/);
    expect(monitorWords(null)).toBeNull();
    expect(monitorWords('something_new')).toBe('something_new');
    expect(shellWord('a b')).toBe("'a b'");
  });
});
