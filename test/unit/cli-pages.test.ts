import { afterEach, describe, expect, it } from 'vitest';
import { attention, status } from '../../cli/dispatch.js';
import { rejections } from '../../cli/lifecycle.js';
import { closeFakeApis, fakeApi } from '../support/fake-api.js';

// Bug pinned: `ledger status`, `ledger attention` and `ledger rejections` took no --cursor and printed no
// next page, so what lay past the first page (25, 50, 50 items) could not be reached from the CLI.
// Each now prints the whole command for the next page and sends the cursor it is given.

afterEach(closeFakeApis);

const historyItem = { createdAt: '2026-12-01T10:00:00.000Z', dispatchId: 'd-1', target: 'demo-agent', phase: 'submitted', status: 'running', runId: 'r-1', blockedReason: null };
const attentionItem = { kind: 'unknown', dispatchId: 'd-1', origin: 'planner', target: 'demo-agent', since: '2026-12-01T10:00:00.000Z', reason: 'lost sight of the run (stalled)' };
const rejection = { at: '2026-12-01T10:00:00.000Z', reason: 'unreadable', messageId: 'm-1', dispatchId: null, origin: null, bodyPreview: '{' };

type Command = (args: string[], print: (line: string) => void, connectTo: Awaited<ReturnType<typeof fakeApi>>['connect']) => Promise<number>;

describe.each<[string, Command, unknown, string[], string]>([
  ['status', status, historyItem, ['--status', 'running', '--origin', 'team-a'], 'more: npx ledger status --status running --limit 25 --origin team-a --cursor c-2'],
  ['attention', attention, attentionItem, ['--kind', 'unknown', '--limit', '10'], 'more: npx ledger attention --kind unknown --limit 10 --cursor c-2'],
  ['rejections', rejections, rejection, ['--region', 'eu-west-1'], 'more: npx ledger rejections --limit 50 --region eu-west-1 --cursor c-2'],
])('ledger %s', (_name, command, item, flags, more) => {
  it('prints the command for the next page, with the flags that chose this one', async () => {
    const api = await fakeApi(() => ({ status: 200, body: { items: [item], cursor: 'c-2' } }));
    const printed: string[] = [];
    expect(await command(flags, (line) => printed.push(...line.split('\n')), api.connect)).toBe(0);
    expect(printed.at(-1)).toBe(more);
  });

  it('sends the cursor it is given, and prints no next page on the last one', async () => {
    const api = await fakeApi(() => ({ status: 200, body: { items: [item], cursor: null } }));
    const printed: string[] = [];
    expect(await command([...flags, '--cursor', 'c-2'], (line) => printed.push(...line.split('\n')), api.connect)).toBe(0);
    expect(new URL(api.seen[0]?.path ?? '', 'http://x').searchParams.get('cursor')).toBe('c-2');
    expect(printed.join('\n')).not.toContain('more:');
  });
});
