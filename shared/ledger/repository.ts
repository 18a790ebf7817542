import type { EndedAttempt } from '../dispatch/records.js';
import { isNextState, stateOnly, type DispatchState, type NextState, type Phase } from '../dispatch/state.js';
import { assertLegal, IllegalTransitionError } from '../dispatch/transitions/legal.js';
import { NOT_STORED, type LedgerStore, type StoredState } from './port.js';

/**
 * The dispatch repository: the one update loop (docs/architecture.md "The update loop"). Every change
 * to a dispatch is `updateDispatch(store, dispatchId, decide)`:
 *
 *  1. read the hot state, strongly consistent, with its version (or take the one the caller just read, `first`);
 *  2. `decide` on the state — a use case's pure transition, or nothing to write — and say what to answer;
 *  3. commit it as the next version of the one read. The store works out every write that follows from the
 *     change (the slot taken or given back, the ended attempt's record, result and index entries) and
 *     puts them in the same write: all or none;
 *  4. a lost race — another writer committed first — is met under one policy (`RacePolicy`).
 *
 * Nothing else in the use cases calls `commit` (test/unit/update-loop.test.ts holds them to it).
 */

/**
 * How a lost race is met:
 * - `reread`: read the state again and decide again, up to UPDATE_ROUNDS decisions in all. For a writer
 *   that only records what it was told or asked (a run's event, an approval, a claim, a cancel).
 * - `once`: never decide again. For an actor that holds the dispatch for a step (the monitor's tick, a
 *   submitter under its claim): a lost race means another actor took the step, and deciding again would
 *   repeat its calls to the target.
 */
export type RacePolicy = 'reread' | 'once';

/** The decisions one update makes at most, when every write loses a race (each lost race is one concurrent writer). */
export const UPDATE_ROUNDS = 8;

/**
 * The condition of the write that makes `next` the next version of `from`: the version read and its
 * phase, or, for a dispatch not stored yet, that no item exists. Throws before anything is sent when the
 * state machine does not allow the move (`assertLegal`), or when `next` was not decided on the state
 * read, as far as the due time its transitions read tells (a stored envelope holds the state alone, and
 * a create starts from no due time): a transition's output carried into the next write would publish its
 * changes twice.
 */
export function writeCondition(from: StoredState, next: NextState): { readonly create: true } | { readonly create: false; readonly version: number; readonly phase: Phase } {
  const stored = from.version !== NOT_STORED;
  if (next.dispatchId !== from.state.dispatchId || next.dueAtRead !== (stored ? from.state.dueAt : null) || (stored && isNextState(from.state))) {
    throw new IllegalTransitionError(from.state.dispatchId, from.state.phase, next.phase, next.changes);
  }
  if (!stored) return { create: true };
  assertLegal(from.state, next);
  return { create: false, version: from.version, phase: from.state.phase };
}

/** What a use case decided on the state it was given: write `write` (and keep `ended` with it), or leave the dispatch as it is. */
export type Decision<A> =
  | { readonly write: NextState; readonly ended?: EndedAttempt | undefined; readonly answer: A }
  | { readonly write?: undefined; readonly answer: A };

/** `round`: 0 for the first decision, then one more for each race lost. `state`: undefined when there is no such dispatch. */
export type Decide<A> = (state: DispatchState | undefined, round: number) => Decision<A> | Promise<Decision<A>>;

export type UpdateResult<A> =
  /**
   * `state` and `version`: what this update left stored (the state alone: the next write's transitions
   * start from it); `written`: the state as the decision made it, with what it changed.
   */
  | { readonly kind: 'written'; readonly state: DispatchState; readonly version: number; readonly written: NextState; readonly answer: A }
  /** The decision was to write nothing. */
  | { readonly kind: 'unchanged'; readonly state: DispatchState | undefined; readonly answer: A }
  /**
   * The last write lost: another writer changed the dispatch first (`existing`: what a create found, when
   * the store said), or the slot shard it took from was at its cap (`slot_full`: nothing was written).
   */
  | { readonly kind: 'lost'; readonly reason: 'conflict' | 'slot_full'; readonly state: DispatchState; readonly existing?: DispatchState | undefined };

export interface UpdateOptions {
  /** The state the caller just read (or a state never stored, version 0, to create): decided on first, without reading. */
  readonly first?: StoredState | undefined;
  /** How the state is read when it is read: strongly consistent by itself, unless the use case needs more read with it. */
  readonly read?: ((dispatchId: string) => Promise<StoredState | undefined>) | undefined;
  readonly race?: RacePolicy | undefined;
}

export async function updateDispatch<A>(
  store: Pick<LedgerStore, 'getStored' | 'commit'>,
  dispatchId: string,
  decide: Decide<A>,
  options: UpdateOptions = {},
): Promise<UpdateResult<A>> {
  const read = options.read ?? ((id: string) => store.getStored(id));
  const rounds = options.race === 'once' ? 1 : UPDATE_ROUNDS;
  let stored = options.first ?? (await read(dispatchId));
  for (let round = 0; ; round += 1) {
    const decision = await decide(stored?.state, round);
    if (!decision.write) return { kind: 'unchanged', state: stored?.state, answer: decision.answer };
    // A write is decided on a state read (a create's is the never-stored version 0, given as `first`).
    if (!stored) throw new Error(`dispatch ${dispatchId}: a write was decided on no state`);
    const from = stored;
    // The ended attempt's record is keyed by the version it ended at: the envelope's, never the state's.
    const written = await store.commit(from, decision.write, decision.ended && { ...decision.ended, stateVersion: from.version });
    if (written.kind === 'committed') return { kind: 'written', state: stateOnly(decision.write), version: from.version + 1, written: decision.write, answer: decision.answer };
    if (written.kind === 'slot_full' || round + 1 >= rounds) {
      return { kind: 'lost', reason: written.kind, state: from.state, existing: written.kind === 'conflict' ? written.existing : undefined };
    }
    stored = await read(dispatchId);
  }
}

/**
 * A transition already decided on the state `from` the caller holds, written once (`race: 'once'`):
 * for an actor that holds the dispatch for its step — another actor's write first means the step is theirs.
 */
export async function writeOnce(store: Pick<LedgerStore, 'getStored' | 'commit'>, from: StoredState, next: NextState, ended?: EndedAttempt): Promise<Exclude<UpdateResult<undefined>, { readonly kind: 'unchanged' }>> {
  const updated = await updateDispatch(store, from.state.dispatchId, () => ({ write: next, ended, answer: undefined }), { first: from, race: 'once' });
  if (updated.kind === 'unchanged') throw new Error('a decided write came back unwritten');
  return updated;
}
