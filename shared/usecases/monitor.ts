import { adoptLegacyUpload } from './legacy-evidence.js';
import type { NextState } from '../dispatch/state.js';
import { approvalWaitLookedUp, monitorStep, reconcileLookup } from '../dispatch/transitions/run.js';
import { submissionClaimed } from '../dispatch/transitions/lifecycle.js';
import { cancelLookedUp } from '../dispatch/transitions/flow.js';
import { isLive, rescheduled } from '../dispatch/transitions/core.js';
import { resultDue } from './inbox.js';
import { randomUUID } from 'node:crypto';
import { CorruptItemError, type DispatchWorkDeps, type DueEntry, type DueIndex, type LedgerStoreWithWrites, type StoredState } from '../ledger/port.js';
import { writeOnce } from '../ledger/repository.js';
import { admitWaiting, startAttempt, type AttemptOutcome } from './submit-attempt.js';
import { resumeHeldChild } from './lineage.js';
import { keepFoundBody, lookUpRun } from './look-up-run.js';
import { recordCancelAnswer } from './flow.js';
import { clip } from '../text.js';
import { slotTotals } from '../dispatch/slots.js';
import { crashPoint } from '../faults.js';
import { settleEvidence } from './evidence-check.js';
import { MONITOR_TIMEOUT_SECONDS } from './timeout.js';

export { evidenceKey } from './evidence-check.js';

export interface MonitorDeps extends DispatchWorkDeps {
  /** The monitor defers a due dispatch it could not act on (`LedgerWrites.deferDue`). */
  readonly store: LedgerStoreWithWrites;
  /** What is due, shard by shard (the table's `due` index). */
  readonly dueIndex: DueIndex;
  /** Due entries read per page of a shard: a shard's work holds one page in memory at a time. */
  readonly pageSize: number;
  /** How often the monitor runs (its schedule's period): a dispatch it failed on is tried again one period later. @default 60 */
  readonly periodSeconds?: number;
  /** Waiting dispatches one tick admits per limited target, at most. @default 100 */
  readonly admitPerTarget?: number;
  /** Where the last tick of this execution environment stopped (kept from tick to tick by a warm Lambda). @default none: each tick starts where the clock's rotation says */
  readonly shardCursor?: ShardCursor;
}

/**
 * The first due shard a tick cut short by its budget did not finish: the next tick starts there, so
 * what a tick leaves is the next tick's first work (CONTRACT §14) and not, as with the clock's
 * rotation alone, left last again by tick after tick until the rotation comes round. Held in memory
 * by the execution environment; a cold one (or a tick that finished every shard) starts from the clock.
 */
export interface ShardCursor {
  next?: string;
}

/** How long a dispatch whose record fails decoding waits before the monitor tries it again. */
export const FAILED_RETRY_SECONDS = 15 * 60;
/** The schedule's period when the deps do not say (the stack's default: one minute). */
export const DEFAULT_PERIOD_SECONDS = 60;
export { MONITOR_TIMEOUT_SECONDS };
/** Left at the end of a tick's budget for the pages in flight to finish (and the admissions after them). */
export const TICK_MARGIN_SECONDS = 10;
/** Due entries per page in production (a page is what one shard's work holds in memory). */
export const DUE_PAGE_SIZE = 100;
/** Due shards worked on at once, each under its claim. */
export const SHARD_CONCURRENCY = 16;
/** Due dispatches of one page acted on at once: at most SHARD_CONCURRENCY × PAGE_CONCURRENCY in flight. */
export const PAGE_CONCURRENCY = 4;
/** Failures a tick report names; the rest are only counted. */
export const FAILURE_SAMPLE = 10;
/** Targets a tick's log line names (the metrics count every target: each is a registered one, so they are bounded). */
export const LOGGED_TARGETS = 100;

/** What a tick did with one due dispatch: a retry that submitted, failed again, or spent the budget; or nothing. */
export type MonitorAction = 'submitted' | 'retrying' | 'blocked' | 'waiting' | 'observed' | 'rescheduled' | 'skipped' | 'failed';
export type ActionCounts = Readonly<Partial<Record<MonitorAction, number>>>;

