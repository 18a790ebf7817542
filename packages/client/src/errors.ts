/**
 * The client's errors (docs/protocol.md §15). Each carries a brand read by the guards, so
 * `isLedgerApiError(error)` holds for an error from another copy of the package too (no `instanceof`).
 */
const BRAND = Symbol.for('@dispatch-ledger/client.error');

type Kind = 'api' | 'network' | 'config' | 'protocol' | 'validation';

abstract class LedgerError extends Error {
  abstract readonly [BRAND]: Kind;
}

/** The ledger answered with an error (CONTRACT §2: `{ error: { code, message, details } }`). */
export class LedgerApiError extends LedgerError {
  override readonly name = 'LedgerApiError';
  readonly [BRAND] = 'api' as const;
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: unknown,
    readonly requestId: string | undefined,
  ) {
    super(message);
  }
  /** Worth trying again as it is: a run not recorded yet, throttling, a server error. */
  get retryable(): boolean {
    return this.code === 'not_yet_recorded' || this.status === 429 || this.status >= 500;
  }
}

/** The ledger could not be reached (or the call was aborted: `cause` says which). */
export class LedgerNetworkError extends LedgerError {
  override readonly name = 'LedgerNetworkError';
  readonly [BRAND] = 'network' as const;
}

/** The client cannot be set up as asked: no local platform running, a bad URL, no stack output. */
export class LedgerConfigError extends LedgerError {
  override readonly name = 'LedgerConfigError';
  readonly [BRAND] = 'config' as const;
}

/** One problem a schema found: the field's dotted path and what is wrong with it. */
export interface Issue {
  readonly path: string;
  readonly message: string;
}

/** An error about a value checked against the protocol's schemas, naming each problem. */
abstract class LedgerSchemaError extends LedgerError {
  constructor(
    message: string,
    readonly issues: readonly Issue[],
  ) {
    super(message);
  }
}

/** An answer without a field the protocol requires (unknown fields and values pass: a newer ledger is fine). */
export class LedgerProtocolError extends LedgerSchemaError {
  override readonly name = 'LedgerProtocolError';
  readonly [BRAND] = 'protocol' as const;
}

/** A message the ledger would refuse: never sent. `issues` names each field. */
export class LedgerValidationError extends LedgerSchemaError {
  override readonly name = 'LedgerValidationError';
  readonly [BRAND] = 'validation' as const;
}

const guard =
  <T>(kind: Kind) =>
  (error: unknown): error is T =>
    typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[BRAND] === kind;

export const isLedgerApiError = guard<LedgerApiError>('api');
export const isLedgerNetworkError = guard<LedgerNetworkError>('network');
export const isLedgerConfigError = guard<LedgerConfigError>('config');
export const isLedgerProtocolError = guard<LedgerProtocolError>('protocol');
export const isLedgerValidationError = guard<LedgerValidationError>('validation');

/**
 * The SDK's credential chain came up empty (`CredentialsProviderError`): the caller's setup, not the
 * ledger's reach — as a LedgerConfigError in the same words wherever it is met (an API call's signing,
 * the queue send, the stack's outputs); undefined for any other error.
 */
export function noCredentials(error: unknown): LedgerConfigError | undefined {
  if (!(error instanceof Error) || error.name !== 'CredentialsProviderError') return undefined;
  return new LedgerConfigError(`no AWS credentials: the default credential chain found none (set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY): ${error.message}`, { cause: error });
}

/**
 * The dispatch queue answered a send with an error that sending it again as it is will not mend (a 4xx
 * other than a throttle: no such queue, access denied, a message it will not take): the message was
 * certainly not queued. A LedgerApiError `queue_refused` with the queue's own error name; undefined for any
 * other error — no answer, a throttle or a 5xx, after which the message may or may not be on the queue.
 */
export function queueRefused(error: unknown): LedgerApiError | undefined {
  if (!(error instanceof Error)) return undefined;
  const { $metadata, $retryable } = error as Error & { readonly $metadata?: { readonly httpStatusCode?: number; readonly requestId?: string }; readonly $retryable?: { readonly throttling?: boolean } };
  const status = $metadata?.httpStatusCode;
  if (status === undefined || status < 400 || status >= 500 || status === 429 || $retryable?.throttling === true || /throttl/i.test(error.name)) return undefined;
  return new LedgerApiError(status, 'queue_refused', `the dispatch queue refused the message: ${error.name}: ${error.message}`, { queueError: error.name }, $metadata?.requestId);
}
