import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ArgumentsError, onePositional, parseCommandArgs } from '../../cli/args.js';
import { parseInbox } from '../../cli/inbox.js';

// Bug pinned: a claim token is 16 random bytes in base64url, so one in 64 begins with '-', and node's
// parseArgs refuses `--token -…` as "ambiguous": `ledger inbox ack <id> --token <claimToken>`, exactly as
// the claim printed it, failed (exit 1) for one claim in 64 — CI saw it in remote-cli.test.ts. A person's
// reason may begin with '-' too ("- see the ticket").

const OPTIONS = { token: { type: 'string' }, reason: { type: 'string' }, json: { type: 'boolean', default: false }, follow: { type: 'boolean', short: 'f' } } as const;

describe('parseCommandArgs', () => {
  it("takes a value that begins with '-' for an option that takes a value", () => {
    expect(parseCommandArgs({ args: ['--token', '-Ab_9', '--reason', '- see the ticket', '--json'], options: OPTIONS }).values).toEqual({ token: '-Ab_9', reason: '- see the ticket', json: true });
    expect(parseCommandArgs({ args: ['--token', '--Ab'], options: OPTIONS }).values).toEqual({ token: '--Ab', json: false });
  });

  it("still refuses a forgotten value when the next word is one of the command's own options, or written as a long option", () => {
    for (const next of ['--json', '--json=true', '-f', '--reason', '--reason=x', '--froce', '--dry-run=1', '--']) {
      expect(() => parseCommandArgs({ args: ['--token', next], options: OPTIONS }), next).toThrow(/argument is ambiguous|argument missing/);
    }
  });

  it("leaves what follows '--' as positionals, a dash-leading id among them", () => {
    expect(parseCommandArgs({ args: ['--token', 't', '--', '--token', '-d'], options: OPTIONS, allowPositionals: true })).toEqual({ values: { token: 't', json: false }, positionals: ['--token', '-d'] });
  });

  it('reads --name=value and a value without a dash exactly as parseArgs does', () => {
    expect(parseCommandArgs({ args: ['--token=-x', '--reason', 'plain'], options: OPTIONS }).values).toEqual({ token: '-x', reason: 'plain', json: false });
  });
});

describe('ledger inbox ack: the claim token as the claim printed it', () => {
  it('is read back whole whatever its bytes (the ledger mints 16 random bytes, base64url)', () => {
    expect(parseInbox(['ack', 'r1~d-1', '--token', '-3Jx_pQ'])).toMatchObject({ kind: 'ack', resultId: 'r1~d-1', claimToken: '-3Jx_pQ' });
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 16, maxLength: 16 }), (bytes) => {
        const token = Buffer.from(bytes).toString('base64url');
        expect(parseInbox(['ack', 'r1~d-1', '--token', token, '--json'])).toMatchObject({ claimToken: token, json: true });
        expect(parseInbox(['renew', 'r1~d-1', '--token', token, '--lease-seconds', '60'])).toMatchObject({ claimToken: token });
      }),
      { examples: [[new Uint8Array([0xfb, ...randomBytes(15)])]] },
    );
  });
});

describe('onePositional', () => {
  it('answers the one argument, none as undefined, and refuses a second with the usage', () => {
    expect(onePositional(['-d-1'], 'usage: x')).toBe('-d-1');
    expect(onePositional([], 'usage: x')).toBeUndefined();
    expect(() => onePositional(['d-1', '--refresh'], 'usage: x')).toThrow(new ArgumentsError('one argument is taken, not also "--refresh" (options go before --)\nusage: x'));
  });
});
