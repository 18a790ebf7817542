/**
 * What is true of a dispatch's evidence, in words, for each case the platform can be in (CONTRACT §5,
 * §6): nothing expected; the run has not completed (still going, or ended without completing);
 * completed and being checked; checked and found; checked and missing (an orphan). One function, so the
 * gate's reason (the API's view), `ledger check` and the MCP summary say the same thing. Pure, no imports:
 * the status page's browser bundle may use it too.
 *
 * @example
 * evidenceWords({ status: 'failed', expected: ['out/report.md'], found: [], missing: [], outcome: 'pending' })
 * // 'expected 1 file; not checked: the run failed'
 */
export interface EvidenceFacts {
  /** The execution status (null before submission). */
  readonly status: string | null;
  readonly expected: readonly string[];
  readonly found: readonly string[];
  readonly missing: readonly string[];
  readonly outcome: 'pending' | 'handled' | 'orphan_no_delivery' | 'unverified';
}

const files = (count: number): string => `${count} file${count === 1 ? '' : 's'}`;

export function evidenceWords(facts: EvidenceFacts): string {
  const { status, expected, found, missing, outcome } = facts;
  if (expected.length === 0) return 'nothing expected: no file is checked';
  const expecting = `expected ${files(expected.length)}`;
  if (outcome === 'handled') return `${expecting}; checked: all found`;
  if (outcome === 'orphan_no_delivery') return `${expecting}; checked: ${missing.length} missing (${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ', …' : ''}), ${found.length} found — an orphan`;
  if (status === 'completed') return `${expecting}; being checked (${found.length} found so far)`;
  if (status === 'failed' || status === 'cancelled') return `${expecting}; not checked: the run ${status}`;
  if (status === null) return `${expecting}; not checked: nothing ran yet`;
  return `${expecting}; not checked yet: the run is ${status}`;
}
