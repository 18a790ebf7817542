/** A tool the local platform needs is missing: the message is one line saying what to install. */
export class MissingToolError extends Error {
  override readonly name = 'MissingToolError';
  constructor(
    readonly tool: string,
    message: string,
  ) {
    super(message);
  }
}

/** An engine did not come up (or died) — carries the tail of its log for the person reading it. */
export class EngineStartError extends Error {
  override readonly name = 'EngineStartError';
  constructor(
    readonly engine: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The fetched DynamoDB Local package is not the one pinned. */
export class IntegrityError extends Error {
  override readonly name = 'IntegrityError';
  constructor(
    readonly expected: string,
    readonly actual: string,
  ) {
    super(`integrity mismatch: expected ${expected}, got ${actual}`);
  }
}
