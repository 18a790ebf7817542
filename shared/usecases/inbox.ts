import { ROUTES, routePath } from '@dispatch-ledger/protocol';
import { randomBytes } from 'node:crypto';
import { nativeStatusOf, stateOnly, type DispatchState, type NextState, type ResultRecord } from '../dispatch/state.js';
import { resultClaimed, resultDelivered, resultDropped, resultReleased, resultRenewed, resultWatch } from '../dispatch/transitions/inbox.js';
import { isClaimable, leaseLapsed, parseResultId } from '../dispatch/transitions/core.js';
import type { BlobStore, InboxStore, LedgerStore, StoredState } from '../ledger/port.js';
import { updateDispatch } from '../ledger/repository.js';
import type { OriginSettings, ResultBody } from '../dispatch/records.js';
import { resultBodyKey } from '../ledger/objects.js';
import { evidenceCheckOf } from './evidence-check.js';

/**
 * The results inbox (CONTRACT §10): an origin claims its results under a lease, acknowledges what it
 * took (owner delivery, proven by the origin itself), or releases it. Every change is a named
 * transition of the dispatch's state, written conditionally on the version read: of concurrent
 * claimers exactly one wins, and a result is delivered at most once whichever path claims it.
 */

export interface InboxDeps {
  readonly store: LedgerStore;
  readonly inbox: InboxStore;
  readonly blobs: BlobStore;
  readonly now: () => Date;
  /** Waits between the polls of a long poll (tests pass a fake). */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Partitions of each origin's inbox (as the table's): a long poll reads them all each time. @default 1 */
  readonly inboxShards?: number;
}

export type ClaimMode = 'inject' | 'after_turn';

export interface ClaimRequest {
  readonly mode: ClaimMode;
  readonly max: number;
  readonly leaseSeconds: number;
  readonly waitSeconds: number;
  readonly resultIds?: readonly string[] | undefined;
}

/** What a claim hands out for one result (CONTRACT §10). */
export interface ClaimedResult {
  readonly resultId: string;
  readonly dispatchId: string;
  readonly attempt: number;
  readonly runId: string | null;
  readonly resultDelivery: ClaimMode;
  readonly deliveryAttempts: number;
  readonly execution: { readonly status: string | null; readonly nativeStatus: string | null; readonly completedAt: string | null };
  readonly blockedReason: string | null;
  /** Cancelled by its origin before it was ever submitted (CONTRACT §10: `execution.status: null`, cancelled). */
  readonly cancelled: boolean;
  readonly evidence: { readonly outcome: string; readonly files: ReadonlyArray<{ readonly ref: string; readonly sha256: string; readonly bytes: number }> };
  readonly summary: string | null;
  readonly body?: unknown;
  readonly preview?: string;
  readonly bodyRef?: string;
}

export type ClaimOutcome =
  | { readonly kind: 'claimed'; readonly claimToken: string | null; readonly leaseExpiresAt: string | null; readonly results: readonly ClaimedResult[] }
  /** A group claim where some id is not claimable now (held, delivered, dropped): nothing was claimed. */
  | { readonly kind: 'not_claimable'; readonly resultIds: readonly string[] }
  | { readonly kind: 'not_found'; readonly resultId: string };

export type SettleOutcome =
  | { readonly kind: 'done'; readonly result: ResultRecord }
  | { readonly kind: 'not_found' }
  /** The token does not hold the result (its lease was taken over, or it never held it). */
  | { readonly kind: 'lease_lost'; readonly state: ResultRecord['state'] }
  /** Its attempt was superseded by a redispatch: the result will never be delivered. */
  | { readonly kind: 'superseded' }
  | { readonly kind: 'conflict' };

/**
 * An empty long poll of 20 s reads the inbox at most this many times over all its keys (each read of an
 * empty key is 0.5 read units): 5 units (CONTRACT §10), as long as one pass reads at most 5 keys.
 */
export const LONG_POLL_KEY_READS = 10;
const MIN_POLL_INTERVAL_MS = 1_000;

