import { isTerminal, type DispatchState, type ResultBodyRef } from '../dispatch/state.js';
import type { DispatchWorkDeps } from '../ledger/port.js';
import { notRegistered } from '../targets/port.js';
import { type LookupOutcome } from '../dispatch/target-answers.js';
import { MAX_RESULT_BODY_DEPTH } from '@dispatch-ledger/protocol';
import { nestsDeeperThan } from '../json-depth.js';
import { MAX_RESULT_BODY_BYTES, storeResultBody } from './result-body.js';

/**
 * Asks the target about the dispatch's current run (the monitor's stall watch and a refresh alike).
 * A target no longer registered cannot be asked: that is an unavailable lookup, never a verdict.
 */
export async function lookUpRun(deps: Pick<DispatchWorkDeps, 'store' | 'targetFor'>, state: DispatchState): Promise<LookupOutcome> {
  const registration = await deps.store.getTarget(state.target);
  if (!registration || !state.runId) return { kind: 'unavailable', reason: notRegistered(state.target) };
  const submittedAt = state.receipts.findLast((receipt) => receipt.event === 'dispatch_submitted' && receipt.attempt === state.attempt)?.at;
  return deps.targetFor(registration).lookup(state.runId, { submittedAt });
}

/** §10's depth bound, as a reported body is held to it (a deeper one would overflow what later serializes it). */
function withinDepth(json: string): boolean {
  try {
    return !nestsDeeperThan(JSON.parse(json), MAX_RESULT_BODY_DEPTH);
  } catch {
    return false;
  }
}

/** The seq a result body read from the runtime itself is kept under: a reported event's seq starts at 1. */
export const RUNTIME_RESULT_SEQ = 0;

/**
 * A final result the lookup found with a body (a runtime's output, CONTRACT §17; what an http target's
 * answer or the Lambda kit's table holds), kept before the state that will refer to it — within §10's
 * bounds (its size and its depth); beyond them the summary's preview alone, never a refused body. (A
 * store that cannot be written is an error, retried like any.) Nothing is kept for a run whose end is
 * already recorded.
 */
export async function keepFoundBody(deps: Pick<DispatchWorkDeps, 'store' | 'blobs' | 'now'>, state: DispatchState, lookup: LookupOutcome): Promise<ResultBodyRef | undefined> {
  const json = lookup.kind === 'found' && isTerminal(lookup.run.status) ? lookup.run.result?.bodyJson : undefined;
  if (json === undefined || isTerminal(state.execution.nativeStatus) || Buffer.byteLength(json, 'utf8') > MAX_RESULT_BODY_BYTES || !withinDepth(json)) return undefined;
  return storeResultBody(deps, state.dispatchId, state.attempt, RUNTIME_RESULT_SEQ, json);
}
