import { describe, expect, it } from 'vitest';
import { evidenceWords, type EvidenceFacts } from '../../shared/dispatch/evidence-words.js';

const facts = (over: Partial<EvidenceFacts>): EvidenceFacts => ({ status: 'running', expected: ['out/report.md'], found: [], missing: [], outcome: 'pending', ...over });

describe('evidenceWords: what is true of the evidence, per case', () => {
  it('nothing expected', () => {
    expect(evidenceWords(facts({ expected: [], outcome: 'unverified', status: 'completed' }))).toBe('nothing expected: no file is checked');
  });
  it('the run failed or was cancelled: not checked (never "missing 0")', () => {
    expect(evidenceWords(facts({ status: 'failed' }))).toBe('expected 1 file; not checked: the run failed');
    expect(evidenceWords(facts({ status: 'cancelled' }))).toBe('expected 1 file; not checked: the run cancelled');
  });
  it('still running, or nothing run yet', () => {
    expect(evidenceWords(facts({ status: 'unknown' }))).toBe('expected 1 file; not checked yet: the run is unknown');
    expect(evidenceWords(facts({ status: null }))).toBe('expected 1 file; not checked: nothing ran yet');
  });
  it('completed and being checked', () => {
    expect(evidenceWords(facts({ status: 'completed', expected: ['a', 'b'], found: ['a'] }))).toBe('expected 2 files; being checked (1 found so far)');
  });
  it('checked: all found', () => {
    expect(evidenceWords(facts({ status: 'completed', found: ['out/report.md'], outcome: 'handled' }))).toBe('expected 1 file; checked: all found');
  });
  it('checked: missing (an orphan)', () => {
    expect(evidenceWords(facts({ status: 'completed', missing: ['out/report.md'], outcome: 'orphan_no_delivery' }))).toBe('expected 1 file; checked: 1 missing (out/report.md), 0 found — an orphan');
  });
});
