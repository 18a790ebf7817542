import { clipBytes, printable } from '../text.js';
/** The API's transport-neutral request and response (the handler maps API Gateway events onto them). */
export interface ApiRequest {
  readonly method: string;
  /** The raw path, still percent-encoded: path segments are decoded one by one by the router. */
  readonly rawPath: string;
  readonly query: Readonly<Record<string, string | undefined>>;
  readonly headers: Readonly<Record<string, string | undefined>>;
  readonly body: Buffer | undefined;
  /** The IAM caller from API Gateway's request context (AWS_IAM auth); absent locally. */
  readonly iamUserId: string | undefined;
}

export interface ApiResponse {
  readonly statusCode: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** CONTRACT §2 errors: 400 malformed, 422 semantically invalid, 404 unknown/not yours, 409, 413, 502. */
export type ErrorCode =
  | 'malformed'
  | 'invalid'
  | 'not_found'
  | 'conflict'
  /** 409, retryable: the dispatch has an attempt in flight whose run the ledger has not recorded yet. */
  | 'not_yet_recorded'
  /** 409: the platform's check found this evidence file; the checked bytes stand. */
  | 'evidence_sealed'
  /** 409: the claim token no longer holds the result (its lease was taken over, or it never held it). */
  | 'lease_lost'
  /** 409: the result's attempt was superseded by a redispatch; it will never be delivered. */
  | 'superseded'
  | 'too_large'
  | 'target_unreachable'
  | 'forbidden'
  | 'method_not_allowed'
  /** 500: a stored record failed decoding — reported as what it is, never cast into an answer. */
  | 'audit_failure'
  | 'internal';

const STATUS: Record<ErrorCode, number> = {
  malformed: 400,
  invalid: 422,
  not_found: 404,
  conflict: 409,
  not_yet_recorded: 409,
  evidence_sealed: 409,
  lease_lost: 409,
  superseded: 409,
  too_large: 413,
  target_unreachable: 502,
  forbidden: 403,
  method_not_allowed: 405,
  audit_failure: 500,
  internal: 500,
};

/**
 * The most UTF-8 bytes an API error's message carries. Messages quote what the caller sent (a path, an
 * id, decoded from percent-encoding); a path segment is bounded only by the HTTP header limit, so every
 * message is clipped here, once, whatever the route. JSON escaping at most doubles it: the error body
 * stays under 1 KB.
 */
export const MAX_ERROR_MESSAGE_BYTES = 480;

/** An answer the API gives on purpose. Anything else thrown becomes a 500 without detail. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: unknown,
  ) {
    super(clipBytes(printable(message), MAX_ERROR_MESSAGE_BYTES));
  }

  get statusCode(): number {
    return STATUS[this.code];
  }
}

/** 409: a write lost its race every round (the caller may simply retry). */
export const keptChanging = (): ApiError => new ApiError('conflict', 'the dispatch kept changing; retry');
/** 409: a write met a change made since its read. */
export const changedConcurrently = (): ApiError => new ApiError('conflict', 'the dispatch changed concurrently; retry');

export function json(statusCode: number, body: unknown): ApiResponse {
  return { statusCode, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
}

export function errorResponse(error: ApiError): ApiResponse {
  return json(error.statusCode, { error: { code: error.code, message: error.message, ...(error.details === undefined ? {} : { details: error.details }) } });
}
