import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DispatchState } from '../../shared/dispatch/state.js';
import { accepted } from '../../shared/dispatch/transitions/lifecycle.js';
import type { CommitOutcome } from '../../shared/ledger/port.js';
import { UPDATE_ROUNDS, updateDispatch, writeOnce } from '../../shared/ledger/repository.js';

/**
 * The one update loop (shared/ledger/repository.ts; docs/architecture.md "The update loop"). Issue 33:
 * "update a dispatch" was written out in 12 files, with retry limits of 3, 4, 5 and 10.
 */

const root = path.resolve(import.meta.dirname, '../..');
const now = new Date('2026-12-05T10:00:00.000Z');
const stateOf = (version: number): DispatchState => ({
  ...accepted(
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
  version,
});

/** A store whose commits answer from a script, counting the calls the loop makes. */
function scripted(answers: CommitOutcome['kind'][]) {
  const calls = { reads: 0, commits: 0 };
  let version = 1;
  return {
    calls,
    store: {
      getState: async () => {
        calls.reads += 1;
        return stateOf(version);
      },
      commit: async (): Promise<CommitOutcome> => {
        calls.commits += 1;
        const kind = answers.shift() ?? 'committed';
        if (kind === 'conflict') version += 1;
        return kind === 'conflict' ? { kind, existing: undefined } : { kind };
      },
    },
  };
}

const bump = (state: DispatchState | undefined) => ({ write: { ...(state as DispatchState), updatedAt: 'next' }, answer: state?.version });

describe('updateDispatch', () => {
  it('reads, decides and commits once when nothing races it', async () => {
    const { store, calls } = scripted([]);
    const updated = await updateDispatch(store, 'd-1', bump);
    expect(updated).toMatchObject({ kind: 'written', answer: 1, state: { updatedAt: 'next' } });
    expect(calls).toEqual({ reads: 1, commits: 1 });
  });

  it('reads again and decides again on the state another writer left, after each lost race', async () => {
    const { store, calls } = scripted(['conflict', 'conflict']);
    const seen: number[] = [];
    const updated = await updateDispatch(store, 'd-1', (state, round) => {
      seen.push(round);
      return bump(state);
    });
    // Decided on versions 1, 2 and 3: the third write was on the version the second race left.
    expect(updated).toMatchObject({ kind: 'written', answer: 3 });
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
    const updated = await updateDispatch(store, 'd-1', (state) => ({ answer: `left v${state?.version}` }));
    expect(updated).toEqual({ kind: 'unchanged', state: stateOf(1), answer: 'left v1' });
    expect(calls).toEqual({ reads: 1, commits: 0 });
  });

  it('decides on the state the caller holds without reading it again', async () => {
    const { store, calls } = scripted([]);
    await updateDispatch(store, 'd-1', bump, { first: stateOf(7) });
    expect(calls).toEqual({ reads: 0, commits: 1 });
  });

  it('never decides again under `once`: the monitor and a submitter step back when another actor took the step', async () => {
    const { store, calls } = scripted(['conflict']);
    const written = await writeOnce(store, stateOf(1), { ...stateOf(1), updatedAt: 'next' });
    expect(written).toMatchObject({ kind: 'lost', reason: 'conflict' });
    expect(calls).toEqual({ reads: 0, commits: 1 });
  });

  it('does not retry a slot shard found at its cap: the caller tries another shard or waits', async () => {
    const { store, calls } = scripted(['slot_full']);
    expect(await updateDispatch(store, 'd-1', bump)).toMatchObject({ kind: 'lost', reason: 'slot_full' });
    expect(calls.commits).toBe(1);
  });

  it('refuses a write decided on no state (nothing to condition it on)', async () => {
    const store = { getState: async () => undefined, commit: async (): Promise<CommitOutcome> => ({ kind: 'committed' }) };
    await expect(updateDispatch(store, 'd-1', () => ({ write: stateOf(1), answer: null }))).rejects.toThrow(/decided on no state/);
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
