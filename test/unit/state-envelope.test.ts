import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { statePut } from '../../shared/adapters/ledger-commands.js';
import { stateOf, storedOf, stateVersionOf } from '../../shared/adapters/state-item.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import { isNextState, stateOnly } from '../../shared/dispatch/state.js';
import { accepted, redispatched, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { rescheduled } from '../../shared/dispatch/transitions/core.js';
import { applyRunEvent } from '../../shared/dispatch/transitions/run.js';
import { notStored } from '../../shared/ledger/port.js';
import { updateDispatch, writeCondition } from '../../shared/ledger/repository.js';
import { MemoryStore } from '../support/memory-store.js';
import { newDispatchFactory, NOW } from '../support/factories.js';

/**
 * Issue 33: `DispatchState` carries no storage field. The version a write is conditioned on travels in
 * the repository's envelope (`StoredState`); what a write changed travels with the transition's output
 * (`NextState`) and is written beside the state, never read back into it.
 */

const later = (seconds: number): Date => new Date(NOW.getTime() + seconds * 1000);
const RETENTION = 86_400;
const STORAGE_FIELDS = ['version', 'changes', 'storedDueAt', 'dueAtRead'];

const submittedOnce = () => submitted(accepted(newDispatchFactory(), NOW), { kind: 'accepted', runId: 'r-1', status: 'running', requestId: 'q-1' }, DEFAULT_RETRY_POLICY, NOW);

describe('the state and its envelope', () => {
  it('declares no storage field in DispatchState (it used to carry version, changes and storedDueAt)', () => {
    const source = readFileSync(path.resolve(import.meta.dirname, '../../shared/dispatch/state.ts'), 'utf8');
    const body = /export interface DispatchState \{([\s\S]*?)\n\}/.exec(source)?.[1];
    expect(body).toContain('readonly phase: Phase;');
    const fields = [...(body ?? '').matchAll(/^ {2}readonly (\w+)\??:/gm)].map((match) => match[1]);
    expect(fields.length).toBeGreaterThan(20);
    expect(fields.filter((field) => STORAGE_FIELDS.includes(field as string))).toEqual([]);
  });

  it('writes the version and the changes beside the state, and reads the state back without them', () => {
    const first = submittedOnce();
    const put = statePut('ledger', notStored(accepted(newDispatchFactory(), NOW)), first, RETENTION);
    expect(put.Item).toMatchObject({ version: 1, changes: ['accepted', 'submitted'] });
    expect(put.ConditionExpression).toContain('attribute_not_exists(pk)');

    const read = stateOf(put.Item);
    expect(STORAGE_FIELDS.filter((field) => field in read)).toEqual([]);
    expect(read).toEqual(stateOnly(first));
    expect(storedOf(put.Item)).toEqual({ state: read, version: 1 });
    expect(stateVersionOf(put.Item)).toEqual({ state: read, version: 1, changes: ['accepted', 'submitted'] });

    // The next write is conditioned on the version read and writes the one after it.
    const next = applyRunEvent(read, { seq: 1, type: 'completed' }, later(60));
    if (next.kind !== 'apply') throw new Error(`expected apply, got ${next.kind}`);
    const second = statePut('ledger', storedOf(put.Item), next.next, RETENTION);
    expect(second.ExpressionAttributeValues).toMatchObject({ ':v': 1, ':n': 2, ':p': 'submitted' });
    // (A callback dispatch's result is made in the write that completes it.)
    expect(second.Item).toMatchObject({ version: 2, changes: ['completed', 'result_ready'] });
  });

  it("starts a write's changes on a state read and adds to them on a transition's output (the one write says all it did)", () => {
    const start = accepted(newDispatchFactory(), NOW);
    expect(start.changes).toEqual(['accepted']);
    expect(submittedOnce().changes).toEqual(['accepted', 'submitted']);
    const stored = stateOnly(submittedOnce());
    expect(isNextState(stored)).toBe(false);
    const completed = applyRunEvent(stored, { seq: 1, type: 'completed' }, later(60));
    expect(completed.kind === 'apply' && completed.next.changes).toEqual(['completed', 'result_ready']);
  });

  it('leaves the state alone and the new version in the envelope after a write, and keys an ended attempt by the version it ended at', async () => {
    const store = new MemoryStore();
    const first = submittedOnce();
    expect((await store.commit(notStored(accepted(newDispatchFactory(), NOW)), first)).kind).toBe('committed');
    const read = await store.getStored(first.dispatchId);
    expect(read?.version).toBe(1);

    const updated = await updateDispatch(store, first.dispatchId, (state) => {
      if (!state) throw new Error('no state');
      return { write: redispatched(state, { reason: 'operator', supersede: true, claimSeconds: 60 }, later(30)), ended: { dispatchId: state.dispatchId, attempt: state.attempt, runId: state.runId, receipts: state.receipts, execution: state.execution, endedAt: later(30).toISOString(), reason: 'operator', superseded: true }, answer: 'done' };
    });
    if (updated.kind !== 'written') throw new Error(`expected written, got ${updated.kind}`);
    expect(updated.version).toBe(2);
    expect(STORAGE_FIELDS.filter((field) => field in updated.state)).toEqual([]);
    expect(updated.written.changes).toEqual(['superseded']);
    expect(store.written.get(first.dispatchId)).toEqual({ version: 2, changes: ['superseded'] });
    expect((await store.listPastAttempts(first.dispatchId)).map((past) => past.stateVersion)).toEqual([1]);
  });

  it('conditions a write on the version in the envelope, and refuses a move the state machine does not allow', () => {
    const stored = stateOnly(submittedOnce());
    const completed = applyRunEvent(stored, { seq: 1, type: 'completed' }, later(60));
    if (completed.kind !== 'apply') throw new Error('expected apply');
    expect(writeCondition({ state: stored, version: 7 }, completed.next)).toEqual({ create: false, version: 7, phase: 'submitted' });
    // A completed run is not accepted again by a submission's transition.
    const resubmitted = submitted(stateOnly(completed.next), { kind: 'accepted', runId: 'r-2', status: 'running', requestId: 'q-2' }, DEFAULT_RETRY_POLICY, later(90));
    expect(() => writeCondition({ state: stateOnly(completed.next), version: 8 }, resubmitted)).toThrow(/not a legal transition/);
  });

  it("refuses a write built on the previous write's output instead of the state stored (the version check used to catch it: version + 2)", async () => {
    const store = new MemoryStore();
    const first = submittedOnce();
    await store.commit(notStored(accepted(newDispatchFactory(), NOW)), first);
    const read = await store.getStored(first.dispatchId);
    if (!read) throw new Error('not stored');
    const moved = rescheduled(read.state, later(10), later(700));
    expect(await store.commit(read, moved)).toEqual({ kind: 'committed' });
    const stored = await store.getStored(first.dispatchId);
    if (!stored) throw new Error('not stored');
    // Carried over: its changes would be written again ('rescheduled' twice, published twice).
    const carried = rescheduled(moved, later(20), later(900));
    expect(carried.changes).toEqual(['rescheduled', 'rescheduled']);
    expect(() => writeCondition(stored, carried)).toThrow(/not a legal transition/);
    // An envelope holding a transition's output is refused too; the state stored is not.
    expect(() => writeCondition({ state: moved, version: stored.version }, rescheduled(stored.state, later(20), later(900)))).toThrow(/not a legal transition/);
    expect(writeCondition(stored, rescheduled(stored.state, later(20), later(900)))).toEqual({ create: false, version: 2, phase: 'submitted' });
  });
});
