import { SendMessageCommand } from '@aws-sdk/client-sqs';
import type * as z from 'zod/mini';
import { clip, MAX_BODY_DEPTH, MAX_MESSAGE_BYTES, MAX_REASON_CHARS, ROUTES, type ResultDelivery, type RouteName } from '@dispatch-ledger/protocol';
import type { AttentionEntry, Claim, DispatchView, HistoryEntry, InboxEntry, Rejection, SettledResult } from '@dispatch-ledger/protocol/answers';
import { DispatchMessageSchema, notBeforeProblem, readDispatchMessage, sqsBody, type DispatchMessageInput } from '@dispatch-ledger/protocol/message';
import { queryValues, type AttentionQuery, type HistoryQuery, type InboxListQuery, type ManualAttestationBody, type OperatorListQuery, type OperatorReceiptBody, type PageQuery } from '@dispatch-ledger/protocol/requests';
import { ROUTE_SCHEMAS, type AnswerOf, type RouteSchemas } from '@dispatch-ledger/protocol/route-schemas';
import { deliver, type ClaimOptions, type DeliverHandler, type DeliverOutcome } from './deliver.js';
import { CALL_TIMEOUT_MS, connectionOf, type CallAs, type Connection, type LedgerClientOptions, type StackDescription } from './connection.js';
import { LedgerConfigError, LedgerValidationError, queueError } from './errors.js';
import { callRoute, dispatchListing, issuesOf, listing, sendRoute, type CallOptions, type DispatchListing, type Listing, type RawAnswer } from './transport.js';

/** What a long poll's timeout adds to its wait: the ledger's own time to answer. */
const LONG_POLL_MARGIN_MS = 10_000;

/**
 * A dispatch message as an origin writes it: `origin` defaults to the client's. `resultDelivery` is
 * typed as the modes there are, so a typo is a compile error: the ledger itself reads any other string
 * as `after_turn` (docs/protocol.md §1, kept for modes a later ledger may add).
 */
export type DispatchRequest = Omit<DispatchMessageInput, 'origin' | 'resultDelivery'> & { readonly origin?: string; readonly resultDelivery?: ResultDelivery };
export interface RawCall extends CallOptions {
  readonly params?: Readonly<Record<string, string>>;
  readonly query?: Readonly<Record<string, string | number | boolean | undefined>>;
  readonly body?: unknown;
  /** Call as the operator (its routes, or any origin's dispatch read); the origin otherwise. */
  readonly as?: CallAs;
}
export interface Endpoints {
  readonly apiUrl: string;
  readonly queueUrl: string | undefined;
  readonly dlqUrl: string | undefined;
  readonly local: boolean;
  readonly stack?: StackDescription;
}

