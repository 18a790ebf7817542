import { afterEach, describe, expect, it } from 'vitest';
import { describeFailure } from '../../cli/answer.js';
import { check, describeAttention } from '../../cli/dispatch.js';
import { nextPage, table } from '../../cli/table.js';
import { execFileSync } from 'node:child_process';
import { describeCancel } from '../../cli/flow.js';
import { describeClaim } from '../../cli/inbox.js';
import { dispatchCommand, shellWord } from '../../shared/dispatch/commands.js';
import { closeFakeApis, fakeApi } from '../support/fake-api.js';

/**
 * Issue 31: tables at 80 columns never cut what an operator copies (ids, refs, commands): a column too
 * wide for the grid goes on a line of its own, whole, under its row. A 409 shows the run it is about and
 * the command to check it.
 */
afterEach(async () => {
  await closeFakeApis();
});

const LONG_ID = 'd-2026-12-05-quarterly-report-for-the-board-of-directors-0001';

describe('tables at 80 columns', () => {
  it('keeps every id and command whole in ledger attention, and the copied command runs', async () => {
    const printed = describeAttention([
      // The reason as the ledger writes it (shared/dispatch/attention.ts), for an origin other than the CLI's default.
      { kind: 'unknown', dispatchId: LONG_ID, origin: 'team-a', target: 'demo-agent', since: '2026-12-05T10:00:00.000Z', reason: `lost sight of the run (stalled); check: ${dispatchCommand({ dispatchId: LONG_ID, origin: 'team-a' }, 'check', '--refresh')}` },
    ]);
    expect(printed).not.toContain('…');
    const lines = printed.split('\n');
    // The grid fits in 80 columns; what left it is on its own line, whole.
    for (const line of lines.filter((each) => !each.startsWith('  '))) expect(line.length, line).toBeLessThanOrEqual(80);
    expect(lines).toContain(`  why: lost sight of the run (stalled); check: npx ledger check ${LONG_ID} --refresh --origin team-a`);
    expect(lines.some((line) => line.includes(LONG_ID) && !line.startsWith('  why'))).toBe(true);

    // The command as a person copies it, run: it reaches the dispatch it names.
    const copied = /check: (npx ledger check .+)$/.exec(lines.find((line) => line.startsWith('  why:')) ?? '')?.[1] ?? '';
    const [, , command, ...args] = copied.split(' ');
    expect(command).toBe('check');
    const api = await fakeApi(() => ({ status: 404, body: { error: { code: 'not_found', message: `no dispatch ${LONG_ID}` } } }));
    const out: string[] = [];
    expect(await check(args, (line) => void out.push(line), api.connect)).toBe(1);
    expect(api.seen.map((seen) => [seen.path, seen.origin])).toEqual([[`/dispatches/${LONG_ID}?refresh=true`, 'team-a']]);
  });

  it("prints a dash-leading dispatch id after --, and the copied command reaches it (was: read as an unknown option)", async () => {
    const copied = dispatchCommand({ dispatchId: '-d-1', origin: 'team-a' }, 'check', '--refresh');
    expect(copied).toBe('npx ledger check --refresh --origin team-a -- -d-1');
    const [, , command, ...args] = copied.split(' ');
    expect(command).toBe('check');
    const api = await fakeApi(() => ({ status: 404, body: { error: { code: 'not_found', message: 'no dispatch -d-1' } } }));
    expect(await check(args, () => undefined, api.connect)).toBe(1);
    expect(api.seen.map((seen) => [seen.path, seen.origin])).toEqual([['/dispatches/-d-1?refresh=true', 'team-a']]);
  });

  it('cuts only the free-text columns it is told to, and says so with …', () => {
    const printed = table(['message', 'preview'], [['m-1', 'x'.repeat(200)]], { clip: { preview: 60 } });
    expect(printed).toContain(`${'x'.repeat(59)}…`);
    expect(printed).toContain('m-1');
    expect(table(['message'], [['m'.repeat(120)]])).toContain('m'.repeat(120));
  });
});

