import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { countsUpdate } from '../../shared/adapters/dispatch-counters.js';
import { countDelta, countsOf, EVIDENCE_OUTCOMES, EXECUTION_BUCKETS, PHASES, sumDeltas, type CountDelta } from '../../shared/dispatch/counts.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import { stateOnly, type DispatchState, type ExecutionStatus, type NextState } from '../../shared/dispatch/state.js';
import { accepted, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { countDeltaOf, publishStreamBatch, PublishIncompleteError, type StateVersion, type StreamChange } from '../../shared/events/derive.js';
import { advance } from '../support/states.js';
import { newDispatchFactory, NOW } from '../support/factories.js';

// CONTRACT §2 v2 `GET /counts`: the publisher keeps counts by phase, execution status (`none` before
// submission) and evidence outcome as deltas of the stream's state records, never by reading the table.

const later = (seconds: number): Date => new Date(NOW.getTime() + seconds * 1000);

/** A version as the table holds it: the state alone, the version that wrote it and what that write changed. */
const stored = (next: NextState, version: number): StateVersion => ({ state: stateOnly(next), version, changes: next.changes });

/** A version of a dispatch's state with the three counted fields as given (the rest as a fresh dispatch has them). */
function stateWith(dispatchId: string, fields: { phase: DispatchState['phase']; status: ExecutionStatus | 'none'; outcome: DispatchState['evidence']['outcome'] }, version = 1): StateVersion {
  const base = accepted(newDispatchFactory({ dispatchId }), NOW);
  return stored(
    {
      ...base,
      phase: fields.phase,
      execution: { ...base.execution, status: fields.status === 'none' ? null : fields.status },
      evidence: { ...base.evidence, outcome: fields.outcome },
    },
    version,
  );
}

const stateChange = (sequenceNumber: string, eventName: StreamChange['eventName'], before: StateVersion | undefined, after: StateVersion | undefined): StreamChange => ({
  sequenceNumber,
  eventName,
  oldItem: before ? { kind: 'state', ...before } : { kind: 'other' },
  newItem: after ? { kind: 'state', ...after } : { kind: 'other' },
});

describe('countDelta', () => {
  it('moves a created dispatch into four buckets, with `none` for the execution status it does not have yet', () => {
    const created = accepted(newDispatchFactory(), NOW);
    expect(countDelta(undefined, created)).toEqual({ total: 1, 'phase.accepted': 1, 'execution.none': 1, 'evidence.unverified': 1 });
  });

  it('moves a submitted dispatch out of accepted and none, and leaves the unchanged buckets out', () => {
    const created = accepted(newDispatchFactory(), NOW);
    const next = submitted(created, { kind: 'accepted', runId: 'r-1', status: 'running', requestId: 'q-1' }, DEFAULT_RETRY_POLICY, later(1));
    expect(countDelta(created, next)).toEqual({ 'phase.accepted': -1, 'phase.submitted': 1, 'execution.none': -1, 'execution.running': 1 });
  });

  it('takes a removed dispatch (TTL expiry) out of every bucket it was in', () => {
    const gone = stateWith('d-1', { phase: 'blocked', status: 'none', outcome: 'unverified' });
    expect(countDeltaOf(stateChange('9', 'REMOVE', gone, undefined))).toEqual({ total: -1, 'phase.blocked': -1, 'execution.none': -1, 'evidence.unverified': -1 });
  });

  it('counts nothing for a record of another item, or an image that fails decoding', () => {
    expect(countDeltaOf({ sequenceNumber: '1', eventName: 'INSERT', oldItem: { kind: 'other' }, newItem: { kind: 'rejection', rejection: { messageId: 'm', at: NOW.toISOString(), reason: 'not_json', dispatchId: null, origin: null, senderId: null, bodyPreview: '', bodyRef: null, bodyBytes: 0 } } })).toEqual({});
    expect(countDeltaOf({ sequenceNumber: '2', eventName: 'INSERT', oldItem: { kind: 'other' }, newItem: { kind: 'corrupt', key: 'D#x/STATE', problem: 'phase' } })).toEqual({});
  });

  it('sums the deltas of every change from zero to the counts of the states left, whatever the order of creates, changes and removals (property)', () => {
    const fields = fc.record({ phase: fc.constantFrom(...PHASES), status: fc.constantFrom(...EXECUTION_BUCKETS), outcome: fc.constantFrom(...EVIDENCE_OUTCOMES) });
    const step = fc.record({ id: fc.integer({ min: 0, max: 5 }), remove: fc.boolean(), fields });
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
        const live = new Map<string, StateVersion>();
        const changes: StreamChange[] = [];
        for (const [index, { id, remove, fields: next }] of steps.entries()) {
          const dispatchId = `d-${id}`;
          const before = live.get(dispatchId);
          if (remove) {
            if (!before) continue;
            changes.push(stateChange(String(index), 'REMOVE', before, undefined));
            live.delete(dispatchId);
          } else {
            const after = stateWith(dispatchId, next, (before?.version ?? 0) + 1);
            changes.push(stateChange(String(index), before ? 'MODIFY' : 'INSERT', before, after));
            live.set(dispatchId, after);
          }
        }
        const counted = countsOf(sumDeltas(changes.map(countDeltaOf)));
        // Counted directly from the states left, bucket by bucket.
        const states = [...live.values()].map((version) => version.state);
        const tally = <T extends string>(values: readonly T[], of: (state: DispatchState) => string) => Object.fromEntries(values.map((value) => [value, states.filter((state) => of(state) === value).length]));
        expect(counted).toEqual({
          total: states.length,
          phase: tally(PHASES, (state) => state.phase),
          execution: tally(EXECUTION_BUCKETS, (state) => state.execution.status ?? 'none'),
          evidence: tally(EVIDENCE_OUTCOMES, (state) => state.evidence.outcome),
        });
      }),
    );
  });
});

