import { afterEach, describe, expect, it, vi } from 'vitest';
import { ROUTES, routePath } from '@dispatch-ledger/protocol';
import { bodyCell, describeChange, describeClaim, describeList, inbox, inboxRequest, parseInbox } from '../../cli/inbox.js';
import { UsageError } from '../../cli/operations.js';
import { closeFakeApis, fakeApi } from '../support/fake-api.js';

// `ledger inbox` (CONTRACT §10): the pure parts — flags to a command, a command to a route and body, an
// answer to a table — and the whole command against a fake of the API on 127.0.0.1 answering canned
// §10 JSON (the fake stands in for the ledger only here, to pin what the CLI sends and prints).

const RLO = '\u202e';
const ESC = '\u001b';

afterEach(() => {
  vi.unstubAllEnvs();
});

/** A claimed result as CONTRACT §10 lists its fields. */
function claimedResultFactory(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    resultId: 'res-d-1-1',
    dispatchId: 'd-1',
    attempt: 1,
    runId: 'r-1',
    resultDelivery: 'after_turn',
    deliveryAttempts: 0,
    execution: { status: 'completed', nativeStatus: 'completed', completedAt: '2026-12-01T10:00:00.000Z' },
    blockedReason: null,
    evidence: { outcome: 'handled', files: [] },
    summary: 'Completed: summarise the incident',
    body: { report: 'short' },
    ...overrides,
  };
}

