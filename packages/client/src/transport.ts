import type * as z from 'zod/mini';
import { ROUTES, routePath, type RouteSpec } from '@dispatch-ledger/protocol';
import { readAnswerText, type AnswerText } from '@dispatch-ledger/protocol/answer-text';
import { CALL_TIMEOUT_MS, type CallAs, type Connection } from './connection.js';
import { LedgerApiError, LedgerNetworkError, LedgerProtocolError, noCredentials } from './errors.js';

export interface CallOptions {
  /** Aborts the call (and a long poll with it). */
  readonly signal?: AbortSignal;
}

export interface Call<T> {
  readonly params?: Readonly<Record<string, string>>;
  readonly query?: Readonly<Record<string, string | number | boolean | undefined>>;
  readonly body?: unknown;
  readonly as: CallAs;
  readonly answer: z.ZodMiniType<T>;
  readonly signal?: AbortSignal | undefined;
  /** @default CALL_TIMEOUT_MS */
  readonly timeoutMs?: number | undefined;
}

/** The first few problems of a value against a schema, each as `path: message`. */
export function issuesOf(error: z.core.$ZodError): Array<{ path: string; message: string }> {
  return error.issues.slice(0, 8).map((issue) => ({ path: issue.path.map(String).join('.'), message: issue.message }));
}

/** What the ledger answered, as it came: its status, its body (JSON, or the text when it is not), its request id. */
export interface RawAnswer {
  readonly status: number;
  readonly body: unknown;
  readonly requestId: string | undefined;
}

/**
 * One call of a route of the protocol's table: the path filled from its template, signed (or given the
 * local origin header), answered as it came. No answer at all is a LedgerNetworkError.
 */
export async function sendRoute(connection: Connection, origin: string | undefined, spec: RouteSpec, call: Omit<Call<unknown>, 'answer'>): Promise<RawAnswer> {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(call.query ?? {})) if (value !== undefined) search.set(name, String(value));
  const url = `${connection.apiUrl}${routePath(spec, call.params ?? {})}${search.size > 0 ? `?${search.toString()}` : ''}`;
  const payload = call.body === undefined ? undefined : JSON.stringify(call.body);
  const auth = connection.authorize(call.as, origin);
  let headers: Record<string, string> = { accept: 'application/json', ...auth.headers, ...(payload === undefined ? {} : { 'content-type': 'application/json' }) };
  let response: Response;
  let read: AnswerText;
  // Every call ends within its timeout, whether or not the caller gave a signal of its own — signing too:
  // finding credentials (SSO, a credential process) may hang (a review: it ran before the timeout began).
  const timeout = AbortSignal.timeout(call.timeoutMs ?? CALL_TIMEOUT_MS);
  const signal = call.signal ? AbortSignal.any([call.signal, timeout]) : timeout;
  try {
    if (auth.signer) headers = await untilAborted(auth.signer({ method: spec.method, url, headers, ...(payload === undefined ? {} : { body: payload }) }), signal);
    response = await fetch(url, { method: spec.method, headers, redirect: 'error', ...(payload === undefined ? {} : { body: payload }), signal });
    read = await readAnswerText(response, { okBytes: MAX_ANSWER_BYTES, errorBytes: ERROR_ANSWER_BYTES });
  } catch (error) {
    const unsigned = noCredentials(error);
    if (unsigned) throw unsigned;
    if (error instanceof Error && error.name === 'TimeoutError') {
      throw new LedgerNetworkError(`${spec.method} ${spec.path}: no answer from the ledger at ${new URL(url).origin} within the call's timeout (${call.timeoutMs ?? CALL_TIMEOUT_MS} ms)`, { cause: error });
    }
    const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
    // A system error's code (ECONNREFUSED), else its message (a DOMException's numeric code says nothing).
    const code = cause instanceof Error ? (cause as NodeJS.ErrnoException).code : undefined;
    const said = typeof code === 'string' ? code : cause instanceof Error ? cause.message : String(cause);
    throw new LedgerNetworkError(`${spec.method} ${spec.path} did not reach the ledger at ${new URL(url).origin}: ${said}`, { cause: error });
  }
  // No answer of the ledger's is this large (a Lambda function answers at most 6 MB): it was not held in memory (regression: read whole, however large).
  if (read.kind === 'too_large') throw new LedgerProtocolError(`${spec.method} ${spec.path} answered ${read.bytes} bytes or more: over the ${MAX_ANSWER_BYTES} the client reads, so not the ledger's answer`, []);
  const { text } = read;
  let body: unknown = text;
  try {
    body = text === '' ? null : (JSON.parse(text) as unknown);
  } catch {
    // Not JSON (a proxy's error page, say): the text as it came.
  }
  // The ledger's own id, else the one a Lambda function URL gives every answer.
  return { status: response.status, body, requestId: response.headers.get('x-request-id') ?? response.headers.get('x-amzn-requestid') ?? undefined };
}

