import type { ApprovalTokens } from './approval-tokens.js';
import type { LookupOutcome, SubmitOutcome, TargetRunView } from '../dispatch/target-answers.js';
import type { SubmitRequest, TargetPort } from '../targets/port.js';
import { clip, printable } from '../text.js';
import { asSdkError, reasonOf, type SdkError } from './submission-body.js';

/**
 * What the adapters of AWS's own orchestrators share (CONTRACT §17: a Step Functions execution, a
 * Lambda durable execution): each speaks its runtime's API, and both map its answers to the ledger's
 * in the same way, here —
 * - an execution adopted after a name conflict only when its input is this very submission;
 * - a refusal retrying cannot cure blocks with its reason, anything else is retried;
 * - an execution's end in the ledger's words, its own status word kept beside it, its output the
 *   result's body and its error the summary, bounded;
 * - a lookup reads the execution, and for a running one its newest history event (its last activity:
 *   an execution sends no heartbeats); a status this version does not know concludes nothing;
 * - a cancel is the execution's own word that it stopped, afterwards;
 * - an approval is answered with the runtime's token kept apart from the dispatch, which never leaves
 *   in a reason, and is erased once used.
 */

/** A summary is a preview of the execution's output or error: bounded like a reported one. */
export const SUMMARY_CHARS = 200;

/** The status word both runtimes give an execution that is under way. */
const RUNNING = 'RUNNING';

const preview = (text: string | undefined): string | undefined => (text === undefined || text === '' ? undefined : clip(printable(text), SUMMARY_CHARS));