/** A limited target as the tick left it (CONTRACT §7 metrics `WaitingDispatches`, `SlotsHeldByUnknownRuns`). */
export interface TargetFlow {
  readonly limit: number;
  readonly held: number;
  readonly unknownHeld: number;
  /** Waiting for a slot (counted up to WAITING_COUNT_CAP). */
  readonly waiting: number;
  /** Admitted by this tick. */
  readonly admitted: number;
}

/**
 * What one tick did, in counts: its size does not grow with what is due (CONTRACT §14), so it can be
 * logged whole however many dispatches the tick acted on.
 */
export interface TickReport {
  /** Due entries acted on (each once; a page the budget cut short leaves the rest due). */
  readonly due: number;
  readonly actions: ActionCounts;
  /** The same, per target (registered targets, so bounded whatever is due; a failure, whose target is unknown, only in `actions`). */
  readonly byTarget: Readonly<Record<string, ActionCounts>>;
  /** The first FAILURE_SAMPLE failures: a dispatch the tick could not act on, or a shard it could not read. */
  readonly failures: ReadonlyArray<{ readonly subject: string; readonly error: string }>;
  /** Due shards: worked on under this tick's claim, found empty, skipped (another tick held them), or left to the next tick (out of budget). */
  readonly shards: { readonly worked: number; readonly idle: number; readonly held: number; readonly left: number };
  /** The budget ended the tick before every shard's last page: what is left stays due for the next tick. */
  readonly outOfBudget: boolean;
  /** Each target with a concurrency limit, after this tick's admissions. */
  readonly targets: Readonly<Record<string, TargetFlow>>;
}

/** Waiting dispatches counted per target per tick, at most (a gauge, not a census). */
export const WAITING_COUNT_CAP = 10_000;

/** How long a tick may work: it takes no page at or after `stopTakingAt`; its shard claims lapse at `claimUntil`. */
export interface TickBudget {
  /** Read on `deps.now()`; absent: no limit (a test's or a bench's tick). */
  readonly stopTakingAt?: Date;
  /** By then the tick is surely over (its invocation's end), so a crashed tick's claims are taken over. @default two periods after each claim */
  readonly claimUntil?: Date;
}

/**
 * The budget of a tick invoked with `remainingMs` left (Lambda's `getRemainingTimeInMillis`): no new
 * page after the earlier of the invocation's end less TICK_MARGIN_SECONDS (for the pages in flight)
 * and the next tick less the same margin — at most a quarter of a short period (a local 1 s tick) — so
 * the next tick finds the shards released; its claims last until the invocation ends, when it can no
 * longer be working.
 */
export function tickBudget(now: Date, remainingMs: number, periodSeconds: number): Required<TickBudget> {
  const marginMs = TICK_MARGIN_SECONDS * 1000;
  const periodMs = periodSeconds * 1000;
  const stopAfterMs = Math.max(0, Math.min(remainingMs - marginMs, periodMs - Math.min(marginMs, periodMs / 4)));
  return { stopTakingAt: new Date(now.getTime() + stopAfterMs), claimUntil: new Date(now.getTime() + remainingMs) };
}

/** Runs `work` on each item, at most `concurrency` at a time. */
async function eachAtMost<T>(items: readonly T[], concurrency: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let index = next++; index < items.length; index = next++) await work(items[index] as T);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}

/** Evidence checks one tick runs at once: each reads files of up to 4 MB (twice that while the SDK assembles one), and a tick works up to SHARD_CONCURRENCY × PAGE_CONCURRENCY dispatches side by side. */
export const EVIDENCE_CHECKS_AT_ONCE = 4;

/** At most `limit` of the functions it runs are under way at once; the rest wait their turn. */
function gate(limit: number): <T>(work: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: Array<() => void> = [];
  return async (work) => {
    if (running >= limit) await new Promise<void>((resolve) => waiting.push(resolve));
    running += 1;
    try {
      return await work();
    } finally {
      running -= 1;
      waiting.shift()?.();
    }
  };
}
const evidenceChecks = gate(EVIDENCE_CHECKS_AT_ONCE);

/** A tick's counts as it goes: bounded whatever the number of due dispatches. */
class TickTally {
  due = 0;
  outOfBudget = false;
  readonly actions: Partial<Record<MonitorAction, number>> = {};
  readonly byTarget: Record<string, Partial<Record<MonitorAction, number>>> = {};
  readonly failures: Array<{ readonly subject: string; readonly error: string }> = [];
  readonly shards = { worked: 0, idle: 0, held: 0, left: 0 };