describe('parseInbox', () => {
  it('reads a bare claim as an after_turn claim for the default origin, leaving the rest to the ledger', () => {
    expect(parseInbox(['claim'])).toEqual({ kind: 'claim', origin: 'planner', json: false, claim: { mode: 'after_turn' } });
  });

  it('reads every claim flag, --result-id as many times as given', () => {
    const command = parseInbox([
      'claim', '--mode', 'inject', '--max', '5', '--lease-seconds', '120', '--wait-seconds', '20',
      '--result-id', 'res-a', '--result-id', 'res-b', '--origin', 'reviewer', '--json',
    ]);
    expect(command).toEqual({
      kind: 'claim',
      origin: 'reviewer',
      json: true,
      claim: { mode: 'inject', max: 5, leaseSeconds: 120, waitSeconds: 20, resultIds: ['res-a', 'res-b'] },
    });
  });

  it('takes the connection flags on every subcommand, and none means the local platform', () => {
    expect(parseInbox(['ack', 'res-1', '--token', 'ct-1', '--stack', 'prod', '--region', 'eu-west-1']).connection).toEqual({ stack: 'prod', region: 'eu-west-1' });
    expect(parseInbox(['list', '--api-url', 'https://x.lambda-url.eu-west-1.on.aws/']).connection).toEqual({ 'api-url': 'https://x.lambda-url.eu-west-1.on.aws/' });
    expect(parseInbox(['claim'])).not.toHaveProperty('connection');
  });

  it('takes the origin from $LEDGER_ORIGIN when --origin is not given', () => {
    vi.stubEnv('LEDGER_ORIGIN', 'from-env');
    expect(parseInbox(['list']).origin).toBe('from-env');
    expect(parseInbox(['list', '--origin', 'flag']).origin).toBe('flag');
  });

  it('reads ack, release, renew, list and body', () => {
    expect(parseInbox(['ack', 'res-1', '--token', 'ct-1'])).toEqual({ kind: 'ack', origin: 'planner', json: false, resultId: 'res-1', claimToken: 'ct-1' });
    expect(parseInbox(['release', 'res-1', '--token', 'ct-1', '--reason', 'the turn ended'])).toEqual({
      kind: 'release', origin: 'planner', json: false, resultId: 'res-1', claimToken: 'ct-1', reason: 'the turn ended',
    });
    expect(parseInbox(['release', 'res-1', '--token', 'ct-1'])).not.toHaveProperty('reason');
    expect(parseInbox(['renew', 'res-1', '--token', 'ct-1', '--lease-seconds', '300'])).toEqual({
      kind: 'renew', origin: 'planner', json: false, resultId: 'res-1', claimToken: 'ct-1', leaseSeconds: 300,
    });
    expect(parseInbox(['list', '--state', 'dropped', '--limit', '10', '--cursor', 'abc'])).toEqual({
      kind: 'list', origin: 'planner', json: false, state: 'dropped', limit: 10, cursor: 'abc',
    });
    expect(parseInbox(['body', 'res-1', '--json'])).toEqual({ kind: 'body', origin: 'planner', json: true, resultId: 'res-1' });
  });

  it.each([
    [[], /needs a subcommand/],
    [['peek'], /unknown inbox subcommand "peek"/],
    [['claim', '--mode', 'now'], /--mode must be one of inject, after_turn, got "now"/],
    [['claim', '--max', 'ten'], /--max must be a whole number, got "ten"/],
    [['claim', '--lease-seconds', '1.5'], /--lease-seconds must be a whole number/],
    [['claim', '--wait-seconds=-1'], /--wait-seconds must be a whole number/],
    [['claim', 'res-1'], /claim takes no result id/],
    [['claim', '--token', 'ct-1'], /claim does not take --token/],
    [['claim', '--nope'], /Unknown option '--nope'/],
    [['ack', '--token', 'ct-1'], /ack needs exactly one <resultId>/],
    [['ack', 'res-1', 'res-2', '--token', 'ct-1'], /ack needs exactly one <resultId>/],
    [['ack', 'res-1'], /ack needs --token/],
    [['ack', 'res-1', '--token', ' '], /ack needs --token/],
    [['release', 'res-1'], /release needs --token/],
    [['renew', 'res-1', '--token', 'ct-1'], /renew needs --lease-seconds/],
    [['list', '--state', 'lost'], /--state must be one of pending, claimed, delivered, dropped/],
    [['list', '--limit', 'all'], /--limit must be a whole number/],
    [['body'], /body needs exactly one <resultId>/],
  ])('refuses %j with a usage error naming the problem, the usage under it', (args, problem) => {
    let thrown: unknown;
    try {
      parseInbox(args);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(UsageError);
    expect((thrown as UsageError).message).toMatch(problem);
    expect((thrown as UsageError).message).toContain('usage:\n  ledger inbox claim');
  });

  it('leaves ranges to the ledger (its 422 is the answer), checking only that numbers are whole', () => {
    expect(parseInbox(['claim', '--max', '500', '--wait-seconds', '99']).kind).toBe('claim');
  });
});

describe('inboxRequest', () => {
  const planner = { origin: 'planner' };
  it('names each route of docs/protocol.md §10 in the route table, with its parameters and body', () => {
    expect(inboxRequest(parseInbox(['claim', '--max', '5']))).toEqual({ route: 'inboxClaim', params: planner, body: { mode: 'after_turn', max: 5 } });
    expect(inboxRequest(parseInbox(['ack', 'res-1', '--token', 'ct-1']))).toEqual({ route: 'inboxAck', params: { ...planner, resultId: 'res-1' }, body: { claimToken: 'ct-1' } });
    expect(inboxRequest(parseInbox(['release', 'res-1', '--token', 'ct-1', '--reason', 'later']))).toEqual({
      route: 'inboxRelease', params: { ...planner, resultId: 'res-1' }, body: { claimToken: 'ct-1', reason: 'later' },
    });
    expect(inboxRequest(parseInbox(['renew', 'res-1', '--token', 'ct-1', '--lease-seconds', '90']))).toEqual({
      route: 'inboxRenew', params: { ...planner, resultId: 'res-1' }, body: { claimToken: 'ct-1', leaseSeconds: 90 },
    });
    expect(inboxRequest(parseInbox(['list']))).toEqual({ route: 'inboxList', params: planner, query: {} });
    expect(inboxRequest(parseInbox(['list', '--state', 'pending', '--limit', '3', '--cursor', 'c/1=']))).toEqual({
      route: 'inboxList', params: planner, query: { state: 'pending', limit: 3, cursor: 'c/1=' },
    });
    expect(inboxRequest(parseInbox(['body', 'res-1']))).toEqual({ route: 'inboxBody', params: { ...planner, resultId: 'res-1' } });
  });

  it('encodes the origin and the result id as one path segment each (a result id cannot reach another route)', () => {
    const request = inboxRequest(parseInbox(['ack', 'res/../../x?y', '--token', 't', '--origin', 'a b']));
    expect(routePath(ROUTES[request.route], request.params)).toBe('/origins/a%20b/inbox/res%2F..%2F..%2Fx%3Fy/ack');
  });
});

describe('describeClaim', () => {
  it('shows one row per result with its execution, evidence, summary and body, then the token and the lease', () => {
    const text = describeClaim({ claimToken: 'ct-42', leaseExpiresAt: '2026-12-01T10:01:00.000Z', results: [claimedResultFactory()] });
    const [header, , row, summary, ...rest] = text.split('\n');
    // At 80 columns the summary (the widest) is printed whole on its own line under the row.
    expect(header).toMatch(/^result\s+dispatch\s+attempt\s+execution\s+evidence\s+body$/);
    expect(row).toMatch(/^res-d-1-1\s+d-1\s+1\s+completed\s+handled\s+inline 18 B$/);
    expect(summary).toBe('  summary: Completed: summarise the incident');
    expect(rest).toContain('claimToken ct-42');
    expect(rest).toContain('leaseExpiresAt 2026-12-01T10:01:00.000Z');
    // The ack names the origin that claimed and the connection (was: neither; locally another origin's ack answered 404).
    const flagged = describeClaim({ claimToken: 'ct-42', leaseExpiresAt: 'x', results: [claimedResultFactory()] }, ['--origin', 'reviewer', '--stack', 'prod']);
    expect(flagged.split('\n').at(-1)).toBe('ack each result once it reached its reader: npx ledger inbox ack <resultId> --token <claimToken> --origin reviewer --stack prod');
  });

  it('marks a spilled body, says why there was no run, and clips a long summary', () => {
    const spilled = claimedResultFactory({ resultId: 'res-big', body: undefined, preview: 'x'.repeat(4096), bodyRef: 'results/d-2/1.json', summary: 's'.repeat(300) });
    const blocked = claimedResultFactory({ resultId: 'res-blocked', execution: { status: null, nativeStatus: null, completedAt: null }, blockedReason: 'unknown_target', evidence: { outcome: null, files: [] }, summary: null, body: undefined });
    const lines = describeClaim({ claimToken: 'ct-1', leaseExpiresAt: 'later', results: [spilled, blocked] }).split('\n');
    expect(lines[2]).toMatch(/^res-big\s+d-1\s+1\s+completed\s+handled$/);
    expect(lines[3]).toBe(`  summary: ${'s'.repeat(47)}…`);
    expect(lines[4]).toBe('  body: spilled (preview 4.0 KB; ledger inbox body)');
    expect(lines[5]).toMatch(/^res-blocked\s+d-1\s+1\s+blocked: unknown_target\s+—$/);
  });

  it('escapes what the target wrote: a summary with bidi overrides and escape sequences stays inert', () => {
    const text = describeClaim({ claimToken: `ct${ESC}[2J`, leaseExpiresAt: 'x', results: [claimedResultFactory({ summary: `ok ${RLO}gpj.exe ${ESC}]0;pwned\u0007` })] });
    expect(text).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u202e]/);
    expect(text).toContain('\\u202egpj.exe');
    expect(text).toContain('claimToken ct\\u001b[2J');
  });

  it('says there is nothing to claim for an empty claim', () => {
    expect(describeClaim({ claimToken: null, results: [] })).toBe('nothing to claim: no result is waiting');
  });
});