/**
 * How far apart the passes of a long poll are: a pass reads every key the claim's mode covers
 * (inject: the origin's inject keys; after_turn: inject and after_turn keys, each × shards).
 */
export function pollIntervalMs(request: Pick<ClaimRequest, 'mode' | 'waitSeconds'>, shards: number): number {
  const keys = shards * (request.mode === 'inject' ? 1 : 2);
  const passes = Math.max(2, Math.floor(LONG_POLL_KEY_READS / keys));
  return Math.max(MIN_POLL_INTERVAL_MS, Math.ceil((request.waitSeconds * 1000) / (passes - 1)));
}
/**
 * How many inbox entries one claim looks at. They are all claimable when read (the index range holds no
 * held lease): what it passes over is only what changed since (taken by another claimer, delivered).
 */
const MAX_SCANNED = 200;

const newToken = (): string => randomBytes(16).toString('base64url');
const defaultSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

const ttlSeconds = (settings: OriginSettings): number => settings.resultTtlHours * 3600;
const expired = (result: ResultRecord, settings: OriginSettings, now: Date): boolean => Date.parse(result.readyAt) + ttlSeconds(settings) * 1000 <= now.getTime();

/** May a claim in `mode` take this dispatch's result: inject claims take inject results only. */
const modeTakes = (mode: ClaimMode, state: DispatchState): boolean => mode === 'after_turn' || state.resultDelivery === 'inject';

/**
 * What to write, if anything, before a claim may take the result: an expired one is dropped, a lapsed
 * lease at the attempt cap is dropped; `take` is the claim itself.
 */
function claimStep(state: DispatchState, settings: OriginSettings, claim: { claimToken: string; leaseSeconds: number }, now: Date): { readonly kind: 'take' | 'drop'; readonly next: NextState } | undefined {
  const result = state.result;
  if (!isClaimable(result, now)) return undefined;
  if (expired(result, settings, now)) return { kind: 'drop', next: resultDropped(state, 'expired', now) };
  if (leaseLapsed(result, now) && result.deliveryAttempts + 1 >= settings.maxDeliveryAttempts) {
    return { kind: 'drop', next: resultDropped({ ...state, result: { ...result, deliveryAttempts: result.deliveryAttempts + 1 } }, 'attempts', now) };
  }
  return { kind: 'take', next: resultClaimed(state, claim, now) };
}

/** Claims one dispatch's result, re-reading on a lost race; undefined when it is not (or no longer) claimable. */
/** The origin's settings, read once and only when a claim meets a result (an empty poll reads none). */
type SettingsOf = () => Promise<OriginSettings>;
function settingsOnce(deps: Pick<InboxDeps, 'store'>, origin: string): SettingsOf {
  let read: Promise<OriginSettings> | undefined;
  return () => (read ??= deps.store.getOriginSettings(origin));
}

async function claimOne(deps: InboxDeps, origin: string, dispatchId: string, request: ClaimRequest, claim: { claimToken: string; leaseSeconds: number }, settingsOf: SettingsOf): Promise<DispatchState | undefined> {
  const updated = await updateDispatch(deps.store, dispatchId, async (state) => {
    if (!state || state.origin !== origin || !modeTakes(request.mode, state) || !isClaimable(state.result, deps.now())) return { answer: false };
    const step = claimStep(state, await settingsOf(), claim, deps.now());
    // A drop is written, but takes nothing.
    return step ? { write: step.next, answer: step.kind === 'take' } : { answer: false };
  });
  return updated.kind === 'written' && updated.answer ? updated.state : undefined;
}

/** One pass over the origin's inbox, oldest first, until `max` results are claimed. */
async function claimPass(deps: InboxDeps, origin: string, request: ClaimRequest, claim: { claimToken: string; leaseSeconds: number }, settings: SettingsOf): Promise<DispatchState[]> {
  const taken: DispatchState[] = [];
  let scanned = 0;
  // Only what is claimable now: pending results, then lapsed leases (held ones are not read at all).
  for await (const { dispatchId } of deps.inbox.inboxEntries(origin, { range: 'claimable', now: deps.now(), injectOnly: request.mode === 'inject', pageSize: Math.min(50, request.max * 2) })) {
    if (taken.length >= request.max || scanned >= MAX_SCANNED) break;
    scanned += 1;
    const state = await claimOne(deps, origin, dispatchId, request, claim, settings);
    if (state) taken.push(state);
  }
  return taken;
}

