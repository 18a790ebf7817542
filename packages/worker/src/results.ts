import { createHash } from 'node:crypto';
import { MAX_EVIDENCE_BYTES, MAX_RESULT_BODY_BYTES, MAX_RESULT_BODY_DEPTH, refProblem } from '@dispatch-ledger/protocol';
import type { CallbackOutcome } from './callbacks.js';
import { CallbackError, EvidenceTooLargeError, ResultRefusedError, RunEndedError, UnsafeRefError, clipForMessage, evidenceWith, type FinalStatus, type RunResult } from './model.js';
import { isPlainObject } from './parse.js';

/**
 * What a run may hand the ledger, and how its answers are told: the bounds of evidence and result
 * bodies (CONTRACT §2), a run's resolved value checked as a result, and a callback's outcome as an
 * error — shared by the http worker's engine (runs.ts) and the Lambda handler (lambda.ts).
 */

/** The protocol's bounds (CONTRACT §2): an evidence file, a final event's `result.body`. */
export { MAX_EVIDENCE_BYTES, MAX_RESULT_BODY_BYTES };
/**
 * The deepest `result.body` the ledger takes (the protocol's MAX_RESULT_BODY_DEPTH: its API bodies nest
 * at most 1,000 levels, and a final event holds the body two levels down). Deeper is refused here, as a
 * failed run said why, not sent to be refused and lost.
 */
export { MAX_RESULT_BODY_DEPTH };

/** Whether a value nests deeper than `levels` (the value itself is level 1), found without recursion. */
function nestsDeeperThan(value: unknown, levels: number): boolean {
  const stack: Array<readonly [unknown, number]> = [[value, 1]];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [node, depth] = next;
    if (typeof node !== 'object' || node === null) continue;
    if (depth > levels) return true;
    for (const child of Array.isArray(node) ? node : Object.values(node)) stack.push([child, depth + 1]);
  }
  return false;
}
/**
 * Summaries are previews: the kit's store keeps up to this many characters, the ledger its first
 * RESULT_SUMMARY_PREVIEW_CHARS (200, docs/protocol.md's bounds). Whole text belongs in the body.
 */
export const SUMMARY_CHARS = 2_000;
export const NOTE_CHARS = 1_000;

export function reportState(outcome: CallbackOutcome): 'pending' | 'delivered' | 'refused' {
  if (outcome.kind === 'delivered') return 'delivered';
  if (outcome.kind === 'refused') return 'refused';
  return 'pending';
}

/** What `ctx.progress` and `ctx.putEvidence` need of a run on a runtime that keeps its own record of it. */
export interface ReportingRun {
  /** Throws when the run may no longer report (it ended, or its worker closed). */
  active(): void;
  /** The run's record as it stands: the evidence refs it lists so far, and those its dispatch expects. */
  record(): { readonly evidence: readonly string[]; readonly expectedEvidence: readonly string[] };
  /** Keeps the note, or the refs, on the run's record. */
  persist(patch: { readonly note: string } | { readonly evidence: string[] }): void;
  /** Sends the `progress` event. */
  progressed(): Promise<unknown>;
  upload(ref: string, bytes: string | Uint8Array, contentType: string): Promise<CallbackOutcome>;
  /** The uploads under way, which the runtime waits for before its final event. */
  readonly uploads: Set<Promise<unknown>>;
  hold(work: Promise<unknown>): void;
  /** The error a failed upload throws on this runtime. */
  failed(what: string, outcome: Exclude<CallbackOutcome, { kind: 'delivered' }>): Error;
}

/**
 * `ctx.progress` and `ctx.putEvidence` of the http worker and the Lambda handler. An upload: the file
 * checked (`evidenceContentType`, which throws before anything is sent), sent with its content type,
 * kept in `uploads` (and held) while under way, and its ref recorded in the step it is delivered in —
 * so the final event lists it even when the run did not wait for it.
 */
export function reportingOf(run: ReportingRun): { progress(note: string): Promise<void>; putEvidence(ref: string, bytes: string | Uint8Array, options?: { readonly contentType?: string }): Promise<void> } {
  return {
    progress: async (note) => {
      run.active();
      run.persist({ note: clip(String(note), NOTE_CHARS) });
      await run.progressed();
    },
    putEvidence: async (ref, bytes, options = {}) => {
      run.active();
      const tracked = run.upload(ref, bytes, evidenceContentType(ref, bytes, options)).then((outcome) => {
        const kept = outcome.kind === 'delivered' ? evidenceWith(run.record().evidence, ref, run.record().expectedEvidence) : undefined;
        if (kept) run.persist({ evidence: kept });
        return outcome;
      });
      run.uploads.add(tracked);
      run.hold(tracked);
      const outcome = await tracked.finally(() => run.uploads.delete(tracked));
      if (outcome.kind !== 'delivered') throw run.failed(`uploading ${clipForMessage(ref)}`, outcome);
    },
  };
}

/** `runId`: a stopped callback is a RunEndedError of that run (its worker closed); without one, a CallbackError saying what stopped it (`stopped`). */
export function callbackError(what: string, outcome: Exclude<CallbackOutcome, { kind: 'delivered' }>, runId?: string, stopped = 'the worker closed'): Error {
  switch (outcome.kind) {
    case 'refused':
      return new CallbackError(`${what}: the ledger refused it (HTTP ${outcome.status}${outcome.code ? ` ${clipForMessage(outcome.code)}` : ''})`, {
        kind: 'refused',
        status: outcome.status,
        ...(outcome.code === undefined ? {} : { code: outcome.code }),
      });
    case 'gave_up':
      return new CallbackError(`${what}: no answer from the ledger in the retry budget (last: ${outcome.last})`, { kind: 'gave_up' });
    case 'stopped':
      return runId === undefined ? new CallbackError(`${what}: ${stopped}`, { kind: 'stopped' }) : new RunEndedError(runId, 'worker_closed');
  }
}