describe('countsOf', () => {
  it('answers every known bucket, 0 where nothing was counted, and keeps a bucket a stored state carried beyond them', () => {
    const counts = countsOf({ total: 2, 'phase.accepted': 2, 'execution.none': 1, 'execution.mystery': 1, 'evidence.pending': 2 });
    expect(counts.total).toBe(2);
    expect(counts.phase).toEqual({ accepted: 2, submitted: 0, blocked: 0, cancelled: 0 });
    expect(counts.execution).toMatchObject({ none: 1, queued: 0, running: 0, unknown: 0, mystery: 1 });
    expect(counts.evidence).toEqual({ pending: 2, handled: 0, orphan_no_delivery: 0, unverified: 0 });
  });
});

describe('countsUpdate (the counter write)', () => {
  it('adds every bucket of the delta to one counter item in one ADD, bucket names through placeholders', () => {
    expect(countsUpdate('ledger', 3, { total: 1, 'phase.accepted': -1 })).toEqual({
      TableName: 'ledger',
      Key: { pk: 'COUNTS#3', sk: 'COUNTS' },
      UpdateExpression: 'ADD #b0 :d0, #b1 :d1',
      ExpressionAttributeNames: { '#b0': 'total', '#b1': 'phase.accepted' },
      ExpressionAttributeValues: { ':d0': 1, ':d1': -1 },
    });
  });
});

describe('publishStreamBatch counts what the batch checkpoints', () => {
  const created = accepted(newDispatchFactory({ dispatchId: 'd-c-1' }), NOW);
  const running = submitted(created, { kind: 'accepted', runId: 'r-1', status: 'running', requestId: 'q-1' }, DEFAULT_RETRY_POLICY, later(1));
  const done = advance(stateOnly(running), 'completed', later(60), { execution: { ...running.execution, status: 'completed', nativeStatus: 'completed', completedAt: later(60).toISOString() } });
  const other = accepted(newDispatchFactory({ dispatchId: 'd-c-2' }), NOW);
  /** Records 1..3: a dispatch written as submitted (1 event: Submitted stands for the acceptance), completed (1 event); another accepted (1 event). */
  const batch: StreamChange[] = [stateChange('1', 'INSERT', undefined, stored(running, 1)), stateChange('2', 'MODIFY', stored(running, 1), stored(done, 2)), stateChange('3', 'INSERT', undefined, stored(other, 1))];

  it('adds the deltas of every record once, in one write seeded by the first sequence number, when the whole batch is published', async () => {
    const count = vi.fn(async (_delta: CountDelta, _seed: string) => {});
    const report = await publishStreamBatch(batch, { publish: async () => {}, count });

    expect(count).toHaveBeenCalledTimes(1);
    expect(count).toHaveBeenCalledWith(
      { total: 2, 'phase.submitted': 1, 'phase.accepted': 1, 'execution.completed': 1, 'execution.none': 1, 'evidence.unverified': 2 },
      '1',
    );
    expect(report.checkpointed).toBe(3);
  });

  it('adds only the deltas of the records before the one whose events did not all reach the bus (the stream retries from there)', async () => {
    const count = vi.fn(async (_delta: CountDelta, _seed: string) => {});
    // The bus took the first event (record 1's): record 2 is the first not published.
    const report = await publishStreamBatch(batch, {
      publish: async () => {
        throw new PublishIncompleteError('bus refused', 1);
      },
      count,
    });

    expect(report.batchItemFailures.map((failure) => failure.itemIdentifier)).toEqual(['2', '3']);
    expect(report.checkpointed).toBe(1);
    expect(count).toHaveBeenCalledWith({ total: 1, 'phase.submitted': 1, 'execution.running': 1, 'evidence.unverified': 1 }, '1');
    // The retried batch (records 2 and 3) then counts the rest: together, each record once.
    const retried = vi.fn(async (_delta: CountDelta, _seed: string) => {});
    await publishStreamBatch(batch.slice(1), { publish: async () => {}, count: retried });
    expect(sumDeltas([count.mock.calls[0]?.[0] ?? {}, retried.mock.calls[0]?.[0] ?? {}])).toEqual(sumDeltas(batch.map(countDeltaOf)));
  });

  it('writes no counter when nothing it checkpoints moves a count (the whole batch failed, or only other items changed)', async () => {
    const count = vi.fn(async (_delta: CountDelta, _seed: string) => {});
    await publishStreamBatch(batch, { publish: async () => Promise.reject(new Error('network down')), count });
    await publishStreamBatch([{ sequenceNumber: '7', eventName: 'MODIFY', oldItem: { kind: 'other' }, newItem: { kind: 'other' } }], { publish: async () => {}, count });
    expect(count).not.toHaveBeenCalled();
  });

  it('fails the batch when the counter write fails, so the stream delivers it again rather than lose its counts', async () => {
    await expect(publishStreamBatch(batch, { publish: async () => {}, count: async () => Promise.reject(new Error('throttled')) })).rejects.toThrow('throttled');
  });
});
