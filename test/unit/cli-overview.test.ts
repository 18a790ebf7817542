import { afterEach, describe, expect, it } from 'vitest';
import { counts, list } from '../../cli/overview.js';
import { countsOf } from '../../shared/dispatch/counts.js';
import { closeFakeApis, fakeApi, type FakeApi } from '../support/fake-api.js';

// `ledger list` and `ledger counts` (CONTRACT §2 v2 `GET /dispatches`, `GET /counts`): the commands run
// against a fake of the API on 127.0.0.1 answering canned contract JSON (it stands in for the ledger
// only here, to pin what the CLI asks and prints); the routes themselves are tested on DynamoDB Local.

const RLO = '\u202e';
const ESC = '\u001b';
/** Raw control and bidi characters: none may reach a terminal. */
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]/;

afterEach(closeFakeApis);

/** A `GET /dispatches` item (CONTRACT §2 v2: the history entry and its origin). */
function listedFactory(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { dispatchId: 'd-1', origin: 'team-a', target: 'demo-agent', createdAt: '2026-12-01T10:00:00.000Z', phase: 'submitted', status: 'running', runId: 'r-1', attempt: 1, blockedReason: null, ...overrides };
}

const run = async (command: typeof list, args: string[], api: FakeApi) => {
  const lines: string[] = [];
  const code = await command(args, (line) => lines.push(line), api.connect);
  return { code, lines, text: lines.join('\n') };
};

describe('ledger list', () => {
  it('asks GET /dispatches as the operator with the filters given, and prints a table with an origin column and the command for the next page', async () => {
    const api = await fakeApi(() => ({
      status: 200,
      body: { items: [listedFactory(), listedFactory({ dispatchId: 'd-2', origin: 'team-b', phase: 'blocked', status: null, runId: null, blockedReason: 'unknown_target: no target "x"' })], cursor: 'eyJiZWZvcmUiOiJ4In0' },
    }));

    const { code, lines, text } = await run(list, ['--status', 'running', '--target', 'demo-agent', '--limit', '2'], api);

    expect(code).toBe(0);
    expect(api.seen).toHaveLength(1);
    expect(api.seen[0]?.path).toBe('/dispatches?status=running&target=demo-agent&limit=2');
    // The operator: no X-Ledger-Origin (an origin's header would make it an origin's caller).
    expect(api.seen[0]?.origin).toBeUndefined();
    // At 80 columns the widest column (the reason) goes on its own line under each row, whole.
    expect(lines[0]?.split(/\s{2,}/)).toEqual(['created', 'dispatch', 'origin', 'target', 'phase', 'status']);
    expect(text).toMatch(/d-1\s+team-a\s+demo-agent\s+submitted\s+running\n {2}run \/ reason: r-1/);
    expect(text).toMatch(/d-2\s+team-b\s+demo-agent\s+blocked\s+—\n {2}run \/ reason: unknown_target: no target "x"/);
    expect(lines.at(-1)).toBe('more: npx ledger list --status running --target demo-agent --limit 2 --cursor eyJiZWZvcmUiOiJ4In0');
  });

  it('passes the cursor and the other filters through, and prints no next page on the last one', async () => {
    const api = await fakeApi(() => ({ status: 200, body: { items: [], cursor: null } }));
    const { code, text } = await run(list, ['--origin', 'team-b', '--phase', 'accepted', '--cursor', 'abc'], api);
    expect(code).toBe(0);
    expect(api.seen[0]?.path).toBe('/dispatches?origin=team-b&phase=accepted&limit=25&cursor=abc');
    expect(text).toBe('no dispatches');
  });

  it('prints the JSON as the API answered it with --json', async () => {
    const body = { items: [listedFactory()], cursor: null };
    const api = await fakeApi(() => ({ status: 200, body }));
    const { code, lines } = await run(list, ['--json'], api);
    expect(code).toBe(0);
    expect(lines.map((line) => JSON.parse(line) as unknown)).toEqual([body]);
  });

  it('exits 1 with the API\'s error for a refused filter or cursor', async () => {
    const api = await fakeApi(() => ({ status: 400, body: { error: { code: 'malformed', message: 'the cursor is not one this API returned' } } }));
    const { code, text } = await run(list, ['--cursor', 'garbage'], api);
    expect(code).toBe(1);
    expect(text).toContain('400 malformed: the cursor is not one this API returned');
  });

  it('escapes control and bidi characters a target put in a run id or a reason', async () => {
    const api = await fakeApi(() => ({ status: 200, body: { items: [listedFactory({ runId: `r-${ESC}[2J${RLO}evil` }), listedFactory({ dispatchId: 'd-3', phase: 'blocked', runId: null, blockedReason: `target_rejected: ${RLO}gnp.exe\nfake line` })], cursor: `c${ESC}` } }));
    const { lines } = await run(list, [], api);
    for (const line of lines) expect(line).not.toMatch(RAW);
    expect(lines.join('\n')).toContain('\\u202e');
  });
});

describe('ledger counts', () => {
  const answered = { ...countsOf({ total: 3, 'phase.submitted': 2, 'phase.blocked': 1, 'execution.completed': 1, 'execution.unknown': 1, 'execution.none': 1, 'evidence.handled': 1, 'evidence.unverified': 2 }), asOf: '2026-12-01T10:00:00.000Z' };

  it('asks GET /counts as the operator and prints the total and every state of each group, zeros included', async () => {
    const api = await fakeApi(() => ({ status: 200, body: answered }));
    const { code, lines, text } = await run(counts, [], api);
    expect(code).toBe(0);
    expect(api.seen.map((seen) => [seen.path, seen.origin])).toEqual([['/counts', undefined]]);
    expect(lines[0]).toBe("3 dispatches held as of 2026-12-01T10:00:00.000Z (kept from the table's stream: a moment behind the dispatches)");
    expect(text).toMatch(/phase\s+accepted\s+0\n\s+submitted\s+2\n\s+blocked\s+1\n\s+cancelled\s+0/);
    expect(text).toMatch(/execution\s+none\s+1\n/);
    expect(text).toMatch(/\s+unknown\s+1\n/);
    expect(text).toMatch(/evidence\s+pending\s+0\n\s+handled\s+1\n/);
  });

  it('prints the JSON with --json, and exits 1 with the API\'s refusal (a caller that is not the operator)', async () => {
    const ok = await fakeApi(() => ({ status: 200, body: answered }));
    expect((await run(counts, ['--json'], ok)).lines.map((line) => JSON.parse(line) as unknown)).toEqual([answered]);
    const refused = await fakeApi(() => ({ status: 403, body: { error: { code: 'forbidden', message: 'this route is for the operator role' } } }));
    const { code, text } = await run(counts, [], refused);
    expect(code).toBe(1);
    expect(text).toContain('403 forbidden: this route is for the operator role');
  });
});
