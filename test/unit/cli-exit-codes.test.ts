import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { cliMain } from '../../cli/main.js';

/**
 * Exit 2 is a usage mistake, on every command (main.ts: 0 done, 1 failed, 2 a usage mistake or a request
 * the ledger would refuse). Regression: commands that threw their own usage errors (send, inbox, ui, dlq,
 * local target) or a bare usage line for a missing argument (check, approve, redispatch, manual) exited 1,
 * so a script that retries on 1 and gives up on 2 retried a malformed command for ever; and the bare usage
 * never said what was missing.
 */
function captured(): { err: () => string } {
  const err: string[] = [];
  vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => err.push(String(chunk)) > 0);
  return { err: () => err.join('') };
}

async function ran(argv: string[]): Promise<{ code: number | string | undefined; first: string }> {
  const io = captured();
  await cliMain(argv);
  vi.restoreAllMocks();
  return { code: process.exitCode, first: io.err().split('\n')[0] ?? '' };
}

afterEach(() => {
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
  process.exitCode = undefined;
});

describe('a usage mistake exits 2 and says what is wrong in its first line', () => {
  const cases: Array<[string[], RegExp]> = [
    [['send', '--body', 'not json'], /^the message is not JSON .*; nothing was sent$/],
    [['inbox', 'claim', '--frob'], /--frob/],
    [['ui', '--frob'], /--frob/],
    [['dlq', 'redrive', '--limit', '0'], /^--limit must be a whole number ≥ 1/],
    [['check'], /^check needs a <dispatchId>$/],
    [['approve', 'd-1'], /^approve needs --approval-id$/],
    [['approve', 'd-1', '--approval-id', 'a-1', '--decision', 'maybe'], /^--decision must be approve or cancel$/],
    [['redispatch', 'd-1'], /^redispatch needs --reason/],
    [['receipt', 'd-1', '--kind', 'owner_delivery'], /^receipt needs --run, --state, --verified-by$/],
    [['manual', 'd-1', '--kind', 'made_up', '--note', 'n'], /^--kind must be one of manual_dispatch_written, /],
    [['local', 'target', 'add', 'my-worker'], /^--url is required$/],
    [['local', 'target', 'add', 'my-worker', '--url', 'http://10.0.0.1:80'], /^--url /],
    // Regression: beside --body/--file these were ignored without a word, the message sent without them.
    [['send', '--body', '{"origin":"planner"}', '--target', 'reviewer'], /^--body and --file send the message as written: put --target in it instead; nothing was sent$/],
    [['send', '--file', 'message.json', '--dispatch-id', 'd-1', '--stall-after', '60'], /^--body and --file send the message as written: put --dispatch-id, --stall-after in it instead; nothing was sent$/],
    [['send', '--body', '{}', '--file', 'message.json'], /^give --body or --file, not both; nothing was sent$/],
    // Regression: ignored beside --detach (the platform started detached, no demo ran, nothing stopped).
    [['local', 'up', '--detach', '--demo'], /^--demo runs in the foreground: leave out --detach/],
    [['local', 'up', '--detach', '--once'], /^--once runs in the foreground: leave out --detach/],
    // Regression: remotely the MCP server spoke for "planner" unless told, and a model cannot tell a wrong origin from an empty ledger.
    [['mcp', '--stack', 'prod', '--region', 'eu-west-1'], /^with --stack or --api-url, give --origin O \(or LEDGER_ORIGIN\): the origin your credentials speak for$/],
    [['mcp', '--origin', 'not an origin!'], /^--origin must match/],
    // Connection flags that do not go together, or are malformed (regression: LedgerConnectionError, exit 1).
    [['attention', '--stack', 'a', '--api-url', 'https://x.example.com', '--region', 'us-east-1'], /^give --stack NAME or --api-url URL, not both$/],
    [['check', 'd-1', '--region', 'us-east-1'], /^--queue-url and --region go with --api-url URL/],
    [['rejections', '--api-url', 'ftp://x.example.com', '--region', 'us-east-1'], /^--api-url must be an https URL/],
    [['events', '--stack', 'prod', '--region', 'eu-west-1'], /reads the local platform's event log only/],
  ];
  for (const [argv, said] of cases) {
    it(`ledger ${argv.join(' ')}`, async () => {
      // A state folder that cannot be made: a command that fails to refuse (`local up`) fails at once, starting nothing.
      vi.stubEnv('LEDGER_STATE_DIR', '/dev/null/ledger-state');
      // And no origin from the environment: `mcp --stack` must refuse before it reaches for a stack.
      vi.stubEnv('LEDGER_ORIGIN', undefined);
      const { code, first } = await ran(argv);
      expect(first).toMatch(said);
      expect(code).toBe(2);
    });
  }
});

describe('ledger local status', () => {
  it('exits 3 when the local platform is not running, as docs/protocol.md §9 says (null under --json)', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'ledger-state-'));
    vi.stubEnv('LEDGER_STATE_DIR', empty);
    try {
      const out: string[] = [];
      vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => out.push(String(chunk)) > 0);
      await cliMain(['local', 'status', '--json']);
      expect(process.exitCode).toBe(3);
      expect(out.join('')).toBe('null\n');
    } finally {
      vi.unstubAllEnvs();
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
