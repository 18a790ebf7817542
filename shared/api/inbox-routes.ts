import '@dispatch-ledger/protocol/english';
import { AckBody, ClaimBody, ReleaseBody, RenewBody } from '@dispatch-ledger/protocol/requests';
import { ORIGIN } from '../dispatch/ids.js';
import type { DispatchState, ResultState } from '../dispatch/state.js';
import { ackResult, claimResults, describeResult, listLiveResults, releaseResult, renewResult, resultBodyOf, type InboxDeps, type SettleOutcome } from '../usecases/inbox.js';
import { InvalidCursorError } from '../ledger/port.js';
import { callerOrigin, type Caller } from './caller.js';
import { ApiError, json, keptChanging, type ApiRequest, type ApiResponse } from './http.js';
import { parseJson } from './lifecycle-routes.js';

/** The results inbox routes (CONTRACT §10): the use case's outcomes as HTTP answers, for the origin itself only. */


/** The origin in the path, when the caller speaks for it; else 404 (never leak another origin's inbox). */
export function ownInbox(origin: string, caller: Caller): string {
  if (!ORIGIN.test(origin) || callerOrigin(caller) !== origin) throw new ApiError('not_found', `no inbox for origin ${origin}`);
  return origin;
}

export async function postClaim(deps: InboxDeps, origin: string, body: Buffer | undefined): Promise<ApiResponse> {
  const request = parseJson(body, ClaimBody());
  const outcome = await claimResults(deps, origin, {
    mode: request.mode ?? 'after_turn',
    max: request.max ?? 10,
    leaseSeconds: request.leaseSeconds ?? 60,
    waitSeconds: request.waitSeconds ?? 0,
    resultIds: request.resultIds,
  });
  switch (outcome.kind) {
    case 'not_found':
      throw new ApiError('not_found', `no result ${outcome.resultId} in this inbox`);
    case 'not_claimable':
      throw new ApiError('conflict', 'some of these results cannot be claimed now: nothing was claimed', { resultIds: outcome.resultIds });
    case 'claimed':
      return json(200, { claimToken: outcome.claimToken, leaseExpiresAt: outcome.leaseExpiresAt, results: outcome.results });
  }
}

function settled(outcome: SettleOutcome, resultId: string): ApiResponse {
  switch (outcome.kind) {
    case 'done':
      return json(200, { resultId, state: outcome.result.state, deliveryAttempts: outcome.result.deliveryAttempts, leaseExpiresAt: outcome.result.leaseUntil, ...(outcome.result.droppedReason ? { droppedReason: outcome.result.droppedReason } : {}) });
    case 'not_found':
      throw new ApiError('not_found', `no result ${resultId} in this inbox`);
    case 'lease_lost':
      throw new ApiError('lease_lost', 'this claim token does not hold the result (its lease was taken over, or it never held it)', { state: outcome.state });
    case 'superseded':
      throw new ApiError('superseded', "this result's attempt was superseded by a redispatch; it will never be delivered");
    case 'conflict':
      throw keptChanging();
  }
}

export async function postSettle(deps: InboxDeps, origin: string, resultId: string, action: 'ack' | 'release' | 'renew', request: ApiRequest): Promise<ApiResponse> {
  if (action === 'ack') {
    const { claimToken } = parseJson(request.body, AckBody());
    // Who acknowledged: the IAM principal in AWS, the origin itself locally.
    return settled(await ackResult(deps, origin, resultId, claimToken, request.iamUserId ?? `origin:${origin}`), resultId);
  }
  if (action === 'release') {
    const { claimToken } = parseJson(request.body, ReleaseBody());
    return settled(await releaseResult(deps, origin, resultId, claimToken), resultId);
  }
  const { claimToken, leaseSeconds } = parseJson(request.body, RenewBody());
  return settled(await renewResult(deps, origin, resultId, claimToken, leaseSeconds), resultId);
}

export async function getInbox(
  deps: InboxDeps & { readonly feeds: { listResults(origin: string, options: { state: ResultState | undefined; limit: number; cursor?: string | undefined }): Promise<{ items: readonly DispatchState[]; cursor: string | null }> } },
  origin: string,
  { state, limit, cursor }: { readonly state: ResultState | undefined; readonly limit: number; readonly cursor: string | undefined },
): Promise<ApiResponse> {
  const page = state === 'pending' || state === 'claimed' ? await liveResults(deps, origin, state, limit, cursor) : await deps.feeds.listResults(origin, { state, limit, cursor });
  const items = await Promise.all(
    page.items.map(async (dispatch) => ({
      ...(await describeResult(deps, dispatch)),
      state: dispatch.result?.state,
      readyAt: dispatch.result?.readyAt,
      leaseExpiresAt: dispatch.result?.state === 'claimed' ? dispatch.result.leaseUntil : null,
      deliveredAt: dispatch.result?.deliveredAt ?? null,
      droppedReason: dispatch.result?.droppedReason ?? null,
    })),
  );
  return json(200, { items, cursor: page.cursor });
}

/**
 * An inbox index position, as a cursor: only the exact encoding of one this API handed out — a pending
 * entry's by when it became ready, a claimed one's (`~#`) by when its lease ends.
 */
const INBOX_POSITION = {
  pending: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z#[A-Za-z0-9_-]{10}$/,
  claimed: /^~#\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z#[A-Za-z0-9_-]{10}$/,
} as const;
/** A live list's cursor names its state too: a pending list's position means nothing in the claimed list (and would skip entries there). */
const positionCursor = (state: 'pending' | 'claimed', at: string): string => Buffer.from(JSON.stringify({ state, after: at }), 'utf8').toString('base64url');

async function liveResults(deps: InboxDeps, origin: string, state: 'pending' | 'claimed', limit: number, cursor: string | undefined): Promise<{ items: readonly DispatchState[]; cursor: string | null }> {
  let after: string | undefined;
  if (cursor !== undefined) {
    let value: unknown;
    try {
      value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    } catch {
      // refused below
    }
    after = typeof value === 'object' && value !== null && 'after' in value && typeof value.after === 'string' ? value.after : undefined;
    if (!after || !INBOX_POSITION[state].test(after) || positionCursor(state, after) !== cursor) throw new InvalidCursorError();
  }
  const page = await listLiveResults(deps, origin, { state, limit, after });
  return { items: page.items, cursor: page.after ? positionCursor(state, page.after) : null };
}

export async function getBody(deps: InboxDeps, origin: string, resultId: string): Promise<ApiResponse> {
  const body = await resultBodyOf(deps, origin, resultId);
  if (!body.found) throw new ApiError('not_found', `no result ${resultId} in this inbox`);
  if (body.json === undefined) throw new ApiError('not_found', `result ${resultId} has no body`);
  return { statusCode: 200, headers: { 'content-type': 'application/json' }, body: body.json };
}