/** A group claim: exactly these results, all or none, in one transaction. */
async function claimGroup(deps: InboxDeps, origin: string, request: ClaimRequest, resultIds: readonly string[], claim: { claimToken: string; leaseSeconds: number }, settingsOf: SettingsOf): Promise<ClaimOutcome | DispatchState[]> {
  const now = deps.now();
  const writes: Array<{ from: StoredState; next: NextState }> = [];
  const blocked: string[] = [];
  for (const resultId of resultIds) {
    const named = parseResultId(resultId);
    const stored = named ? await deps.store.getStored(named.dispatchId) : undefined;
    const state = stored?.state;
    if (!stored || !state || state.origin !== origin) return { kind: 'not_found', resultId };
    if (state.result?.id !== resultId) {
      const past = await pastResult(deps, state, resultId);
      if (!past) return { kind: 'not_found', resultId };
      blocked.push(resultId);
      continue;
    }
    const step = modeTakes(request.mode, state) ? claimStep(state, await settingsOf(), claim, now) : undefined;
    if (step?.kind !== 'take') blocked.push(resultId);
    else writes.push({ from: stored, next: step.next });
  }
  if (blocked.length > 0) return { kind: 'not_claimable', resultIds: blocked };
  const written = await deps.inbox.commitAll(writes);
  if (written.kind === 'conflict') return { kind: 'not_claimable', resultIds };
  return writes.map((write) => stateOnly(write.next));
}

/**
 * `POST /origins/{origin}/inbox/claim`. With `waitSeconds`, polls until something is claimed or the
 * time is up — a poll every 2.5 s per inbox shard, so an empty 20-second poll stays within 5 read units.
 */
export async function claimResults(deps: InboxDeps, origin: string, request: ClaimRequest): Promise<ClaimOutcome> {
  const claim = { claimToken: newToken(), leaseSeconds: request.leaseSeconds };
  const settings = settingsOnce(deps, origin);
  let taken: DispatchState[];
  if (request.resultIds && request.resultIds.length > 0) {
    const group = await claimGroup(deps, origin, request, [...new Set(request.resultIds)], claim, settings);
    if (!Array.isArray(group)) return group;
    taken = group;
  } else {
    const deadline = deps.now().getTime() + request.waitSeconds * 1000;
    const interval = pollIntervalMs(request, deps.inboxShards ?? 1);
    for (;;) {
      taken = await claimPass(deps, origin, request, claim, settings);
      const left = deadline - deps.now().getTime();
      if (taken.length > 0 || left <= 0) break;
      await (deps.sleep ?? defaultSleep)(Math.min(interval, left));
    }
  }
  if (taken.length === 0) return { kind: 'claimed', claimToken: null, leaseExpiresAt: null, results: [] };
  const results = await Promise.all(taken.sort((a, b) => (a.result?.readyAt ?? '').localeCompare(b.result?.readyAt ?? '')).map((state) => describeResult(deps, state)));
  // Each result's lease began at its own write: the claim reports the earliest end.
  const leaseExpiresAt = taken.map((state) => state.result?.leaseUntil ?? '').filter(Boolean).sort()[0] ?? null;
  return { kind: 'claimed', claimToken: claim.claimToken, leaseExpiresAt, results };
}

