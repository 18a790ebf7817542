import { isLedgerNetworkError, type RawAnswer as ApiAnswer } from '@dispatch-ledger/client';
import { shown } from './table.js';

/**
 * How every API command prints its answer, locally and remotely alike: `--json` prints the body as it
 * came; otherwise a 2xx prints the command's lines for people and anything else the API's error
 * (escaped). Exit 0 only for a 2xx.
 */

type Print = (line: string) => void;

/**
 * A call whose outcome is unknown — no answer came, or the API answered 5xx — may have taken effect. When
 * the CLI made up the call's id, this says how to repeat it under that id, so it cannot happen twice.
 */
export class UnsureOutcomeError extends Error {
  override readonly name = 'UnsureOutcomeError';
}

/** The line for an unsure outcome: `what` may have happened; `again` is the flag that repeats it once. */
export const retryOnce = (what: string, again: string): string => `${what}: to retry without doing it twice, run the command again with ${again}`;

/** A 5xx, or no answer at all: the call may have taken effect. */
export const unsure = (answer: ApiAnswer): boolean => answer.status >= 500;

/** What a 403 means to the person who ran the command: the ledger did not take the signer for a caller of that route. */
export const REFUSED =
  'the credentials were refused: the API did not accept the principal that signed this request for this route ' +
  '(check AWS_PROFILE / AWS_ACCESS_KEY_ID, that the principal is registered, and that operator routes are called as an operator)';

/**
 * An API error for people: `409 conflict: the dispatch is already over…`; a body of another shape
 * (a function URL's own 403, a proxy's page) as JSON. A 403 says the credentials were refused.
 */
export function describeFailure(status: number, body: unknown): string {
  const error = typeof body === 'object' && body !== null ? (body as { error?: { code?: unknown; message?: unknown; details?: unknown } }).error : undefined;
  const said =
    typeof error?.message === 'string'
      ? shown`${status} ${typeof error.code === 'string' ? error.code : 'error'}: ${error.message}`
      : shown`${status}: ${JSON.stringify(body) ?? ''}`;
  if (status === 403) return `${said}\n${REFUSED}`;
  return [said, ...runHandle(error?.details)].join('\n');
}

/** A conflict's run handle and the command to check it (a 409 of redispatch or cancel names them in its details). */
function runHandle(details: unknown): string[] {
  if (typeof details !== 'object' || details === null) return [];
  const { runId, attempt, status, check, force } = details as { runId?: unknown; attempt?: unknown; status?: unknown; check?: unknown; force?: unknown };
  const lines: string[] = [];
  if (typeof runId === 'string') lines.push(shown`run ${runId}` + (attempt !== undefined ? shown` (attempt ${String(attempt)}` + (typeof status === 'string' ? shown`, status ${status})` : ')') : ''));
  if (typeof check === 'string') lines.push(shown`check it: ${check}`);
  // A redriven run: looking again finds nothing new, a forced redispatch is the way (CONTRACT §17).
  if (typeof force === 'string') lines.push(shown`run the work again under the ledger: ${force}`);
  return lines;
}

export const succeeded = (answer: ApiAnswer): boolean => answer.status >= 200 && answer.status < 300;

/** Prints `answer` (see above) line by line; answers the exit code. */
export function printAnswer(answer: ApiAnswer, json: boolean, print: Print, human: (body: unknown, status: number) => string): number {
  const ok = succeeded(answer);
  const text = json ? JSON.stringify(answer.body) : ok ? human(answer.body, answer.status) : describeFailure(answer.status, answer.body);
  for (const line of text.split('\n')) print(line);
  return ok ? 0 : 1;
}

/**
 * Makes `call` and prints its answer as `printAnswer` does — and, for a call that is not safe to repeat
 * blindly, says `unsureThen` (what to look at, or the flag that repeats it once) when its outcome is
 * unknown: no answer (a network error: an UnsureOutcomeError) or a 5xx (printed, then said; under
 * `--json` the answer stays the one line on stdout and this goes to stderr). Exit 1 either way.
 * `unsureThen` undefined: the call is safe to repeat as it is, and a failure is only a failure.
 */
export async function printCall(call: () => Promise<ApiAnswer>, unsureThen: string | undefined, json: boolean, print: Print, human: (body: unknown, status: number) => string): Promise<number> {
  let answer: ApiAnswer;
  try {
    answer = await call();
  } catch (error) {
    // Only a network failure is unsure: a config error (no stack, no credentials) came before any call.
    if (unsureThen === undefined || !isLedgerNetworkError(error)) throw error;
    throw new UnsureOutcomeError(`${error instanceof Error ? error.message : String(error)}\n${unsureThen}`, { cause: error });
  }
  if (unsureThen !== undefined && unsure(answer)) {
    printAnswer(answer, json, print, () => '');
    if (json) throw new UnsureOutcomeError(unsureThen);
    print(unsureThen);
    return 1;
  }
  return printAnswer(answer, json, print, human);
}