export interface LedgerClient {
  /** Sends a dispatch message to the queue, checked against the protocol first: a message the ledger would refuse never leaves. */
  dispatch(message: DispatchRequest, options?: CallOptions): Promise<{ readonly dispatchId: string; readonly messageId: string }>;
  /** The dispatch view; `refresh` looks the run up at its target first. */
  check(dispatchId: string, options?: CallOptions & { readonly refresh?: boolean }): Promise<DispatchView>;
  readonly history: Listing<Omit<HistoryQuery, 'cursor'>, HistoryEntry>;
  cancel(dispatchId: string, body: { readonly reason: string }, options?: CallOptions): Promise<Record<string, unknown>>;
  redispatch(dispatchId: string, body: { readonly reason: string; readonly force?: boolean }, options?: CallOptions): Promise<Record<string, unknown>>;
  decide(dispatchId: string, body: { readonly approvalId: string; readonly decision: 'approve' | 'cancel' }, options?: CallOptions): Promise<Record<string, unknown>>;
  readonly receipts: {
    /** Records an operator receipt (docs/protocol.md §5): a person's word that the result was accepted or delivered. */
    record(dispatchId: string, body: OperatorReceiptBody, options?: CallOptions): Promise<Record<string, unknown>>;
    /** The dispatch receipts the ledger wrote, paged. */
    readonly list: DispatchListing<Record<string, unknown>>;
    /** The operator receipts people recorded, paged. */
    readonly operator: DispatchListing<Record<string, unknown>>;
  };
  readonly manual: {
    attest(dispatchId: string, body: ManualAttestationBody, options?: CallOptions): Promise<Record<string, unknown>>;
    /** The attestations of a manual dispatch, paged. */
    readonly list: DispatchListing<Record<string, unknown>>;
  };
  /** The runs of every attempt of a dispatch, paged. */
  readonly runs: DispatchListing<Record<string, unknown>>;
  /** Marks one evidence file of the current attempt `invalid`, `superseded` or `rejected` (or `valid` again): the gate follows. */
  markEvidence(dispatchId: string, body: { readonly ref: string; readonly status: 'valid' | 'invalid' | 'superseded' | 'rejected'; readonly reason: string }, options?: CallOptions): Promise<Record<string, unknown>>;
  /** This origin's own refused messages, newest first. */
  readonly rejections: Listing<Omit<PageQuery, 'cursor'>, Rejection>;
  readonly inbox: {
    claim(options?: ClaimOptions): Promise<Claim>;
    ack(resultId: string, claimToken: string, options?: CallOptions): Promise<SettledResult>;
    release(resultId: string, claimToken: string, reason?: string, options?: CallOptions): Promise<SettledResult>;
    renew(resultId: string, claimToken: string, leaseSeconds: number, options?: CallOptions): Promise<SettledResult>;
    body(resultId: string, options?: CallOptions): Promise<unknown>;
    readonly list: Listing<Omit<InboxListQuery, 'cursor'>, InboxEntry>;
    /**
     * The settlement order (docs/protocol.md §10): claim; renew the lease while `handle` runs and until each
     * result is acked; ack each result only after `handle` resolved (an ack that fails on its way is sent
     * again while its lease lasts); if it throws, release every result with the error's message and
     * rethrow; if the lease is lost while it runs, abort `handle`'s signal and ack nothing (the results are
     * claimable again). A result superseded by a redispatch is named in `notAcked` and costs the others nothing.
     */
    deliver(options: ClaimOptions, handle: DeliverHandler): Promise<DeliverOutcome>;
  };
  readonly operator: {
    readonly attention: Listing<Omit<AttentionQuery, 'cursor'>, AttentionEntry>;
    readonly list: Listing<Omit<OperatorListQuery, 'cursor'>, HistoryEntry>;
    counts(options?: CallOptions): Promise<Record<string, unknown>>;
    readonly rejections: Listing<Omit<PageQuery, 'cursor'>, Rejection>;
    releaseSlot(target: string, body: { readonly runId: string; readonly reason: string; readonly dispatchId?: string }, options?: CallOptions): Promise<Record<string, unknown>>;
    /** Any origin's dispatch view, read under the operator's role. */
    check(dispatchId: string, options?: CallOptions): Promise<DispatchView>;
  };
  /**
   * One route of the table by name, answered as it came — `{ status, body, requestId }`, an error status
   * included — for a face that prints answers as the ledger gave them (the CLI, the status page, the MCP
   * server). The request is checked against the route's schema first, as every call's is.
   */
  raw(name: RouteName, parts?: RawCall): Promise<RawAnswer>;
  /** Where this client's calls go: the API, the queues, whether it is the local platform, the stack read. */
  endpoints(): Promise<Endpoints>;
  /** Ends the client: later calls fail. (It holds no connection between calls.) */
  close(): void;
}

function nestsDeeperThan(value: unknown, limit: number): boolean {
  const stack: Array<{ value: unknown; depth: number }> = [{ value, depth: 1 }];
  while (stack.length > 0) {
    const { value: next, depth } = stack.pop() as { value: unknown; depth: number };
    if (typeof next !== 'object' || next === null) continue;
    if (depth > limit) return true;
    for (const child of Object.values(next)) stack.push({ value: child, depth: depth + 1 });
  }
  return false;
}

/**
 * The message as JSON, as SQS takes it (`sqsBody`: U+FFFE and U+FFFF escaped), and what JSON would not
 * carry as given: a number that is not finite (sent as null, another task than the one asked for) or a
 * BigInt (JSON.stringify throws on it), each by its path.
 */
