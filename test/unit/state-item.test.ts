import { marshall } from '@aws-sdk/util-dynamodb';
import { describe, expect, it } from 'vitest';
import { itemSizeBytes } from '../../shared/adapters/capacity-meter.js';
import { stateItem, stateOf } from '../../shared/adapters/ledger-items.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import type { DispatchState } from '../../shared/dispatch/state.js';
import { accepted, applyRunEvent, evidenceSettled, redispatched, resultClaimed, resultDelivered, submitted } from '../../shared/dispatch/transitions.js';
import { newDispatchFactory, NOW } from '../support/factories.js';

/** The hot state item's codec: what it leaves out is restored exactly, and a settled state with its result out stays within one write unit. */

const at = (seconds: number): Date => new Date(NOW.getTime() + seconds * 1000);
const RETENTION = 86_400;

function lifecycle(overrides: Parameters<typeof newDispatchFactory>[0] = {}): DispatchState[] {
  const start = accepted(newDispatchFactory({ dispatchId: 'd-cost-12-x-1a2b3c4d', expectedCount: 1, ...overrides }), NOW);
  const running = submitted(start, { kind: 'accepted', runId: 'r-d-cost-12-x-1a2b3c4d-1', status: 'running', requestId: 'q-12345678-1234-1234-1234-123456789012' }, DEFAULT_RETRY_POLICY, NOW);
  const done = applyRunEvent(running, { seq: 3, type: 'completed', result: { summary: 'done' } }, at(90));
  if (done.kind !== 'apply') throw new Error('the completion applies');
  const settled = evidenceSettled(done.next, { outcome: 'handled', expected: ['out/report.md'], missing: [] }, at(90), 'same_write');
  const states = [running, done.next, settled];
  if (!settled.result) return states;
  const claimed = resultClaimed(settled, { claimToken: 'AAAAAAAAAAAAAAAAAAAAAA', leaseSeconds: 60 }, at(100));
  return [...states, claimed, resultDelivered(claimed, 'origin:planner', at(110))];
}

/** What a state reads back as: the in-memory-only field is never stored. */
const asStored = ({ storedDueAt: _transient, ...state }: DispatchState): DispatchState => state;

describe('the state item codec', () => {
  it('reads back every state of a lifecycle exactly as written, for callback and detached dispatches', () => {
    for (const state of [...lifecycle(), ...lifecycle({ deliveryMode: 'detached' })]) expect(stateOf(stateItem(state, RETENTION))).toEqual(asStored(state));
  });

  it('reads back what it leaves out when it is not the default: clocks, superseded runs, an earlier attempt’s receipts', () => {
    const [running] = lifecycle({ timeouts: { stallAfterSeconds: 30, approvalWaitSeconds: 60, deliveryGraceSeconds: 10 } });
    if (!running) throw new Error('a running state');
    const again = redispatched(running, { reason: 'stuck', supersede: true, claimSeconds: 60 }, at(40));
    const second = submitted(again, { kind: 'accepted', runId: 'r-2', status: 'running', requestId: 'q-2' }, DEFAULT_RETRY_POLICY, at(41));
    for (const state of [running, again, second]) expect(stateOf(stateItem(state, RETENTION))).toEqual(asStored(state));
    expect(second.supersededRuns).toEqual(['r-d-cost-12-x-1a2b3c4d-1']);
  });

  it('keeps a settled state with its result claimed within one write unit (1 KB) for usual ids', () => {
    const sizes = lifecycle().map((state) => itemSizeBytes(marshall(stateItem(state, RETENTION), { removeUndefinedValues: true })));
    for (const bytes of sizes) expect(bytes).toBeLessThanOrEqual(1024);
  });
});