  count(action: MonitorAction, target: string | null): void {
    this.actions[action] = (this.actions[action] ?? 0) + 1;
    if (target === null) return;
    // Per target, every target: the metrics' Target dimension must name the real one (CONTRACT §7).
    const counts = (this.byTarget[target] ??= {});
    counts[action] = (counts[action] ?? 0) + 1;
  }

  failed(subject: string, error: unknown): void {
    if (this.failures.length < FAILURE_SAMPLE) this.failures.push({ subject, error: clip(error instanceof Error ? `${error.name}: ${error.message}` : String(error), 300) });
  }
}

/**
 * One monitor tick (CONTRACT §4, §14): reads only what is due, shard by shard of the due index in
 * parallel, each shard under a claim of its own (a tick never overlaps another's work on a shard: a
 * shard claimed by a tick still working is skipped), page by page, until the budget says stop — the
 * rest stays due for the next tick. Each due dispatch is re-read by key (the index is eventually
 * consistent) and acted on: submission retries, stall watches, approval clocks and evidence checks.
 * Every decision and claim is taken with the clock at the time of its write (a tick may run for a
 * while), never the tick's start. Then flow control admits what freed slots allow.
 */
export async function monitorTick(deps: MonitorDeps, budget: TickBudget = {}): Promise<TickReport> {
  const tickStart = deps.now();
  const tally = new TickTally();
  const tick = { deps, budget, tickStart, tally, holder: randomUUID() };
  // Each tick starts where the last one in this environment stopped short, else with another shard by
  // the clock: when the budget cuts ticks short, no shard is always last.
  const shards = deps.dueIndex.dueShards;
  const resume = deps.shardCursor?.next === undefined ? -1 : shards.indexOf(deps.shardCursor.next);
  const first = resume >= 0 ? resume : Math.floor(tickStart.getTime() / ((deps.periodSeconds ?? DEFAULT_PERIOD_SECONDS) * 1000)) % Math.max(1, shards.length);
  const order = [...shards.slice(first), ...shards.slice(0, first)];
  const unfinished = new Set<string>();
  await eachAtMost(order, SHARD_CONCURRENCY, async (shard) => {
    if (!(await workShard(tick, shard))) unfinished.add(shard);
  });
  if (deps.shardCursor) {
    const next = order.find((shard) => unfinished.has(shard));
    if (next === undefined) delete deps.shardCursor.next;
    else deps.shardCursor.next = next;
  }
  const targets = await admitForLimitedTargets(deps, budget.stopTakingAt, (subject, error) => tally.failed(subject, error));
  const { due, actions, byTarget, failures, shards: shardCounts, outOfBudget } = tally;
  return { due, actions, byTarget, failures, shards: shardCounts, outOfBudget, targets };
}

interface Tick {
  readonly deps: MonitorDeps;
  readonly budget: TickBudget;
  readonly tickStart: Date;
  readonly tally: TickTally;
  /** This tick's name on the shards it claims. */
  readonly holder: string;
}

const spent = ({ deps, budget }: Tick): boolean => budget.stopTakingAt !== undefined && deps.now().getTime() >= budget.stopTakingAt.getTime();

/**
 * One due shard: its first page read, and only if something is due, the shard claimed (an idle shard
 * costs one query, no write); then its pages acted on one after the other, the next read only when the
 * last is done and the budget allows; the claim released at the end, whatever happened. False when
 * the budget left some of it (or all of it) to the next tick.
 */