describe('bodyCell', () => {
  it('tells inline, spilled and no body apart', () => {
    expect(bodyCell({ body: { a: 1 } })).toBe('inline 7 B');
    expect(bodyCell({ body: 'y'.repeat(8000) })).toBe('inline 7.8 KB');
    expect(bodyCell({ preview: '{"a"', bodyRef: { key: 'k' } })).toBe('spilled (preview 4 B; ledger inbox body)');
    expect(bodyCell({})).toBe('—');
  });
});

describe('describeList and describeChange', () => {
  it('lists results by state with their delivery attempts, and the cursor to the next page', () => {
    const text = describeList({ items: [claimedResultFactory({ state: 'dropped', deliveryAttempts: 5 })], cursor: 'next-1' }, ['--state', 'dropped', '--origin', 'planner']);
    expect(text.split('\n')[0]).toMatch(/^result\s+dispatch\s+attempt\s+state\s+tries\s+execution\s+evidence$/);
    expect(text.split('\n')[2]).toMatch(/^res-d-1-1\s+d-1\s+1\s+dropped\s+5\s+completed\s+handled$/);
    expect(text.split('\n')[3]).toMatch(/^ {2}summary: Completed/);
    expect(text).toContain('more: npx ledger inbox list --state dropped --origin planner --cursor next-1');
    expect(describeList({ items: [] }, [])).toBe('no results');
    // A page the ledger's filter left empty can still have a next one (was: 'no results' and nothing more).
    expect(describeList({ items: [], cursor: 'c-3' }, ['--state', 'delivered'])).toBe('no results\nmore: npx ledger inbox list --state delivered --cursor c-3');
  });

  it('prints the next page as the whole command: the state, limit, origin and connection that chose this page (was: only --cursor, which the ledger refused for a pending or claimed page, 400)', async () => {
    const api = await fakeApi(() => ({ status: 200, body: { items: [claimedResultFactory({ state: 'pending' })], cursor: 'c-2' } }));
    const printed: string[] = [];
    expect(await inbox(['list', '--state', 'pending', '--limit', '1', '--origin', 'reviewer', '--region', 'eu-west-1'], (line) => printed.push(line), api.connect)).toBe(0);
    expect(printed.at(-1)).toBe('more: npx ledger inbox list --state pending --limit 1 --origin reviewer --region eu-west-1 --cursor c-2');
    printed.length = 0;
    expect(await inbox(['list'], (line) => printed.push(line), api.connect)).toBe(0);
    expect(printed.at(-1)).toBe('more: npx ledger inbox list --origin planner --cursor c-2');
  });

  it('prints one line per ack, release and renew', () => {
    expect(describeChange(parseInbox(['ack', 'res-1', '--token', 't']), { state: 'delivered' })).toBe('acked: res-1 → delivered (owner delivery confirmed, basis origin_ack)');
    expect(describeChange(parseInbox(['release', 'res-1', '--token', 't']), { state: 'pending', deliveryAttempts: 1 })).toBe('released: res-1 → pending (delivery attempts 1)');
    expect(describeChange(parseInbox(['release', 'res-1', '--token', 't']), { state: 'dropped', deliveryAttempts: 5, droppedReason: 'attempts' })).toBe(
      'released: res-1 → dropped (delivery attempts 5); dropped: attempts',
    );
    expect(describeChange(parseInbox(['renew', 'res-1', '--token', 't', '--lease-seconds', '60']), { leaseExpiresAt: '2026-12-01T10:02:00.000Z' })).toBe(
      'renewed: res-1, lease until 2026-12-01T10:02:00.000Z',
    );
  });
});

