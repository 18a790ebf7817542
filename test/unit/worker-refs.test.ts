import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { memoryStore, refProblem, UnsafeRefError, EvidenceTooLargeError, type RunContext } from '@dispatch-ledger/worker';
import { CallbackClient, type Transport } from '../../packages/worker/src/callbacks.js';
import { RunEngine } from '../../packages/worker/src/runs.js';
import { refProblem as ledgerRefProblem } from '../../shared/dispatch/refs.js';
import { eventually } from '../support/eventually.js';

describe('the worker kit: safe evidence refs (CONTRACT §6)', () => {
  it.each([
    ['out/report.md'],
    ['a'],
    ['data/2026/table.csv'],
    ['out/my report.md'],
    ['...'],
    ['.hidden/file'],
    ['a%2541'],
    ['é/ü.txt'],
    ['x'.repeat(512)],
  ])('accepts %j', (ref) => {
    expect(refProblem(ref)).toBeUndefined();
  });

  it.each([
    ['', 'empty'],
    ['/etc/passwd', 'absolute'],
    ['%2fetc', 'absolute'],
    ['a\\b', 'backslash'],
    ['a%5cb', 'backslash'],
    ['a\u0000b', 'control_character'],
    ['a%00b', 'control_character'],
    ['a\nb', 'control_character'],
    ['a\u0085b', 'control_character'],
    ['a//b', 'empty_segment'],
    ['a/', 'empty_segment'],
    ['.', 'dot_segment'],
    ['..', 'dot_segment'],
    ['a/./b', 'dot_segment'],
    ['a/../b', 'dot_segment'],
    ['%2e%2e/x', 'dot_segment'],
    ['a/%2E/b', 'dot_segment'],
    ['.%2e', 'dot_segment'],
    ['100%', 'bad_percent_encoding'],
    ['x'.repeat(513), 'too_long'],
    ['é'.repeat(257), 'too_long'],
    ['\ud800x', 'malformed_unicode'],
  ])('refuses %j (%s)', (ref, problem) => {
    expect(refProblem(ref)).toBe(problem);
  });

  it('refuses what is not a string', () => {
    expect(refProblem(42)).toBe('not_a_string');
    expect(refProblem(undefined)).toBe('not_a_string');
  });

  it('agrees with the ledger on every ref, so nothing the kit lets through is refused on arrival', () => {
    const alphabet = fc.constantFrom('a', 'b', '.', '/', '%', '2', 'e', 'E', 'f', '5', 'c', '0', '\\', '\u0000', '\n', ' ', 'é', '\ud800');
    fc.assert(
      fc.property(fc.array(alphabet, { maxLength: 14 }).map((chars) => chars.join('')), (ref) => {
        expect(refProblem(ref)).toBe(ledgerRefProblem(ref));
      }),
      { numRuns: 3000 },
    );
  });
});

/** A ledger stand-in that answers every call 2xx and keeps what was asked. */
function recordingTransport(): { transport: Transport; calls: Array<{ method: string; url: string }> } {
  const calls: Array<{ method: string; url: string }> = [];
  return {
    calls,
    transport: async (url, init) => {
      calls.push({ method: init.method, url });
      return init.method === 'PUT' ? { status: 201, text: '{}' } : { status: 202, text: '{"applied":true}' };
    },
  };
}

describe('the worker kit: ctx.putEvidence', () => {
  it('refuses an unsafe ref or an oversized file before sending anything, and uploads a safe one once', async () => {
    const { transport, calls } = recordingTransport();
    const engine = new RunEngine({
      store: memoryStore(),
      log: () => undefined,
      callbacks: new CallbackClient({ log: () => undefined, stopSignal: new AbortController().signal, transport }),
      run: async (_task, ctx: RunContext) => {
        const errors: unknown[] = [];
        for (const ref of ['../secret', '/abs', 'a//b', '%2e%2e/x', 'a\\b', 'nul\u0000']) {
          await ctx.putEvidence(ref, 'x').catch((error: unknown) => errors.push(error));
        }
        await ctx.putEvidence('big.bin', new Uint8Array(4 * 1024 * 1024 + 1)).catch((error: unknown) => errors.push(error));
        // Regression (a review): a content type fetch cannot send threw on every try, retried as no answer
        // for the whole callback budget (30 minutes), the run's final event waiting behind it.
        for (const contentType of ['text/plain\nx-injected: 1', 'text/“quoted”', 'no slash', '']) {
          await ctx.putEvidence('out/typed.md', 'x', { contentType }).catch((error: unknown) => errors.push(error));
        }
        expect(errors.slice(0, 6).every((error) => error instanceof UnsafeRefError)).toBe(true);
        expect(errors[6]).toBeInstanceOf(EvidenceTooLargeError);
        expect(errors.slice(7).map((error) => error instanceof TypeError && error.message.startsWith('contentType must be'))).toEqual([true, true, true, true]);
        // What fetch sends as it is passes (a review: a tab, Latin-1 in a parameter, spaces around were refused); trimmed.
        await ctx.putEvidence('out/typed.md', '# typed', { contentType: ' text/markdown;\tcharset=utf-8; title="café" ' });
        await ctx.putEvidence('out/my report.md', '# report');
        return { summary: 'done' };
      },
    });
    const submitted = await engine.submit('d-1:1', { dispatchId: 'd-1', attempt: 1, origin: 'planner', task: {}, expectedEvidence: ['out/my report.md'], callbackUrl: 'http://127.0.0.1:9' });
    expect(submitted.kind).toBe('created');

    const view = await eventually('the run completed', () => engine.lookup('d-1:1'), { until: (found) => found?.status === 'completed' });
    const puts = calls.filter((call) => call.method === 'PUT');
    expect(puts).toEqual([
      { method: 'PUT', url: 'http://127.0.0.1:9/dispatches/d-1/evidence/out/typed.md?runId=d-1%3A1' },
      { method: 'PUT', url: 'http://127.0.0.1:9/dispatches/d-1/evidence/out/my%20report.md?runId=d-1%3A1' },
    ]);
    expect(view?.evidence).toEqual(['out/my report.md', 'out/typed.md']);
    await engine.close();
  });
});