async function workShard(tick: Tick, shard: string): Promise<boolean> {
  const { deps, tally } = tick;
  if (spent(tick)) {
    tally.shards.left += 1;
    tally.outOfBudget = true;
    return false;
  }
  let finished = true;
  // Every page up to the tick's start: what the tick moves is out of the range, and a page never returns what an earlier one did.
  const pages = deps.dueIndex.duePages(shard, tick.tickStart, deps.pageSize);
  try {
    let page = await pages.next();
    if (page.done || page.value.length === 0) {
      tally.shards.idle += 1;
      return finished;
    }
    const now = deps.now();
    const claimUntil = tick.budget.claimUntil ?? new Date(now.getTime() + 2 * (deps.periodSeconds ?? DEFAULT_PERIOD_SECONDS) * 1000);
    if (!(await deps.dueIndex.claimDueShard(shard, tick.holder, now, claimUntil))) {
      // Another tick is at work on it.
      tally.shards.held += 1;
      return finished;
    }
    tally.shards.worked += 1;
    try {
      while (!page.done) {
        // A page in flight starts no dispatch once the budget is spent either: a slow page must not run
        // the invocation into its timeout. What it leaves stays due.
        await eachAtMost(page.value, PAGE_CONCURRENCY, async (entry) => {
          if (spent(tick)) {
            tally.outOfBudget = true;
            finished = false;
            return;
          }
          tally.due += 1;
          await actOnEntry(tick, entry);
        });
        if (spent(tick)) {
          tally.outOfBudget = true;
          // The rest of this shard may be due: the next tick starts here.
          finished = false;
          break;
        }
        page = await pages.next();
      }
    } finally {
      // A release that fails leaves a lease that lapses by itself.
      await deps.dueIndex.releaseDueShard(shard, tick.holder).catch(() => undefined);
    }
  } catch (error) {
    // One shard that cannot be read must not cost the others their tick.
    tally.failed(shard, error);
  } finally {
    await pages.return(undefined);
  }
  return finished;
}

async function actOnEntry({ deps, tickStart, tally }: Tick, entry: DueEntry): Promise<void> {
  // One dispatch that throws must not cost the others their tick: it is tried again shortly.
  try {
    const { action, target } = await actOn(deps, entry.dispatchId);
    tally.count(action, target);
  } catch (error) {
    tally.count('failed', null);
    tally.failed(entry.dispatchId, error);
    // Out of the way, so a record that always throws cannot hold the head of its shard: a record
    // that fails decoding for a while, anything else for about a tick.
    const seconds = error instanceof CorruptItemError ? FAILED_RETRY_SECONDS : (deps.periodSeconds ?? DEFAULT_PERIOD_SECONDS);
    // From the tick's start: one period later is the next tick, however long this one has run.
    await deps.store.deferDue(entry, new Date(tickStart.getTime() + seconds * 1000)).catch(() => undefined);
  }
}

/**
 * Flow control's half of the tick (CONTRACT §11): every target with a limit admits what its free slots
 * allow (a slot freed by a write that could not admit — a lookup, a crash — is used within one tick),
 * and reports its slots and its queue.
 */
async function admitForLimitedTargets(deps: MonitorDeps, stopAt: Date | undefined, failed: (subject: string, error: unknown) => void): Promise<Record<string, TargetFlow>> {
  const flows: Record<string, TargetFlow> = {};
  // Targets side by side: a slow one must not cost the others their admissions this tick.
  await Promise.all(
    (await deps.store.limitedTargets()).map(async (target) => {
      // The registration last written is the limit in force, even if its writer died before the caps. Its
      // trouble is reported (and tried again next tick), never a reason to skip the admissions.
      await deps.store.alignSlotCaps(target).catch((error: unknown) => failed(`slot caps of ${target}`, error));
      try {
        const admitted = await admitWaiting(deps, target, deps.admitPerTarget ?? 100, stopAt);
        const totals = slotTotals(await deps.store.slotShards(target));
        flows[target] = { limit: totals.limit, held: totals.held, unknownHeld: totals.unknownHeld, waiting: await deps.store.countWaiting(target, WAITING_COUNT_CAP), admitted };
      } catch (error) {
        // One target's trouble is reported and tried again next tick.
        failed(`admissions of ${target}`, error);
      }
    }),
  );
  return flows;
}

async function actOn(deps: MonitorDeps, dispatchId: string): Promise<{ action: MonitorAction; target: string | null }> {
  const stored = await deps.store.getStored(dispatchId);
  const state = stored?.state;
  if (!stored || !state || !state.dueAt || Date.parse(state.dueAt) > deps.now().getTime()) return { action: 'skipped', target: state?.target ?? null };
  // A child held for its parent (CONTRACT §1 V3): the parent looked up again before anything is submitted.
  if (state.phase === 'accepted' && state.waitingFor === 'parent') return { action: actionOf(await resumeHeldChild(deps, stored)), target: state.target };
  if (state.phase === 'accepted') return { action: await retrySubmission(deps, stored), target: state.target };
  if (state.phase === 'submitted' && monitorStep(state, deps.now()).kind === 'cancel') return { action: await askCancel(deps, stored), target: state.target };
  if (state.phase === 'submitted') return { action: await watchRun(deps, stored), target: state.target };
  // A blocked or cancelled dispatch is due only while its result is out: its expiry, on the origin's clock.
  if (isLive(state.result)) return { action: await write(deps, stored, await resultDue(deps, state)), target: state.target };
  return { action: 'skipped', target: state.target };
}