describe('a 409 in table output', () => {
  it('shows the run handle and the command to check it', () => {
    const conflict = {
      error: {
        code: 'conflict',
        message: 'the current run may still be active: look it up, or redispatch with force and a reason',
        details: { runId: 'r-7', attempt: 2, status: 'unknown', check: 'npx ledger check d-1 --refresh' },
      },
    };
    expect(describeFailure(409, conflict).split('\n')).toEqual([
      '409 conflict: the current run may still be active: look it up, or redispatch with force and a reason',
      'run r-7 (attempt 2, status unknown)',
      'check it: npx ledger check d-1 --refresh',
    ]);
  });

  it("shows the forced redispatch a redriven run's 409 names (was: only under --json)", () => {
    const redriven = { error: { code: 'conflict', message: 'the current run may still be active', details: { runId: 'r-7', attempt: 1, status: 'failed', force: 'npx ledger redispatch d-1 --force --reason R --origin planner' } } };
    expect(describeFailure(409, redriven).split('\n')).toEqual([
      '409 conflict: the current run may still be active',
      'run r-7 (attempt 1, status failed)',
      'run the work again under the ledger: npx ledger redispatch d-1 --force --reason R --origin planner',
    ]);
  });
});

/** Words as /bin/sh hands them to a command: a printed command line, pasted. */
const pasted = (line: string): string[] => execFileSync('/bin/sh', ['-c', `printf '%s\\0' ${line}`], { encoding: 'utf8' }).split('\0').slice(0, -1);

describe('printed commands repeat the flags a person gave as one shell word each (regression: a URL with & or a value with a space split the command)', () => {
  const connection = ['--api-url', 'http://127.0.0.1:1/api?a=1&b=2', '--stack', 'my stack'];

  it('the next page of a list', () => {
    const [line = ''] = nextPage('attention', ['--kind', 'unknown', ...connection], 'eyJhIjoxfQ');
    expect(pasted(line.replace(/^more: /, ''))).toEqual(['npx', 'ledger', 'attention', '--kind', 'unknown', ...connection, '--cursor', 'eyJhIjoxfQ']);
  });

  it("a cancel's check and a claim's ack", () => {
    const checkLine = /says so: (.+)$/.exec(describeCancel({ dispatchId: 'd-1', phase: 'submitted', status: 'running', cancelled: false, cancel: { reason: 'r', asks: 1, answer: 'accepted', nextAskAt: null } }, 'team-a', connection))?.[1] ?? '';
    expect(pasted(checkLine)).toEqual(['npx', 'ledger', 'check', 'd-1', '--refresh', ...connection, '--origin', 'team-a']);
    const ackLine = /reached its reader: (.+)$/m.exec(describeClaim({ claimToken: 'ct', leaseExpiresAt: 'x', results: [{ resultId: 'r-1', dispatchId: 'd-1', attempt: 1 }] }, ['--origin', 'reviewer', ...connection]))?.[1] ?? '';
    expect(pasted(ackLine.replace('<resultId>', 'RID').replace('<claimToken>', 'TOKEN'))).toEqual(['npx', 'ledger', 'inbox', 'ack', 'RID', '--token', 'TOKEN', '--origin', 'reviewer', ...connection]);
  });
});

describe('shellWord', () => {
  it("writes a value with a character a terminal acts on as $'…' escapes, which bash reads back whole (regression: shown escaped, a quoted copy named another id)", () => {
    for (const value of ['a\nb', "it's \\ \u202e\u0007", '=ls', '~', 'plain-1:2/3']) {
      const word = shellWord(value);
      expect(word, value).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202e]/);
      expect(execFileSync('bash', ['-c', `printf '%s' ${word}`], { encoding: 'utf8' }), value).toBe(value);
    }
    expect(shellWord('=ls')).toBe("'=ls'");
    expect(shellWord('plain-1:2/3')).toBe('plain-1:2/3');
  });
});
