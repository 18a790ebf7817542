import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { printFrom } from '../../cli/events.js';

/**
 * `ledger events --follow` reads the event log as it grows, and the log is appended in batches: a read
 * can meet a line half written. Regression: that half was printed, and the next read began after it, so
 * one event came out as two broken lines — and with --dispatch, neither half named the dispatch whole.
 */
describe('ledger events --follow: a line still being written', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-events-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('is left for the next read, then printed once, whole', async () => {
    const file = join(dir, 'events.jsonl');
    const first = JSON.stringify({ time: 't1', 'detail-type': 'Dispatch Accepted', detail: { dispatchId: 'd-1' } });
    const second = JSON.stringify({ time: 't2', 'detail-type': 'Run Completed', detail: { dispatchId: 'd-1', runId: 'r-1' } });
    writeFileSync(file, `${first}\n${second.slice(0, 30)}`);
    const printed: string[] = [];
    const offset = await printFrom(file, 0, (line) => printed.push(line), true, 'd-1');
    expect(printed).toEqual([first]);
    expect(offset).toBe(Buffer.byteLength(`${first}\n`));

    appendFileSync(file, `${second.slice(30)}\n`);
    const next = await printFrom(file, offset, (line) => printed.push(line), true, 'd-1');
    expect(printed).toEqual([first, second]);
    expect(next).toBe(Buffer.byteLength(`${first}\n${second}\n`));
  });

  it('reads lines that cross the stream chunks whole (multi-byte characters too)', async () => {
    const file = join(dir, 'long.jsonl');
    const lines = Array.from({ length: 400 }, (_, n) => JSON.stringify({ time: `t${n}`, 'detail-type': 'Run Progress', detail: { dispatchId: `d-${n}`, reason: 'é'.repeat(200 + n) } }));
    writeFileSync(file, `${lines.join('\n')}\n`);
    const printed: string[] = [];
    await printFrom(file, 0, (line) => printed.push(line), true, undefined);
    expect(printed).toEqual(lines);
  });
});