afterEach(closeFakeApis);

describe('inbox (against a fake of the API)', () => {
  it('claims as the origin (X-Ledger-Origin), prints the table and exits 0', async () => {
    const api = await fakeApi(() => ({ status: 200, body: { claimToken: 'ct-9', leaseExpiresAt: '2026-12-01T10:01:00.000Z', results: [claimedResultFactory()] } }));
    const printed: string[] = [];
    const code = await inbox(['claim', '--wait-seconds', '5', '--origin', 'planner'], (line) => printed.push(line), api.connect);
    expect(code).toBe(0);
    expect(api.seen).toEqual([{ method: 'POST', path: '/origins/planner/inbox/claim', origin: 'planner', body: { mode: 'after_turn', waitSeconds: 5 } }]);
    expect(printed.join('\n')).toContain('claimToken ct-9');
    expect(printed.join('\n')).toMatch(/res-d-1-1\s+d-1\s+1\s+completed/);
  });

  it('prints the API body as it came with --json, and exits 1 for anything but a 2xx', async () => {
    const lost = { error: { code: 'lease_lost', message: 'the lease of res-1 was lost' } };
    const api = await fakeApi((seen) => (seen.path.endsWith('/ack') ? { status: 409, body: lost } : { status: 200, body: { items: [], cursor: null } }));
    const printed: string[] = [];
    expect(await inbox(['ack', 'res-1', '--token', 'ct-old', '--json'], (line) => printed.push(line), api.connect)).toBe(1);
    expect(printed).toEqual([JSON.stringify(lost)]);
    expect(api.seen[0]).toMatchObject({ method: 'POST', path: '/origins/planner/inbox/res-1/ack', body: { claimToken: 'ct-old' } });

    printed.length = 0;
    expect(await inbox(['ack', 'res-1', '--token', 'ct-old'], (line) => printed.push(line), api.connect)).toBe(1);
    expect(printed).toEqual(['409 lease_lost: the lease of res-1 was lost']);

    printed.length = 0;
    expect(await inbox(['list', '--state', 'pending', '--json'], (line) => printed.push(line), api.connect)).toBe(0);
    expect(printed).toEqual(['{"items":[],"cursor":null}']);
    expect(api.seen.at(-1)).toMatchObject({ method: 'GET', path: '/origins/planner/inbox?state=pending', body: undefined });
  });

  it('prints a spilled body whole (indented JSON) and a renewal in one line', async () => {
    const whole = { report: 'r'.repeat(20_000), sections: [{ title: 'Section 1', text: 'all of it' }] };
    const api = await fakeApi((seen) => (seen.path.endsWith('/body') ? { status: 200, body: whole } : { status: 200, body: { leaseExpiresAt: '2026-12-01T10:05:00.000Z' } }));
    const printed: string[] = [];
    expect(await inbox(['body', 'res-big'], (line) => printed.push(line), api.connect)).toBe(0);
    expect(JSON.parse(printed.join('\n'))).toEqual(whole);
    expect(printed).toContain('  "sections": [');
    printed.length = 0;
    expect(await inbox(['renew', 'res-big', '--token', 'ct-1', '--lease-seconds', '120'], (line) => printed.push(line), api.connect)).toBe(0);
    expect(printed).toEqual(['renewed: res-big, lease until 2026-12-01T10:05:00.000Z']);
    expect(api.seen.at(-1)).toMatchObject({ path: '/origins/planner/inbox/res-big/renew', body: { claimToken: 'ct-1', leaseSeconds: 120 } });
  });

  it('sends nothing for a usage error', async () => {
    const api = await fakeApi(() => ({ status: 200, body: {} }));
    await expect(inbox(['renew', 'res-1', '--token', 't'], () => undefined, api.connect)).rejects.toBeInstanceOf(UsageError);
    expect(api.seen).toEqual([]);
  });
});
