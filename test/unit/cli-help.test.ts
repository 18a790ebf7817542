import { afterEach, describe, expect, it, vi } from 'vitest';
import { cliMain, main } from '../../cli/main.js';
import { COMMANDS, helpFor } from '../../cli/usage.js';

/**
 * Issue 31: `--help` on every command the usage lists prints its usage on stdout and exits 0; an unknown
 * command or option says so in its first line and exits 2. In-process (the commands are the CLI's own
 * `main`); local-cli.test.ts runs the binary for the same two answers.
 */
function captured(): { out: () => string; err: () => string } {
  const out: string[] = [];
  const err: string[] = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => out.push(String(chunk)) > 0);
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => err.push(String(chunk)) > 0);
  return { out: () => out.join(''), err: () => err.join('') };
}

/** The CLI run in-process on `argv` (as the bin runs it): its exit code and what it wrote where, the first lines of stderr apart. */
async function ran(argv: string[]): Promise<{ code: number | string | undefined; out: string; err: string[] }> {
  const io = captured();
  await cliMain(argv);
  vi.restoreAllMocks();
  return { code: process.exitCode, out: io.out(), err: io.err().split('\n') };
}

afterEach(() => {
  vi.restoreAllMocks();
  process.exitCode = undefined;
});

describe('ledger --help', () => {
  it('prints the usage of every command the usage lists, on stdout, exit 0 (--help and -h)', async () => {
    expect(COMMANDS.length).toBeGreaterThanOrEqual(30);
    for (const command of COMMANDS) {
      for (const flag of ['--help', '-h']) {
        const io = captured();
        expect(await main([...command.words, flag]), `${command.words.join(' ')} ${flag}`).toBe(0);
        vi.restoreAllMocks();
        expect(io.out()).toMatch(/^usage:\n/);
        // Each word as the usage spells it, alone or among alternatives (`inbox ack|release`).
        expect(io.out()).toMatch(new RegExp(`ledger ${command.words.map((word) => `([a-z-]+\\|)?${word}(\\|[a-z-]+)?`).join(' ')}\\b`));
        expect(io.err()).toBe('');
      }
    }
  });

  it('prints the whole usage for ledger, ledger help and ledger --help', async () => {
    for (const argv of [[], ['help'], ['--help'], ['-h']]) {
      const io = captured();
      expect(await main(argv)).toBe(0);
      vi.restoreAllMocks();
      expect(io.out()).toContain('ledger inbox claim');
      expect(io.out()).toContain('ledger registry origin put');
    }
  });

  it('says an unknown command in its first line, exit 2, and which subcommands a group has', async () => {
    let io = captured();
    expect(await main(['frobnicate'])).toBe(2);
    vi.restoreAllMocks();
    expect(io.err().split('\n')[0]).toBe('ledger: unknown command "frobnicate"');
    expect(io.out()).toBe('');
    io = captured();
    expect(await main(['local', 'sideways'])).toBe(2);
    vi.restoreAllMocks();
    expect(io.err().split('\n')[0]).toBe('ledger: unknown command "local sideways"');
    io = captured();
    expect(await main(['inbox'])).toBe(2);
    vi.restoreAllMocks();
    expect(io.err().split('\n')[0]).toBe('ledger inbox: which one? claim, ack, release, renew, list, body');
  });

  it('says an unknown option in its first line, then the command’s usage, exit 2', async () => {
    const { code, err } = await ran(['send', '--frob']);
    expect(code).toBe(2);
    expect(err[0]).toBe("ledger send: unknown option '--frob'");
    expect(err[1]).toBe('usage:');
  });

  it("reads -h after -- as an argument, not a call for help; refuses an option written after -- (was: dropped unsaid)", async () => {
    const dropped = await ran(['check', '--', '-d-1', '--refresh']);
    expect(dropped.code).toBe(2);
    expect(dropped.err[0]).toBe('one argument is taken, not also "--refresh" (options go before --)');
    const help = await ran(['check', '--', '-h', '--json']);
    expect(help.out).toBe('');
    expect(help.err[0]).toBe('one argument is taken, not also "--json" (options go before --)');
  });

  it("says how to give an argument that begins with '-' (a dispatch id may) when it read as an unknown short option", async () => {
    const dashed = await ran(['check', '-d-1']);
    expect(dashed.code).toBe(2);
    expect(dashed.err[0]).toBe("ledger check: unknown option '-d' (an argument that begins with '-' goes after --, as in: ledger check -- -d-1)");
    // A command that takes no id is not pointed at --: the option is just unknown.
    expect((await ran(['status', '-n', '5'])).err[0]).toBe("ledger status: unknown option '-n'");
  });

  it('prints a request the ledger would refuse as the API’s error JSON under --json, sending nothing, exit 2', async () => {
    const { code, out } = await ran(['status', '--limit', 'many', '--json', '--api-url', 'http://127.0.0.1:9', '--region', 'us-east-1']);
    expect(code).toBe(2);
    expect(JSON.parse(out)).toMatchObject({ error: { code: 'malformed', message: expect.stringMatching(/^the ledger would refuse this query: limit: /) } });
  });
});

describe('ledger inbox --help', () => {
  // Regression: ack and release shared one usage line, so `ledger inbox ack --help` showed --reason, which ack refuses.
  it('shows each subcommand the flags it takes, and no other', async () => {
    const ack = helpFor(['inbox', 'ack']) ?? '';
    const release = helpFor(['inbox', 'release']) ?? '';
    expect(ack).toContain('--token T');
    expect(ack).not.toContain('--reason');
    expect(release).toContain('--reason R');
    expect((await ran(['inbox', 'ack', 'r-1~d-1', '--token', 't', '--reason', 'x'])).err[0]).toMatch(/does not take --reason/);
  });
});
