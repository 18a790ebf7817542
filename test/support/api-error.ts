import { ApiError } from '../../shared/api/http.js';

/** The ApiError a call rejects with; anything else (a resolve, another error) fails the test, named. */
export async function apiError(promise: Promise<unknown>): Promise<ApiError> {
  const error = await promise.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  if (!(error instanceof ApiError)) throw new Error(`expected an ApiError, got ${String(error)}`);
  return error;
}