function isJson(text: string | undefined): text is string {
  if (text === undefined || text === '') return false;
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** Whether an execution's input is the submission body of this dispatch's attempt. */
function isSubmissionOf(input: string | undefined, request: Pick<SubmitRequest, 'dispatchId' | 'attempt'>): boolean {
  if (input === undefined) return false;
  try {
    const value: unknown = JSON.parse(input);
    if (typeof value !== 'object' || value === null) return false;
    const named = value as { readonly dispatchId?: unknown; readonly attempt?: unknown };
    return named.dispatchId === request.dispatchId && named.attempt === request.attempt;
  } catch {
    return false;
  }
}

/** A running execution, with the time of its newest history event when one was read. */
export const runningRun = (runId: string, lastActivityAt?: string): TargetRunView => ({ runId, status: 'running', ...(lastActivityAt ? { lastActivityAt } : {}) });

/** A succeeded execution: its output's preview the summary, the JSON itself the body (kept within §10's bounds by the ledger). */
export function completedRun(runId: string, nativeStatus: string, output: string | undefined): TargetRunView {
  const summary = preview(output);
  const bodyJson = isJson(output) ? output : undefined;
  return { runId, status: 'completed', nativeStatus, ...(summary || bodyJson ? { result: { ...(summary ? { summary } : {}), ...(bodyJson ? { bodyJson } : {}) } } : {}) };
}

/** A failed execution: its error and cause, as given, the summary (bounded). */
export function failedRun(runId: string, nativeStatus: string, error: string | undefined, cause: string | undefined): TargetRunView {
  const summary = preview([error, cause].filter((part) => part !== undefined && part !== '').join(': '));
  return { runId, status: 'failed', nativeStatus, ...(summary ? { result: { summary } } : {}) };
}

export const cancelledRun = (runId: string, nativeStatus: string): TargetRunView => ({ runId, status: 'cancelled', nativeStatus });

/** A submission the runtime refused: blocked with the reason when retrying cannot cure it (`refusals`), else retried. */
export function refusedSubmission(error: SdkError, refusals: ReadonlySet<string>): SubmitOutcome {
  return refusals.has(error.name) ? { kind: 'rejected', httpStatus: error.$metadata?.httpStatusCode ?? 400, reason: reasonOf(error) } : { kind: 'unavailable', reason: reasonOf(error) };
}

/**
 * The execution a name conflict names, adopted only when its input is this very submission (a retried
 * one): never a second run, never another dispatch's or another attempt's. Open or closed alike: its
 * end, if it has one, is found by the next lookup.
 */
export function adoptedIfOurs(request: SubmitRequest, name: string, execution: { readonly runId: string; readonly input: string | undefined; readonly startedAt: Date | undefined }): SubmitOutcome {
  if (!isSubmissionOf(execution.input, request)) return { kind: 'rejected', httpStatus: 409, reason: `an execution named ${name} exists and is not this dispatch's attempt ${request.attempt}` };
  return { kind: 'accepted', runId: execution.runId, status: 'running', requestId: execution.startedAt?.toISOString() ?? '' };
}

/** How one runtime reads an execution, for `lookUpRun`. */
export interface RuntimeLookup<E> {
  /** The call that reads the execution, as a reason names it. */
  readonly describedBy: string;
  /** Reads the execution; without its data (input, output, error) unless `withData`, where the runtime can. */
  readonly describe: (withData: boolean) => Promise<E>;
  /**
   * The statuses whose output or error `runOf` records: the only executions read again with their data.
   * Empty for a runtime whose read without data is not documented to leave the data out: one read, with it.
   */
  readonly endsWithData: ReadonlySet<string>;
  readonly statusOf: (execution: E) => string | undefined;
  /** The time of the execution's newest history event (one event, read newest first). */
  readonly newestEventAt: () => Promise<Date | undefined>;
  /** The runtime's status map (CONTRACT §17); undefined for a status it does not know. */
  readonly runOf: (execution: E, lastActivityAt?: string) => TargetRunView | undefined;
  /** The runtime's word that the execution does not exist. */
  readonly notFound: (error: SdkError) => boolean;
}

/**
 * A lookup of one execution: the execution, and for a running one its newest history event (its last
 * activity). The execution is read without its data first: a running one, looked up at each stall window,
 * is not read with its input (the submission body); one that ended with an output or an error to record
 * is read again with it. What is mapped is the last read's status with its data: never the first read's
 * status beside the second's data (an execution may have moved between them).
 */
export async function lookUpRun<E>(how: RuntimeLookup<E>): Promise<LookupOutcome> {
  try {
    const metadata = await how.describe(false);
    const ended = how.statusOf(metadata);
    const execution = ended !== undefined && how.endsWithData.has(ended) ? await how.describe(true) : metadata;
    const status = how.statusOf(execution);
    const newest = status === RUNNING ? await how.newestEventAt() : undefined;
    const run = how.runOf(execution, newest?.toISOString());
    // A status this version does not know (a new one, or none): nothing concluded from it.
    return run ? { kind: 'found', run } : { kind: 'unavailable', reason: `${how.describedBy} answered a status the ledger does not know: ${clip(printable(status ?? 'none'), 40)}` };
  } catch (caught) {
    const error = asSdkError(caught);
    if (how.notFound(error)) return { kind: 'not_found' };
    // AccessDenied included: the run may well be going on; the ledger cannot see it (never failed).
    return { kind: 'unavailable', reason: reasonOf(error) };
  }
}

/** How one runtime stops an execution, for `runStopper`. */
export interface RuntimeStop {
  /** The call that stops it, as an answer names it. */
  readonly stoppedBy: string;
  readonly stop: (runId: string) => Promise<unknown>;
  /** The execution's status, read after the stop. */
  readonly statusAfter: (runId: string) => Promise<string | undefined>;
  /** The runtime's word for an execution stopped from outside (ABORTED, STOPPED). */
  readonly stoppedStatus: string;
  readonly notFound: (error: SdkError) => boolean;
}

/**
 * A cancel: cancelled only on the execution's own word that it stopped. One that had ended another way
 * before the stop reached it, or has not ended yet, is recorded by the next lookup, with its output or error.
 */
export const runStopper =
  (how: RuntimeStop): TargetPort['cancel'] =>
  async (runId) => {
    try {
      await how.stop(runId);
      const status = await how.statusAfter(runId);
      if (status === how.stoppedStatus) return { kind: 'cancelled', status: 'cancelled' };
      return { kind: 'requested', how: status === RUNNING ? `${how.stoppedBy} was accepted; the execution has not ended yet` : `the execution had ended (${status ?? 'no status'}) before the stop reached it` };
    } catch (caught) {
      const error = asSdkError(caught);
      if (how.notFound(error)) return { kind: 'not_found' };
      return { kind: 'unavailable', reason: reasonOf(error) };
    }
  };

/** What a runtime target needs beside its runtime's client: the approval tokens, kept apart from the dispatch, and the clock. */
export interface RuntimeTargetDeps {
  /** The tokens approvals wait on, stored apart from the dispatch (never in a view, an event or a log). */
  readonly approvalTokens: Pick<ApprovalTokens, 'tokenOf' | 'used'>;
  readonly now: () => Date;
}

/** How one runtime answers an approval with its token, for `tokenApprovals`. */
export interface RuntimeApprovals {
  /** What waits on approvals, as a reason names it ("a state machine"). */
  readonly waiter: string;
  /** What a reason says instead of the token ("[task token]"). */
  readonly tokenMark: string;
  /** Sends the decision to the runtime with the token. */
  readonly send: (token: string, approvalId: string, decision: 'approve' | 'cancel') => Promise<unknown>;
  /** The runtime's word that the token is no longer one it holds (expired, closed, unknown): a conflict. */
  readonly gone: (error: SdkError) => boolean;
}

/**
 * An approval decided through the ledger: the token the run waits on is read apart from the dispatch
 * (`approvalTokens`), only for this run, sent once, then erased. The token never leaves in a reason.
 */
export const tokenApprovals =
  (deps: RuntimeTargetDeps, how: RuntimeApprovals): TargetPort['decideApproval'] =>
  async (runId, approvalId, decision, dispatchId) => {
    if (dispatchId === undefined) return { kind: 'conflict', reason: `an approval of ${how.waiter} is answered for its dispatch` };
    let held: Awaited<ReturnType<ApprovalTokens['tokenOf']>>;
    try {
      held = await deps.approvalTokens.tokenOf(dispatchId, approvalId);
    } catch (caught) {
      return { kind: 'unavailable', reason: reasonOf(asSdkError(caught)) };
    }
    if (!held || held.runId !== runId) return { kind: 'conflict', reason: `approval ${approvalId} is not one this run waits on` };
    const token = held.taskToken;
    if (token === undefined) return { kind: 'conflict', reason: `approval ${approvalId} was decided already` };
    // An SDK error's text may quote what it was sent: the token never leaves in a reason. Replaced before
    // the reason is bounded: a token longer than the bound, cut, would no longer be found whole.
    const hidden = (error: SdkError): string => reasonOf({ name: error.name.replaceAll(token, how.tokenMark), message: error.message.replaceAll(token, how.tokenMark) });
    try {
      await how.send(token, approvalId, decision);
    } catch (caught) {
      const error = asSdkError(caught);
      return { kind: how.gone(error) ? 'conflict' : 'unavailable', reason: hidden(error) };
    }
    // Used: erased. If that write fails the token stays until its record expires; the decision stands either way.
    await deps.approvalTokens.used(dispatchId, approvalId, deps.now()).catch(() => undefined);
    return { kind: 'decided', approvalId, decision };
  };