/** The result as a claim (or the list) shows it: the three claims' facts, the evidence files, the body or its preview. */
export async function describeResult(deps: Pick<InboxDeps, 'store'>, state: DispatchState, result: ResultRecord | null | undefined = state.result): Promise<ClaimedResult> {
  if (!result) throw new Error(`${state.dispatchId} has no result`);
  const current = result.attempt === state.attempt;
  const [check, body] = await Promise.all([
    current && state.phase === 'submitted' ? evidenceCheckOf(deps.store, state) : Promise.resolve(undefined),
    current && state.execution.result?.body ? deps.store.getResultBody(state.dispatchId, state.attempt, state.execution.result.body.seq, state.execution.result.body.digest) : Promise.resolve(undefined),
  ]);
  return {
    resultId: result.id,
    dispatchId: state.dispatchId,
    attempt: result.attempt,
    runId: current ? state.runId : null,
    resultDelivery: state.resultDelivery ?? 'after_turn',
    deliveryAttempts: result.deliveryAttempts,
    execution: current ? { status: state.execution.status, nativeStatus: nativeStatusOf(state.execution), completedAt: state.execution.completedAt } : { status: null, nativeStatus: null, completedAt: null },
    blockedReason: current ? state.blockedReason : null,
    cancelled: current && state.phase === 'cancelled',
    evidence: { outcome: current && state.phase === 'submitted' ? state.evidence.outcome : 'unverified', files: (check?.files ?? []).map(({ ref, sha256, bytes }) => ({ ref, sha256, bytes })) },
    summary: current ? (state.execution.result?.summary ?? null) : null,
    ...bodyFields(body, state.origin, result.id),
  };
}

function bodyFields(body: ResultBody | undefined, origin: string, resultId: string): Pick<ClaimedResult, 'body' | 'preview' | 'bodyRef'> {
  if (!body) return {};
  if (body.json !== null) return { body: JSON.parse(body.json) as unknown };
  return { preview: body.preview ?? '', bodyRef: routePath(ROUTES.inboxBody, { origin, resultId }) };
}

/** The result `resultId` names among the dispatch's ended attempts (a redispatch archived it), if any. */
async function pastResult(deps: Pick<InboxDeps, 'store'>, state: DispatchState, resultId: string): Promise<ResultRecord | undefined> {
  if (!state.redispatch) return undefined;
  const pasts = await deps.store.listPastAttempts(state.dispatchId);
  return pasts.map((past) => past.result).find((result): result is ResultRecord => result?.id === resultId);
}

/** The dispatch and the result `resultId` names, for this origin; undefined: 404. */
async function findResult(deps: Pick<InboxDeps, 'store'>, origin: string, resultId: string): Promise<{ state: DispatchState; result: ResultRecord; current: boolean } | undefined> {
  const named = parseResultId(resultId);
  const state = named ? await deps.store.getState(named.dispatchId) : undefined;
  return state ? resultOf(deps, state, origin, resultId) : undefined;
}

/** The result `resultId` names on this state (current, or among its ended attempts), for this origin. */
async function resultOf(deps: Pick<InboxDeps, 'store'>, state: DispatchState, origin: string, resultId: string): Promise<{ state: DispatchState; result: ResultRecord; current: boolean } | undefined> {
  if (state.origin !== origin) return undefined;
  if (state.result?.id === resultId) return { state, result: state.result, current: true };
  const past = await pastResult(deps, state, resultId);
  return past ? { state, result: past, current: false } : undefined;
}

/**
 * Ack, release or renew by the token's holder. Acking again with the same token answers the delivery
 * as recorded (idempotent); any other token — or a result whose lease someone else took — `lease_lost`.
 */
async function settle(
  deps: InboxDeps,
  origin: string,
  resultId: string,
  claimToken: string,
  act: (state: DispatchState, now: Date) => NextState | Promise<NextState>,
  idempotent: (result: ResultRecord) => boolean,
  /** A lease that lapsed is lost to this action even before anyone claims again (renew). */
  lapsedIsLost = false,
): Promise<SettleOutcome> {
  const named = parseResultId(resultId);
  if (!named) return { kind: 'not_found' };
  const updated = await updateDispatch<SettleOutcome>(deps.store, named.dispatchId, async (read) => {
    const now = deps.now();
    const found = read && (await resultOf(deps, read, origin, resultId));
    if (!found) return { answer: { kind: 'not_found' } };
    const { state, result, current } = found;
    if (result.state === 'dropped' && result.droppedReason === 'superseded') return { answer: { kind: 'superseded' } };
    if (result.claimToken === claimToken && idempotent(result)) return { answer: { kind: 'done', result } };
    if (!current || result.state !== 'claimed' || result.claimToken !== claimToken || (lapsedIsLost && leaseLapsed(result, now))) return { answer: { kind: 'lease_lost', state: result.state } };
    const next = await act(state, now);
    return { write: next, answer: { kind: 'done', result: next.result ?? result } };
  });
  return updated.kind === 'lost' ? { kind: 'conflict' } : updated.answer;
}

