import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { stateOnly, type DispatchState, type NextState } from '../../shared/dispatch/state.js';
import { accepted } from '../../shared/dispatch/transitions/lifecycle.js';
import type { CommitOutcome, StoredState } from '../../shared/ledger/port.js';
import { UPDATE_ROUNDS, updateDispatch, writeOnce } from '../../shared/ledger/repository.js';

/**
 * The one update loop (shared/ledger/repository.ts; docs/architecture.md "The update loop"). Issue 33:
 * "update a dispatch" was written out in 12 files, with retry limits of 3, 4, 5 and 10.
 */

const root = path.resolve(import.meta.dirname, '../..');
const now = new Date('2026-12-05T10:00:00.000Z');
const state: DispatchState = stateOnly(
  accepted(
    {
      dispatchId: 'd-1',
      origin: 'o',
      target: 't',
      hop: 0,
      maxHops: 3,
      parentDispatchId: null,
      deliveryMode: 'callback',
      timeouts: { stallAfterSeconds: 60, approvalWaitSeconds: 60, deliveryGraceSeconds: 60 },
      writtenAt: now.toISOString(),
      expectedCount: 0,
      notBefore: null,
    },
    now,
  ),
);
/** The state stored at `version` (the repository's envelope). */
const storedAt = (version: number): StoredState => ({ state, version });
/** A write decided on `from`: what a transition makes of it (the test's own mark in `updatedAt`). */
const nextOf = (from: DispatchState): NextState => ({ ...from, updatedAt: 'next', changes: ['rescheduled'], dueAtRead: from.dueAt });

/** A store whose commits answer from a script, counting the calls the loop makes (and the version each commit was conditioned on). */
function scripted(answers: CommitOutcome['kind'][]) {
  const calls = { reads: 0, commits: 0 };
  const committedOn: number[] = [];
  let version = 1;
  return {
    calls,
    committedOn,
    store: {
      getStored: async () => {
        calls.reads += 1;
        return storedAt(version);
      },
      commit: async (from: StoredState): Promise<CommitOutcome> => {
        calls.commits += 1;
        committedOn.push(from.version);
        const kind = answers.shift() ?? 'committed';
        if (kind === 'conflict') version += 1;
        return kind === 'conflict' ? { kind, existing: undefined } : { kind };
      },
    },
  };
}

const bump = (read: DispatchState | undefined) => ({ write: nextOf(read as DispatchState), answer: read?.phase });

describe('updateDispatch', () => {
  it('reads, decides and commits once when nothing races it', async () => {
    const { store, calls, committedOn } = scripted([]);
    const updated = await updateDispatch(store, 'd-1', bump);
    expect(updated).toMatchObject({ kind: 'written', answer: 'accepted', version: 2, state: { updatedAt: 'next' }, written: { changes: ['rescheduled'] } });
    expect(committedOn).toEqual([1]);
    expect(calls).toEqual({ reads: 1, commits: 1 });
  });

  it('reads again and decides again on the state another writer left, after each lost race', async () => {
    const { store, calls, committedOn } = scripted(['conflict', 'conflict']);
    const seen: number[] = [];
    const updated = await updateDispatch(store, 'd-1', (read, round) => {
      seen.push(round);
      return bump(read);
    });
    // Decided on versions 1, 2 and 3: the third write was on the version the second race left.
    expect(committedOn).toEqual([1, 2, 3]);
    expect(updated).toMatchObject({ kind: 'written', answer: 'accepted', version: 4 });
    expect(seen).toEqual([0, 1, 2]);
    expect(calls).toEqual({ reads: 3, commits: 3 });
  });

  it(`gives up after ${UPDATE_ROUNDS} lost races, one policy for every use case (was: 3, 4, 5 or 10 rounds, by file)`, async () => {
    const { store, calls } = scripted(Array.from({ length: 20 }, () => 'conflict' as const));
    const updated = await updateDispatch(store, 'd-1', bump);
    expect(updated).toMatchObject({ kind: 'lost', reason: 'conflict' });
    expect(calls.commits).toBe(UPDATE_ROUNDS);
    expect(calls.reads).toBe(UPDATE_ROUNDS);
  });

  it('writes nothing when the decision is to leave the dispatch, and answers what was decided', async () => {
    const { store, calls } = scripted([]);
    const updated = await updateDispatch(store, 'd-1', (read) => ({ answer: `left ${read?.phase} ${read?.updatedAt}` }));
    expect(updated).toEqual({ kind: 'unchanged', state: storedAt(1).state, answer: `left accepted ${now.toISOString()}` });
    expect(calls).toEqual({ reads: 1, commits: 0 });
  });

  it('decides on the state the caller holds without reading it again', async () => {
    const { store, calls, committedOn } = scripted([]);
    const updated = await updateDispatch(store, 'd-1', bump, { first: storedAt(7) });
    expect(calls).toEqual({ reads: 0, commits: 1 });
    expect(committedOn).toEqual([7]);
    expect(updated).toMatchObject({ kind: 'written', version: 8 });
  });

  it('never decides again under `once`: the monitor and a submitter step back when another actor took the step', async () => {
    const { store, calls } = scripted(['conflict']);
    const written = await writeOnce(store, storedAt(1), nextOf(storedAt(1).state));
    expect(written).toMatchObject({ kind: 'lost', reason: 'conflict' });
    expect(calls).toEqual({ reads: 0, commits: 1 });
  });

  it('does not retry a slot shard found at its cap: the caller tries another shard or waits', async () => {
    const { store, calls } = scripted(['slot_full']);
    expect(await updateDispatch(store, 'd-1', bump)).toMatchObject({ kind: 'lost', reason: 'slot_full' });
    expect(calls.commits).toBe(1);
  });

  it('refuses a write decided on no state (nothing to condition it on)', async () => {
    const store = { getStored: async () => undefined, commit: async (): Promise<CommitOutcome> => ({ kind: 'committed' }) };
    await expect(updateDispatch(store, 'd-1', () => ({ write: nextOf(storedAt(1).state), answer: null }))).rejects.toThrow(/decided on no state/);
  });
});

describe('the update loop is written once', () => {
  it('no use case, route or handler commits a dispatch but through the repository', () => {
    const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', 'shared', 'functions', 'local', 'cli'], { cwd: root, encoding: 'utf8' })
      .split('\n')
      .filter((file) => file.endsWith('.ts') && !file.endsWith('.test.ts'));
    const committing = files.filter((file) => /\.commit\(/.test(readFileSync(path.join(root, file), 'utf8')));
    // The repository, and the admission nudge: an adapter that wraps the store's commit to wake the monitor.
    expect(committing.sort()).toEqual(['shared/adapters/admission-nudge.ts', 'shared/ledger/repository.ts']);
  });

  it('no route writes: a route parses, calls one use case and maps its outcome (issue 33: the evidence upload, the evidence mark and the operator receipt wrote from the HTTP layer)', () => {
    const routes = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', 'shared/api'], { cwd: root, encoding: 'utf8' })
      .split('\n')
      .filter((file) => file.endsWith('.ts'));
    expect(routes.length).toBeGreaterThan(5);
    // A store, blob or inbox write, or an update of a dispatch, spelled in a route file.
    const write = /\b(?:store|blobs|inbox)\.(?:put|commit|record|renew|delete|append|claim|release|ack)\w*\(|\b(?:updateDispatch|writeOnce)\(/;
    expect(routes.filter((file) => write.test(readFileSync(path.join(root, file), 'utf8')))).toEqual([]);
  });
});
