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
    /** The call may be sent again as it is with no second effect (false: a redispatch, a claim). @default true */
    readonly repeatable = true,
  ) {
    super(message);
  }
  /**
   * Worth trying again as it is: a run not recorded yet, throttling (nothing was done), a server error — the
   * last only for a call safe to repeat (a redispatch or a claim whose 5xx may have taken effect, sent again,
   * starts a second attempt or holds more results: look first).
   */
  get retryable(): boolean {
    return this.code === 'not_yet_recorded' || this.status === 429 || (this.status >= 500 && this.repeatable);
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

/** The queue's refusals of the caller's credentials: mended (new credentials), the same send is taken. */
const CREDENTIAL_REFUSALS = new Set(['ExpiredToken', 'ExpiredTokenException', 'InvalidClientTokenId', 'UnrecognizedClientException', 'SignatureDoesNotMatch', 'IncompleteSignature']);

/**
 * What a failed send to the dispatch queue means for the caller (docs/protocol.md §15):
 * - the queue answered the SDK's first and only try with a 4xx that is no throttle and nothing transient
 *   (no such queue, access denied): the message is certainly not queued and the same send will not help —
 *   a LedgerApiError `queue_refused`, the queue's own error name in `details.queueError`; a refusal of the
 *   caller's credentials (expired, unknown) is a LedgerConfigError: mended, the same send is taken;
 * - anything else — no answer, a throttle, a 5xx, or a 4xx after the SDK had tried more than once (an
 *   earlier try may have queued the message and lost its answer) — a LedgerNetworkError: the message may
 *   be on the queue, and sending it again under the same dispatchId is the safe retry.
 */
export function queueError(error: unknown): LedgerError {
  const unsure = (): LedgerError => new LedgerNetworkError(`sending to the dispatch queue failed: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`, { cause: error });
  if (!(error instanceof Error)) return unsure();
  const credentials = noCredentials(error);
  if (credentials) return credentials;
  const { $metadata, $retryable } = error as Error & { readonly $metadata?: { readonly httpStatusCode?: number; readonly attempts?: number; readonly requestId?: string }; readonly $retryable?: object };
  const status = $metadata?.httpStatusCode;
  const sure = status !== undefined && status >= 400 && status < 500 && ($metadata?.attempts ?? 1) <= 1;
  if (!sure || status === 408 || status === 429 || $retryable !== undefined || /throttl/i.test(error.name)) return unsure();
  if (CREDENTIAL_REFUSALS.has(error.name)) return new LedgerConfigError(`the dispatch queue refused the caller's credentials: ${error.name}: ${error.message}`, { cause: error });
  return new LedgerApiError(status, 'queue_refused', `the dispatch queue refused the message: ${error.name}: ${error.message}`, { queueError: error.name }, $metadata?.requestId);
}