/** What the run resolved with, as a result the ledger takes; anything else is a failed run, said why. */
export function resultOf(value: unknown): { readonly ok: true; readonly result: RunResult } | { readonly ok: false; readonly error: ResultRefusedError } {
  const no = (message: string) => ({ ok: false, error: new ResultRefusedError(message) }) as const;
  if (value === undefined || value === null) return { ok: true, result: { summary: 'completed' } };
  if (!isPlainObject(value)) return no('run must resolve with { summary?, body? } or nothing');
  const { summary, body } = value;
  if (summary !== undefined && typeof summary !== 'string') return no('result.summary must be a string');
  const text = clip(summary ?? 'completed', SUMMARY_CHARS);
  if (body === undefined) return { ok: true, result: { summary: text } };
  if (nestsDeeperThan(body, MAX_RESULT_BODY_DEPTH)) return no(`result_too_deep: result.body nests deeper than ${MAX_RESULT_BODY_DEPTH} levels, the most the ledger takes`);
  let json: string | undefined;
  try {
    json = JSON.stringify(body);
  } catch (error) {
    return no(`result.body is not JSON: ${messageOf(error)}`);
  }
  if (json === undefined) return no('result.body is not JSON');
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > MAX_RESULT_BODY_BYTES) return no(`result_too_large: result.body is ${bytes} bytes; the ledger takes at most ${MAX_RESULT_BODY_BYTES}`);
  // Stored and sent as the JSON it will be read back as (no class instances, no undefined members).
  return { ok: true, result: { summary: text, body: JSON.parse(json) as unknown } };
}

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

export function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  return String(error);
}

export function clip(text: string, chars: number): string {
  if (text.length <= chars) return text;
  let cut = text.slice(0, chars - 1);
  if (/[\ud800-\udbff]$/.test(cut)) cut = cut.slice(0, -1);
  return `${cut}…`;
}

/** Drops members set to undefined, so a record's JSON and its object agree (`pendingApproval` cleared is absent). */
export function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, member]) => member !== undefined)) as T;
}

/**
 * An evidence file as `ctx.putEvidence` takes it, checked before anything is sent: a safe ref (CONTRACT
 * §6), a string or bytes, at most MAX_EVIDENCE_BYTES; its content type (given, or text for a string).
 */
export function evidenceContentType(ref: string, bytes: unknown, options: { readonly contentType?: string }): string {
  const problem = refProblem(ref);
  if (problem) throw new UnsafeRefError(ref, problem);
  if (typeof bytes !== 'string' && !(bytes instanceof Uint8Array)) throw new TypeError('evidence bytes must be a string or a Uint8Array');
  const size = typeof bytes === 'string' ? Buffer.byteLength(bytes, 'utf8') : bytes.byteLength;
  if (size > MAX_EVIDENCE_BYTES) throw new EvidenceTooLargeError(ref, size, MAX_EVIDENCE_BYTES);
  if (options.contentType === undefined) return typeof bytes === 'string' ? 'text/plain; charset=utf-8' : 'application/octet-stream';
  const contentType = String(options.contentType).trim();
  if (!CONTENT_TYPE.test(contentType)) {
    throw new TypeError(`contentType must be a media type (type/subtype, then any parameters; at most 256 characters, no line break, none beyond Latin-1), got ${JSON.stringify(clip(String(options.contentType), 80))}`);
  }
  return contentType;
}

/**
 * A content-type header a request can carry (what fetch sends as it is): `type/subtype` (RFC 9110 tokens),
 * then any parameters — tabs and Latin-1 included, no control character but the tab — at most 256 characters.
 */
const CONTENT_TYPE = /^(?=[\t\x20-\x7e\x80-\xff]{3,256}$)[!#$%&\x27*+.^_\x60|~0-9A-Za-z-]+\/[!#$%&\x27*+.^_\x60|~0-9A-Za-z-]+(?:[\t ]*;.*)?$/;

/** How a run's code ended, as the engine and the Lambda invocation tell it. */
export type RunEnding = { readonly kind: 'returned'; readonly value: unknown } | { readonly kind: 'threw'; readonly error: unknown } | { readonly kind: 'skipped' };

/**
 * The final status and result a run's ending means: a cancel the ledger asked for wins, a throw is a
 * failure said why, a value is the result if the ledger takes it (else a failure said why). `bound`
 * keeps a summary within SUMMARY_CHARS.
 */
export function verdictOf(cancelRequested: boolean, ending: RunEnding, bound: (text: string) => string): { readonly status: FinalStatus; readonly result: RunResult } {
  if (cancelRequested) return { status: 'cancelled', result: { summary: 'cancelled on request' } };
  if (ending.kind === 'threw') return { status: 'failed', result: { summary: bound(messageOf(ending.error)) } };
  if (ending.kind === 'skipped') return { status: 'cancelled', result: { summary: 'cancelled before it started' } };
  const normalised = resultOf(ending.value);
  return normalised.ok ? { status: 'completed', result: normalised.result } : { status: 'failed', result: { summary: bound(normalised.error.message) } };
}
