import { describe, expect, it } from 'vitest';
import { describeView } from '../../cli/dispatch.js';
import { describeEvent } from '../../cli/events.js';
import { forTerminal, table } from '../../cli/table.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import type { DispatchState } from '../../shared/dispatch/state.js';
import { accepted, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { dispatchView } from '../../shared/dispatch/view.js';
import { clip, escapeControls, printable } from '../../shared/text.js';
import { newDispatchFactory, NOW } from '../support/factories.js';

// CONTRACT §8 v2: target-supplied text (approvalId, result.summary, runId, and the reasons and unknowns
// that quote a target) is stored as given but shown by the CLI with control and bidi characters escaped.

const RLO = '\u202e';
const ESC = '\u001b';
/** Raw control, bidi, zero-width and separator characters: none may reach a terminal. */
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]/;

describe('trust boundaries: escapeControls (shared/text.ts)', () => {
  it('writes each control, bidi, zero-width and separator character as \\uXXXX, and leaves other text alone', () => {
    expect(escapeControls(`r-${RLO}gpj.exe`)).toBe('r-\\u202egpj.exe');
    expect(escapeControls(`${ESC}[2J${ESC}]0;pwned\u0007`)).toBe('\\u001b[2J\\u001b]0;pwned\\u0007');
    expect(escapeControls('a\nb\rc\td\u0000e\u007f\u0085\u200b\u2028\u2066\ufeff')).toBe('a\\u000ab\\u000dc\\u0009d\\u0000e\\u007f\\u0085\\u200b\\u2028\\u2066\\ufeff');
    expect(escapeControls('plain — café 日本 🚀 \\u202e')).toBe('plain — café 日本 🚀 \\u202e');
    // Idempotent: what it writes is plain ASCII.
    expect(escapeControls(escapeControls(`x${RLO}y`))).toBe('x\\u202ey');
  });

  it('leaves printable and clip as they were', () => {
    expect(printable(` a${RLO}b\u0000 `)).toBe('a b');
    expect(clip('abcdef', 4)).toBe('abc…');
  });
});

describe('trust boundaries: the CLI shows target-supplied text escaped, never raw', () => {
  function hostileState(): DispatchState {
    const state = submitted(accepted(newDispatchFactory(), NOW), { kind: 'accepted', runId: `r-${RLO}1`, status: 'running', requestId: 'req-1' }, DEFAULT_RETRY_POLICY, NOW);
    return {
      ...state,
      execution: {
        ...state.execution,
        status: 'waiting_for_approval',
        nativeStatus: 'waiting_for_approval',
        pendingApproval: { approvalId: `a-${ESC}[31m`, requestedAt: NOW.toISOString() },
        result: { summary: `all good${RLO}\nfake line: gate satisfied` },
      },
      submission: { ...state.submission, lastError: `HTTP 500: ${ESC}]0;title\u0007` },
    };
  }

  it('ledger check: the run, the approval, the summary and the last error', () => {
    const text = describeView(dispatchView(hostileState(), undefined));
    expect(text).not.toMatch(RAW);
    expect(text).toContain('r-\\u202e1');
    expect(text).toContain('a-\\u001b[31m');
    expect(text).toContain('all good\\u202e\\u000afake line: gate satisfied');
    expect(text).toContain('\\u001b]0;title\\u0007');
    // A target cannot add a line of its own to the view.
    expect(text.split('\n').some((line) => line.startsWith('fake line'))).toBe(false);
  });

  it('ledger status / attention / rejections: every table cell', () => {
    const text = table(['run', 'why'], [[`r-${RLO}x`, `stalled${ESC}[8m hidden\nnext`]]);
    expect(text).not.toMatch(RAW);
    expect(text).toContain('r-\\u202ex');
    expect(text).toContain('stalled\\u001b[8m hidden\\u000anext');
    expect(text.split('\n')).toHaveLength(3);
  });

  it('ledger events: run ids and reasons from the event log', () => {
    const line = JSON.stringify({ time: NOW.toISOString(), 'detail-type': 'Run Stalled', detail: { dispatchId: 'd-1', runId: `r-${RLO}1`, reason: `quiet${ESC}[2K` } });
    const shown = describeEvent(line, false);
    expect(shown).not.toMatch(RAW);
    expect(shown).toContain('run r-\\u202e1');
    expect(shown).toContain('quiet\\u001b[2K');
  });

  it('every line printed: people lines escaped, --json lines still the same JSON (JSON.stringify leaves U+202E raw)', () => {
    const value = { runId: `r-${RLO}1`, summary: `x\u2066y\u0085z${ESC}` };
    const json = JSON.stringify(value);
    expect(json).toContain(RLO);
    const printed = forTerminal(json);
    expect(printed).not.toMatch(RAW);
    expect(JSON.parse(printed)).toEqual(value);
    expect(forTerminal(`one${RLO}\ntwo`)).toBe('one\\u202e\ntwo');
  });
});
