import { marshall } from '@aws-sdk/util-dynamodb';
import { describe, expect, it } from 'vitest';
import { itemSizeBytes } from '../../bench/capacity-units.js';
import { stateItem, stateOf, stateVersionOf } from '../../shared/adapters/state-item.js';
import { DUE_SHARDS, dueShardOf, FEED, FEED_SHARDS, feedShardOf, ORIGIN_SHARDS, originListOf, newWriteId, WRITE_ID_ATTRIBUTE } from '../../shared/adapters/ledger-keys.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import { stateOnly, type NextState } from '../../shared/dispatch/state.js';
import { evidenceSettled } from '../../shared/dispatch/transitions/evidence.js';
import { applyRunEvent } from '../../shared/dispatch/transitions/run.js';
import { accepted, redispatched, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { resultClaimed, resultDelivered } from '../../shared/dispatch/transitions/inbox.js';
import { blocked } from '../../shared/dispatch/transitions/core.js';
import { newDispatchFactory, NOW } from '../support/factories.js';

/** The hot state item's codec: what it leaves out is restored exactly, and a settled state with its result out stays within one write unit. */

const at = (seconds: number): Date => new Date(NOW.getTime() + seconds * 1000);
const RETENTION = 86_400;

/** A state as one write stores it: the transitions' output and the version the repository numbers it. */
interface Written {
  readonly state: NextState;
  readonly version: number;
}
const item = ({ state, version }: Written) => stateItem(state, { version, changes: state.changes }, RETENTION);

/** The versions of a lifecycle; each write's transitions start from the state the one before left stored. */
function lifecycle(overrides: Parameters<typeof newDispatchFactory>[0] = {}): Written[] {
  const start = accepted(newDispatchFactory({ dispatchId: 'd-cost-12-x-1a2b3c4d', expectedCount: 1, ...overrides }), NOW);
  const running = submitted(start, { kind: 'accepted', runId: 'r-d-cost-12-x-1a2b3c4d-1', status: 'running', requestId: 'q-12345678-1234-1234-1234-123456789012' }, DEFAULT_RETRY_POLICY, NOW);
  const done = applyRunEvent(stateOnly(running), { seq: 3, type: 'completed', result: { summary: 'done' } }, at(90));
  if (done.kind !== 'apply') throw new Error('the completion applies');
  // Settled in the same write as the completion.
  const settled = evidenceSettled(done.next, { outcome: 'handled', expected: ['out/report.md'], missing: [] }, at(90));
  const states: Written[] = [
    { state: running, version: 1 },
    { state: done.next, version: 2 },
    { state: settled, version: 2 },
  ];
  if (!settled.result) return states;
  const claimed = resultClaimed(stateOnly(settled), { claimToken: 'AAAAAAAAAAAAAAAAAAAAAA', leaseSeconds: 60 }, at(100));
  return [...states, { state: claimed, version: 3 }, { state: resultDelivered(stateOnly(claimed), 'origin:planner', at(110)), version: 4 }];
}

/** What a state item reads back as: the state alone, with the version and the changes its write put beside it. */
const asStored = ({ state, version }: Written) => ({ state: stateOnly(state), version, changes: state.changes });

describe('the state item codec', () => {
  it('reads back every state of a lifecycle exactly as written, for callback and detached dispatches', () => {
    for (const written of [...lifecycle(), ...lifecycle({ deliveryMode: 'detached' })]) {
      expect(stateVersionOf(item(written))).toEqual(asStored(written));
      expect(stateOf(item(written))).toEqual(stateOnly(written.state));
    }
  });

  it('reads back what it leaves out when it is not the default: clocks, superseded runs, an earlier attempt’s receipts', () => {
    const [running] = lifecycle({ timeouts: { stallAfterSeconds: 30, approvalWaitSeconds: 60, deliveryGraceSeconds: 10 } });
    if (!running) throw new Error('a running state');
    const again = redispatched(stateOnly(running.state), { reason: 'stuck', supersede: true, claimSeconds: 60 }, at(40));
    const second = submitted(stateOnly(again), { kind: 'accepted', runId: 'r-2', status: 'running', requestId: 'q-2' }, DEFAULT_RETRY_POLICY, at(41));
    for (const written of [running, { state: again, version: 2 }, { state: second, version: 3 }]) expect(stateVersionOf(item(written))).toEqual(asStored(written));
    expect(second.supersededRuns).toEqual(['r-d-cost-12-x-1a2b3c4d-1']);
  });

  it('keeps a settled state with its result claimed within one write unit (1 KB) for usual ids', () => {
    // As statePut sends it: with its write id.
    const sizes = lifecycle().map((written) => itemSizeBytes(marshall({ ...item(written), [WRITE_ID_ATTRIBUTE]: newWriteId() }, { removeUndefinedValues: true })));
    for (const bytes of sizes) expect(bytes).toBeLessThanOrEqual(1024);
  });
});

describe('the sharded index keys (CONTRACT §14: no key takes a busy origin\'s or a feed\'s every write)', () => {
  const ids = Array.from({ length: 5_000 }, (_, index) => `d-busy-${index}`);
  /** The most any one shard takes, as a multiple of an even share: the hash of the id spreads them. */
  const worstShare = (keys: readonly string[], shards: number): number => Math.max(...[...keys.reduce((counts, key) => counts.set(key, (counts.get(key) ?? 0) + 1), new Map<string, number>()).values()]) / (keys.length / shards);

  it('spreads one origin\'s history, an attention feed and the due index over all their shards, none over 1.25 × its share', () => {
    const history = ids.map((dispatchId) => String(item({ state: accepted(newDispatchFactory({ dispatchId }), NOW), version: 1 }).originKey));
    expect(new Set(history).size).toBe(ORIGIN_SHARDS);
    expect(worstShare(history, ORIGIN_SHARDS)).toBeLessThan(1.25);
    const attention = ids.map((dispatchId) => feedShardOf(FEED.attention('retrying'), dispatchId));
    expect(new Set(attention).size).toBe(FEED_SHARDS);
    expect(worstShare(attention, FEED_SHARDS)).toBeLessThan(1.25);
    const due = ids.map(dueShardOf);
    expect(new Set(due).size).toBe(DUE_SHARDS);
    expect(worstShare(due, DUE_SHARDS)).toBeLessThan(1.4);
  });

  it('keeps a dispatch on the same history and feed shard in every version (no write moves its entry) and reads its origin back', () => {
    const start = accepted(newDispatchFactory({ dispatchId: 'd-shard-1', origin: 'team-a' }), NOW);
    const versions = [
      { state: start, version: 1 },
      { state: blocked(stateOnly(start), 'unknown_target', 'no target "x"', at(5)), version: 2 },
    ].map(item);
    expect(new Set(versions.map((written) => written.originKey)).size).toBe(1);
    expect(String(versions[0]?.originKey)).toMatch(/^O#team-a#\d\d$/);
    expect(versions[1]?.feedKey).toBe(feedShardOf(FEED.attention('blocked'), 'd-shard-1'));
    for (const written of versions) expect(stateOf(written).origin).toBe('team-a');
  });

  it('reads the origin of a state written before the shards, under the unsharded history key', () => {
    const legacy = { ...item({ state: accepted(newDispatchFactory({ dispatchId: 'd-legacy-1', origin: 'team-b' }), NOW), version: 1 }), originKey: originListOf('team-b') };
    expect(stateOf(legacy).origin).toBe('team-b');
  });
});