/** `work`, or the signal's reason once it aborts (the work itself is left to end on its own). */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** The LedgerApiError an answer that is not a 2xx stands for (CONTRACT §2: `{ error: { code, message, details } }`). */
export function apiErrorOf(spec: RouteSpec, answer: RawAnswer): LedgerApiError {
  const said = (answer.body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | null | undefined)?.error;
  const repeatable = !NOT_REPEATABLE.has(spec);
  if (typeof said?.code === 'string') return new LedgerApiError(answer.status, said.code, typeof said.message === 'string' ? said.message : `${spec.method} ${spec.path} answered ${answer.status}`, said.details, answer.requestId, repeatable);
  // Not the ledger's envelope (AWS's own 403 or 502, a proxy's page): what it said, clipped, is kept
  // (regression: the error said only "answered 403").
  // A signature's refusal may echo the request it expected: its session token and credential scope are taken out.
  const text = (answer.body === null || answer.body === undefined ? '' : typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body))
    .replace(/(x-amz-security-token[:=]\s*)[^\s"',&]+/gi, '$1…')
    .replace(/(Credential=)[^\s"',&]+/g, '$1…');
  const body = text.length > ENVELOPE_LESS_CHARS ? `${text.slice(0, ENVELOPE_LESS_CHARS)}…` : text;
  return new LedgerApiError(answer.status, `http_${answer.status}`, `${spec.method} ${spec.path} answered ${answer.status}${body ? `: ${body}` : ''}`, body ? { body } : undefined, answer.requestId, repeatable);
}

/** The largest answer read: more than any the ledger gives (a Lambda function's answer is at most 6 MB). */
export const MAX_ANSWER_BYTES = 8 * 1024 * 1024;
/** Of an error answer this much is read (its envelope is small; a proxy's page is kept in part). */
const ERROR_ANSWER_BYTES = 64 * 1024;

/** Of an answer without the ledger's envelope, this much text is kept in the error. */
const ENVELOPE_LESS_CHARS = 500;

/** Calls that may not be sent again as they are after an unknown outcome: a second redispatch starts another attempt, a second claim holds more results. */
const NOT_REPEATABLE: ReadonlySet<RouteSpec> = new Set([ROUTES.redispatch, ROUTES.inboxClaim]);

/**
 * One call of a route, its answer parsed leniently with `answer`; an error answer is a LedgerApiError,
 * no answer a LedgerNetworkError.
 */
export async function callRoute<T>(connection: Connection, origin: string | undefined, spec: RouteSpec, call: Call<T>): Promise<T> {
  const answer = await sendRoute(connection, origin, spec, call);
  if (answer.status < 200 || answer.status > 299) throw apiErrorOf(spec, answer);
  const read = call.answer.safeParse(answer.body);
  if (!read.success) throw new LedgerProtocolError(`${spec.method} ${spec.path} answered without what the protocol requires`, issuesOf(read.error));
  return read.data;
}

/** A page of a list, and the cursor to the next (null: the last). */
export interface Page<T> {
  readonly items: readonly T[];
  readonly cursor: string | null;
}

/** A list: iterate it (`for await`), or read one page (`.page({ cursor })`) to resume later. */
export interface Listing<Q, T> {
  (query?: Q, options?: CallOptions): AsyncIterable<T>;
  page(query?: Q & { readonly cursor?: string | undefined }, options?: CallOptions): Promise<Page<T>>;
}

export function listing<Q, T>(read: (query: (Q & { readonly cursor?: string | undefined }) | undefined, options: CallOptions) => Promise<{ items: readonly T[]; cursor?: string | null | undefined }>): Listing<Q, T> {
  const page = async (query?: Q & { readonly cursor?: string | undefined }, options: CallOptions = {}): Promise<Page<T>> => {
    const answer = await read(query, options);
    return { items: answer.items, cursor: answer.cursor ?? null };
  };
  const iterate = (query?: Q, options: CallOptions = {}): AsyncIterable<T> => ({
    async *[Symbol.asyncIterator]() {
      let cursor: string | undefined;
      do {
        const next = await page({ ...(query as Q), ...(cursor === undefined ? {} : { cursor }) }, options);
        yield* next.items;
        cursor = next.cursor ?? undefined;
      } while (cursor !== undefined);
    },
  });
  return Object.assign(iterate, { page });
}

/** A list of one dispatch: `for await (const item of list(dispatchId))`, or `.page(dispatchId, { cursor })`. */
export interface DispatchListing<T> {
  (dispatchId: string, options?: CallOptions): AsyncIterable<T>;
  page(dispatchId: string, query?: { readonly cursor?: string | undefined }, options?: CallOptions): Promise<Page<T>>;
}

export function dispatchListing<T>(read: (dispatchId: string, query: { readonly cursor?: string | undefined } | undefined, options: CallOptions) => Promise<{ items: readonly T[]; cursor?: string | null | undefined }>): DispatchListing<T> {
  const of = (dispatchId: string) => listing<object, T>((query, options) => read(dispatchId, query, options));
  return Object.assign((dispatchId: string, options: CallOptions = {}) => of(dispatchId)(undefined, options), {
    page: (dispatchId: string, query?: { readonly cursor?: string | undefined }, options: CallOptions = {}) => of(dispatchId).page(query, options),
  });
}
