import { marshall } from '@aws-sdk/util-dynamodb';
import { describe, expect, it } from 'vitest';
import { itemSizeBytes, writeUnitsFor } from '../../bench/capacity-units.js';
import { statePut } from '../../shared/adapters/ledger-commands.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import { stateOnly, type InlineCheck, type NextState } from '../../shared/dispatch/state.js';
import type { StoredState } from '../../shared/ledger/port.js';
import { evidenceSettled } from '../../shared/dispatch/transitions/evidence.js';
import { applyRunEvent } from '../../shared/dispatch/transitions/run.js';
import { accepted, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { INLINE_CHECK_BYTES } from '../../shared/usecases/evidence-check.js';
import { newDispatchFactory, NOW } from '../support/factories.js';

/** The write units DynamoDB bills for the write of `next`, as the table sends it (its write id included). */
const writeUnitsOf = (from: StoredState, next: NextState) => writeUnitsFor(itemSizeBytes(marshall(statePut('ledger', from, next, 90 * 86_400).Item, { removeUndefinedValues: true })));

describe('the check record a settled state carries (INLINE_CHECK_BYTES, issue 18)', () => {
  it('keeps a detached state with a record at the limit, usual ids and a usual ref within one write unit', () => {
    // Ids as long as the bench's (and the intake's runIds derived from them), one expected ref.
    const dispatchId = 'd-cost-49-cost-1764590000000-abcdef12';
    const ref = 'out/report.md';
    const start = accepted(newDispatchFactory({ dispatchId, deliveryMode: 'detached', expectedCount: 1 }), NOW);
    const running = submitted(start, { kind: 'accepted', runId: `r-${dispatchId}-1`, status: 'running', requestId: `q-${dispatchId}` }, DEFAULT_RETRY_POLICY, NOW);
    // Stored as version 1; the completion is the next write.
    const stored: StoredState = { state: stateOnly(running), version: 1 };
    const completed = applyRunEvent(stored.state, { seq: 3, type: 'completed', result: { summary: 'done' } }, NOW);
    if (completed.kind !== 'apply') throw new Error('the completion applies');
    // A record padded to the limit (a longer ref, which the settled state also names among the expected
    // refs): the largest the state ever carries.
    const record = (refOf: string): InlineCheck => ({ at: NOW.toISOString(), files: [{ ref: refOf, sha256: 'f'.repeat(64), bytes: 4_194_304 }] });
    const padding = INLINE_CHECK_BYTES - Buffer.byteLength(JSON.stringify(record(ref)));
    expect(padding).toBeGreaterThanOrEqual(0);
    const largest = record(`${ref}${'x'.repeat(padding)}`);
    expect(Buffer.byteLength(JSON.stringify(largest))).toBe(INLINE_CHECK_BYTES);
    const settled = evidenceSettled(completed.next, { outcome: 'handled', expected: [largest.files[0]?.ref ?? ref], missing: [], check: largest }, NOW);
    expect(settled.evidence.check).toEqual(largest);
    expect(settled.changes).toEqual(['completed', 'handled']);
    expect(writeUnitsOf(stored, settled)).toBe(1);
  });
});