async function write(deps: MonitorDeps, from: StoredState, next: NextState): Promise<MonitorAction> {
  if ((await writeOnce(deps.store, from, next)).kind !== 'written') return 'skipped';
  return next.changes.includes('rescheduled') ? 'rescheduled' : 'observed';
}

/**
 * A submitted run came due: reschedule it, expire its approval, or — when no activity was recorded for
 * the stall timeout — look it up at the target before concluding anything. The write is conditioned on
 * the version read, so an overlapping tick acts once (and so publishes once).
 */
async function watchRun(deps: MonitorDeps, stored: StoredState): Promise<MonitorAction> {
  const { state } = stored;
  const step = monitorStep(state, deps.now());
  if (step.kind === 'check') return checkEvidence(deps, stored);
  if (step.kind === 'result') return write(deps, stored, await resultDue(deps, state));
  let next: NextState;
  if (step.kind === 'write') {
    next = step.next;
  } else {
    const lookup = await lookUpRun(deps, state);
    crashPoint('monitor.after_lookup', state.dispatchId);
    const body = await keepFoundBody(deps, state, lookup);
    const now = deps.now();
    next =
      step.kind === 'approval_lookup'
        ? approvalWaitLookedUp(state, lookup, now, body)
        : step.kind === 'cancel_lookup'
          ? cancelLookedUp(state, lookup, now, body)
          : (reconcileLookup(state, lookup, now, true, body) ?? rescheduled(state, now, new Date(now.getTime() + state.timeouts.stallAfterSeconds * 1000)));
  }
  return write(deps, stored, next);
}

/**
 * Claims the dispatch by moving its due time (conditional on its version), then starts its attempt:
 * a retry, a `notBefore` come due, or a claim that lapsed (its slot, if it took one, still held).
 */
async function retrySubmission(deps: MonitorDeps, stored: StoredState): Promise<MonitorAction> {
  const { state } = stored;
  const claimed = await writeOnce(deps.store, stored, submissionClaimed(state, deps.now(), deps.claimSeconds));
  if (claimed.kind !== 'written') return 'skipped';
  return actionOf(await startAttempt(deps, claimed, await deps.store.getAcceptedMessage(state.dispatchId)));
}

/** What an attempt to start a submission came to, as the tick counts it (a child still held for its parent: rescheduled). */
function actionOf(started: AttemptOutcome): MonitorAction {
  if (started.kind === 'conflict') return 'skipped';
  const next = started.state;
  if (next.phase === 'accepted' && next.waitingFor === 'parent') return 'rescheduled';
  return next.phase === 'submitted' ? 'submitted' : next.phase === 'blocked' ? 'blocked' : next.waitingFor ? 'waiting' : 'retrying';
}

/** A cancel its target could not be asked before: asked again (backing off while it stays unreachable). */
async function askCancel(deps: MonitorDeps, stored: StoredState): Promise<MonitorAction> {
  const { state } = stored;
  const registration = await deps.store.getTarget(state.target);
  if (!registration || !state.runId) return 'skipped';
  const answer = await deps.targetFor(registration).cancel(state.runId);
  return (await recordCancelAnswer(deps, stored, answer)) ? 'observed' : 'skipped';
}

/**
 * The monitor's side of the post-condition: settle the evidence of a completed run, or look again
 * when its grace window closes.
 */
async function checkEvidence(deps: MonitorDeps, stored: StoredState): Promise<MonitorAction> {
  const { state } = stored;
  const now = deps.now();
  // The monitor also counts a file uploaded before the upgrade (the API's completion leaves that to it: the grace deadline).
  const next = (await evidenceChecks(() => settleEvidence(deps, state, now, adoptLegacyUpload))) ?? rescheduled(state, now, new Date(state.evidence.deadline ? Date.parse(state.evidence.deadline) : now.getTime()));
  return write(deps, stored, next);
}