/** `POST …/ack`: delivered — the `owner_delivery` receipt with `basis: origin_ack`, recorded by `by`. */
export function ackResult(deps: InboxDeps, origin: string, resultId: string, claimToken: string, by: string): Promise<SettleOutcome> {
  return settle(deps, origin, resultId, claimToken, (state, now) => resultDelivered(state, by, now), (result) => result.state === 'delivered');
}

/** `POST …/release`: back to pending, one delivery attempt more; at the origin's cap, dropped. */
export function releaseResult(deps: InboxDeps, origin: string, resultId: string, claimToken: string): Promise<SettleOutcome> {
  return settle(deps, origin, resultId, claimToken, async (state, now) => resultReleased(state, (await deps.store.getOriginSettings(origin)).maxDeliveryAttempts, now), () => false);
}

/** `POST …/renew`: the holder's lease extended. */
export function renewResult(deps: InboxDeps, origin: string, resultId: string, claimToken: string, leaseSeconds: number): Promise<SettleOutcome> {
  return settle(deps, origin, resultId, claimToken, (state, now) => resultRenewed(state, leaseSeconds, now), () => false, true);
}

/** `GET …/body`: the whole body (inline or from the blob store); undefined: no such result, or no body. */
export async function resultBodyOf(deps: InboxDeps, origin: string, resultId: string): Promise<{ readonly found: boolean; readonly json?: string }> {
  const found = await findResult(deps, origin, resultId);
  if (!found) return { found: false };
  const ref = found.current ? found.state.execution.result?.body : undefined;
  if (!ref) return { found: true };
  const body = await deps.store.getResultBody(found.state.dispatchId, found.result.attempt, ref.seq, ref.digest);
  if (!body) return { found: true };
  return { found: true, json: body.json ?? (await deps.blobs.getText(body.bodyRef ?? resultBodyKey(found.state.dispatchId, found.result.attempt, ref.seq, ref.digest))) };
}

/**
 * An origin's results still out (pending or claimed), from the inbox index: pending oldest ready first,
 * claimed by when the lease ends; `after` is the position of the last entry of the previous page.
 */
export async function listLiveResults(deps: InboxDeps, origin: string, options: { readonly state: 'pending' | 'claimed'; readonly limit: number; readonly after?: string | undefined }): Promise<{ readonly items: DispatchState[]; readonly after: string | null }> {
  const items: DispatchState[] = [];
  let last: string | null = null;
  let scanned = 0;
  for await (const entry of deps.inbox.inboxEntries(origin, { range: options.state, pageSize: Math.min(50, options.limit * 2), after: options.after })) {
    if (items.length >= options.limit || scanned >= MAX_SCANNED) return { items, after: last };
    scanned += 1;
    last = entry.at;
    const state = await deps.store.getState(entry.dispatchId);
    if (state?.origin === origin && state.result?.state === options.state) items.push(state);
  }
  return { items, after: null };
}

/** The monitor's look at a settled dispatch whose result is still out: dropped on the origin's TTL, or looked at again then. */
export async function resultDue(deps: Pick<InboxDeps, 'store' | 'now'>, state: DispatchState): Promise<NextState> {
  const settings = await deps.store.getOriginSettings(state.origin);
  return resultWatch(state, { ttlSeconds: ttlSeconds(settings), maxDeliveryAttempts: settings.maxDeliveryAttempts }, deps.now());
}