function messageText(message: object): { readonly text: string; readonly unsendable: ReadonlyArray<{ path: string; message: string }> } {
  const unsendable: Array<{ path: string; message: string }> = [];
  const paths = new Map<object, string>();
  const text = JSON.stringify(message, function (this: unknown, key: string, value: unknown) {
    const path = [paths.get(this as object), key].filter((part) => part).join('.');
    if (typeof value === 'object' && value !== null) paths.set(value, path);
    if (typeof value === 'number' && !Number.isFinite(value)) unsendable.push({ path, message: `${value} is not finite: JSON has no form for it` });
    if (typeof value === 'bigint') {
      unsendable.push({ path, message: 'a BigInt: JSON has no form for it (send it as a string)' });
      return null;
    }
    return value;
  });
  return { text: sqsBody(text), unsendable };
}

/** The typed client of docs/protocol.md §15. Nothing is contacted until the first call. */
export function createLedgerClient(options: LedgerClientOptions): LedgerClient {
  const origin = options.origin;
  let connected: Promise<Connection> | undefined;
  let closed = false;
  const connection = (): Promise<Connection> => {
    if (closed) return Promise.reject(new LedgerConfigError('this client was closed'));
    // A connection that failed (the platform not up yet, a throttled DescribeStacks) is tried again on the next call.
    return (connected ??= connectionOf(options).catch((error: unknown) => {
      connected = undefined;
      throw error;
    }));
  };
  const needOrigin = (): string => {
    if (!origin) throw new LedgerConfigError('this call speaks for an origin: create the client with { origin }');
    return origin;
  };
  /** A request the ledger would refuse never leaves: its body and query are checked against the route's schemas. */
  const check = (name: RouteName, parts: { readonly query?: Readonly<Record<string, unknown>> | undefined; readonly body?: unknown }): void => {
    const schemas: RouteSchemas<unknown> = ROUTE_SCHEMAS[name];
    const checks = [
      ['body', schemas.body, parts.body],
      // No query is an empty one (every query field is optional), read as the ledger reads one; no body is checked as none.
      ['query', schemas.query, queryValues(Object.fromEntries(Object.entries(parts.query ?? {}).filter(([, value]) => value !== undefined)))],
    ] as const;
    for (const [part, schema, value] of checks) {
      const read = schema?.().safeParse(value);
      if (read && !read.success) {
        const problems = issuesOf(read.error);
        throw new LedgerValidationError(`the ledger would refuse this ${part}: ${problems.map((problem) => `${problem.path || part}: ${problem.message}`).join('; ')}`, problems);
      }
    }
  };
  /** One route of the table, its answer read with the table's schema. */
  const call = async <N extends RouteName>(name: N, as: CallAs, parts: { params?: Record<string, string>; query?: Record<string, string | number | boolean | undefined>; body?: unknown; signal?: AbortSignal | undefined } = {}): Promise<AnswerOf<N>> => {
    check(name, parts);
    return callRoute(await connection(), origin, ROUTES[name], { ...parts, as, timeoutMs: timeoutOf(name, parts.body), answer: ROUTE_SCHEMAS[name].answer as z.ZodMiniType<AnswerOf<N>> });
  };
  /**
   * A call's timeout; a long poll's (an inbox claim with `waitSeconds`) is never shorter than its wait and
   * a margin: cut short, the claim the ledger made at the end of its wait would be lost to the caller,
   * its results held until the lease ends and a delivery attempt spent.
   */
  const timeoutOf = (name: RouteName, body: unknown): number | undefined => {
    const wait = name === 'inboxClaim' && typeof body === 'object' && body !== null && 'waitSeconds' in body ? body.waitSeconds : undefined;
    return typeof wait === 'number' && wait > 0 ? Math.max(options.timeoutMs ?? CALL_TIMEOUT_MS, wait * 1000 + LONG_POLL_MARGIN_MS) : options.timeoutMs;
  };
  const own = (params: Record<string, string> = {}) => ({ origin: needOrigin(), ...params });
  // Calls that name the client's origin reject (never throw) when it has none.

  const settle = async (name: 'inboxAck' | 'inboxRelease' | 'inboxRenew', resultId: string, body: Record<string, unknown>, signal?: AbortSignal) =>
    call(name, 'origin', { params: own({ resultId }), body, signal });
  /**
   * A paged list of one dispatch (the owner's, or any under the operator's role): a client speaking for no
   * origin reads as the operator, as `check` does (regression: always as the origin, so an operator's
   * client failed before sending).
   */
  const ofDispatch = (name: 'listReceipts' | 'listOperatorReceipts' | 'listManualAttestations' | 'listRuns') =>
    dispatchListing((dispatchId, query, callOptions) => call(name, origin ? 'origin' : 'operator', { params: { dispatchId }, query: { ...query }, signal: callOptions.signal }));

  const client: LedgerClient = {
    async dispatch(message, callOptions = {}) {
      const full = { ...message, origin: message.origin ?? needOrigin() };
      const refuse = (problems: ReadonlyArray<{ path: string; message: string }>): never => {
        throw new LedgerValidationError(`the ledger would refuse this message: ${problems.map((problem) => `${problem.path || 'message'}: ${problem.message}`).join('; ')}`, problems);
      };
      // Before JSON.stringify, which overflows the stack on a deep enough task.
      if (nestsDeeperThan(full, MAX_BODY_DEPTH)) refuse([{ path: 'task', message: `nests deeper than ${MAX_BODY_DEPTH - 1} levels` }]);
      const { text, unsendable } = messageText(full);
      const problems: Array<{ path: string; message: string }> = [...unsendable];
      if (Buffer.byteLength(text, 'utf8') > MAX_MESSAGE_BYTES) problems.push({ path: '', message: `the message is over ${MAX_MESSAGE_BYTES} bytes` });
      const checked = DispatchMessageSchema.safeParse(full);
      if (!checked.success) problems.push(...issuesOf(checked.error));
      if (problems.length > 0) refuse(problems);
      // The text as sent, read as the intake will read it (a "__proto__" key, a lone surrogate…).
      const read = readDispatchMessage(text);
      if (read.kind === 'unreadable') refuse([{ path: '', message: `unreadable (${read.reason})` }]);
      if (read.kind === 'invalid') refuse(read.errors.map((error) => ({ path: error.field === '(message)' ? '' : error.field, message: error.message })));
      // The one rule a reader cannot check without a clock (≤ 30 days ahead), applied as the intake applies it on arrival.
      const tooLate = read.kind === 'valid' && read.message.notBefore !== undefined ? notBeforeProblem(read.message.notBefore, new Date()) : undefined;
      if (tooLate) refuse([{ path: 'notBefore', message: tooLate }]);
      const ready = await connection();
      if (!ready.queueUrl) throw new LedgerConfigError('no dispatch queue: give --queue-url with --api-url ({ queueUrl } with { apiUrl }), or a stack with the output DispatchQueueUrl');
      const sqs = ready.sqs();
      try {
        // The local platform's queue refuses an emoji raw: escaped for it (the same message, more bytes).
        const body = ready.local ? sqsBody(text, { localQueue: true }) : text;
        // Bounded like every call (docs/protocol.md §15; regression: only the caller's signal, so a queue that
        // took the connection and never answered held the caller for ever). Cut short, the send is unsure.
        const timeout = AbortSignal.timeout(options.timeoutMs ?? CALL_TIMEOUT_MS);
        const sent = await sqs.send(new SendMessageCommand({ QueueUrl: ready.queueUrl, MessageBody: body }), { abortSignal: callOptions.signal ? AbortSignal.any([callOptions.signal, timeout]) : timeout });
        return { dispatchId: full.dispatchId, messageId: sent.MessageId ?? '' };
      } catch (error) {
        // A refusal (no such queue, access denied) is the queue's answer; no answer is an unsure send.
        throw queueError(error);
      } finally {
        sqs.destroy();
      }
    },
    check: (dispatchId, callOptions = {}) =>
      // A client speaking for no origin reads as the operator (who may read any dispatch).
      call('getDispatch', origin ? 'origin' : 'operator', { params: { dispatchId }, query: { refresh: callOptions.refresh ? true : undefined }, signal: callOptions.signal }),
    history: listing((query, callOptions) => call('history', 'origin', { params: own(), query: { ...query }, signal: callOptions.signal })),
    cancel: (dispatchId, body, callOptions = {}) => call('cancel', 'origin', { params: { dispatchId }, body, signal: callOptions.signal }),
    redispatch: (dispatchId, body, callOptions = {}) => call('redispatch', 'origin', { params: { dispatchId }, body, signal: callOptions.signal }),
    decide: (dispatchId, body, callOptions = {}) => call('decideApproval', 'origin', { params: { dispatchId }, body, signal: callOptions.signal }),
    receipts: {
      record: (dispatchId, body, callOptions = {}) => call('recordReceipt', 'origin', { params: { dispatchId }, body, signal: callOptions.signal }),
      list: ofDispatch('listReceipts'),
      operator: ofDispatch('listOperatorReceipts'),
    },
    manual: {
      attest: (dispatchId, body, callOptions = {}) => call('attestManual', origin ? 'origin' : 'operator', { params: { dispatchId }, body, signal: callOptions.signal }),
      list: ofDispatch('listManualAttestations'),
    },
    runs: ofDispatch('listRuns'),
    markEvidence: (dispatchId, body, callOptions = {}) => call('evidenceStatus', 'origin', { params: { dispatchId }, body, signal: callOptions.signal }),
    rejections: listing((query, callOptions) => call('originRejections', 'origin', { params: own(), query: { ...query }, signal: callOptions.signal })),
    inbox: {
      claim: async ({ signal, ...body } = {}) => call('inboxClaim', 'origin', { params: own(), body, signal }),
      ack: (resultId, claimToken, callOptions = {}) => settle('inboxAck', resultId, { claimToken }, callOptions.signal),
      // A reason is 1..MAX_REASON_CHARS and not blank (every reason is): a blank one goes as none, a long one clipped.
      release: (resultId, claimToken, reason, callOptions = {}) =>
        settle('inboxRelease', resultId, { claimToken, ...(reason === undefined || reason.trim() === '' ? {} : { reason: clip(reason.trim(), MAX_REASON_CHARS) }) }, callOptions.signal),
      renew: (resultId, claimToken, leaseSeconds, callOptions = {}) => settle('inboxRenew', resultId, { claimToken, leaseSeconds }, callOptions.signal),
      body: async (resultId, callOptions = {}) => call('inboxBody', 'origin', { params: own({ resultId }), signal: callOptions.signal }),
      list: listing((query, callOptions) => call('inboxList', 'origin', { params: own(), query: { ...query }, signal: callOptions.signal })),
      deliver: (deliverOptions, handle) => deliver(client.inbox, deliverOptions, handle),
    },
    operator: {
      attention: listing((query, callOptions) => call('attention', 'operator', { query: { ...query }, signal: callOptions.signal })),
      list: listing((query, callOptions) => call('listDispatches', 'operator', { query: { ...query }, signal: callOptions.signal })),
      counts: (callOptions = {}) => call('counts', 'operator', { signal: callOptions.signal }),
      rejections: listing((query, callOptions) => call('rejections', 'operator', { query: { ...query }, signal: callOptions.signal })),
      releaseSlot: (target, body, callOptions = {}) => call('releaseSlot', 'operator', { params: { target }, body, signal: callOptions.signal }),
      /** The operator reads any dispatch (never acts on one as its origin). */
      check: (dispatchId, callOptions = {}) => call('getDispatch', 'operator', { params: { dispatchId }, signal: callOptions.signal }),
    },
    async raw(name, { as = 'origin', signal, ...parts } = {}) {
      check(name, parts);
      return sendRoute(await connection(), origin, ROUTES[name], { ...parts, as, signal, timeoutMs: timeoutOf(name, parts.body) });
    },
    async endpoints() {
      const { apiUrl, queueUrl, dlqUrl, local, stack } = await connection();
      return { apiUrl, queueUrl, dlqUrl, local, ...(stack ? { stack } : {}) };
    },
    close() {
      closed = true;
    },
  };
  return client;
}
