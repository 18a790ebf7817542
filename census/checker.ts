import type { DispatchView } from '../shared/dispatch/view.js';
import type { Execution } from '../shared/dispatch/state.js';
import type { CensusObservations, CensusReport, Finding, LimitObservations, LoggedEvent, ObservedDispatch, ObservedRejection } from './observations.js';
import type { DispatchPlan } from './workload.js';

/**
 * The census checker, in the style of Jepsen's total-queue checker: from what was sent (the producer's
 * log of SQS message ids) and what the system holds afterwards (the ledger through its API and table,
 * the target's own counts, the event log, both queues), it judges that every acknowledged send came
 * out exactly once as a dispatch, a duplicate, a blocked dispatch, a rejection or a DLQ entry; that
 * nothing appeared that was never sent; that no attempt ran twice at the target; that no dispatch's
 * events went backwards or claimed a change the ledger never committed; and that every orphan the
 * census made was found in time, and no other. Pure: every input is data.
 */

const FINDINGS_PER_CHECK = 20;
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

/** Run-level detail-types of one attempt, by how far along they say the attempt is. */
const RANK: Readonly<Record<string, number>> = {
  'Dispatch Accepted': 0,
  'Dispatch Submitted': 1,
  'Approval Requested': 2,
  'Run Stalled': 2,
  'Run Unobservable': 2,
  'Approval Wait Expired': 2,
  'Run Completed': 3,
  'Run Failed': 3,
  'Run Cancelled': 3,
  'Run Recovered': 3,
  'Dispatch Handled': 4,
  'Dispatch Orphaned': 4,
};
const RUN_FINAL = new Set(['Run Completed', 'Run Failed', 'Run Cancelled', 'Run Recovered']);
/** Changes each attempt goes through at most once (deduplicated by eventId first). */
const ONCE_PER_ATTEMPT = new Set(['Dispatch Accepted', 'Dispatch Submitted', 'Dispatch Blocked', ...RUN_FINAL, 'Dispatch Handled', 'Dispatch Orphaned']);
const NATIVE_OF: Readonly<Record<string, string>> = { 'Run Completed': 'completed', 'Run Failed': 'failed', 'Run Cancelled': 'cancelled' };

export function checkCensus(observed: CensusObservations): CensusReport {
  const findings: Finding[] = [];
  const counts = new Map<string, number>();
  const find = (check: string, id: string, detail: string): void => {
    counts.set(check, (counts.get(check) ?? 0) + 1);
    if (findings.filter((finding) => finding.check === check).length < FINDINGS_PER_CHECK) findings.push({ check, id, detail });
  };
  const count = (check: string): number => counts.get(check) ?? 0;

  const plans = new Map(observed.workload.dispatches.map((plan) => [plan.dispatchId, plan]));
  const rejectionsByMessage = new Map(observed.rejections.map((rejection) => [rejection.messageId, rejection]));
  const dlq = new Set(observed.dlqMessageIds);
  const sentById = new Map(observed.sent.map((message) => [message.messageId, message]));
  // A redriven message is the message it was copied from: its outcome is the sent one's.
  const copiedFrom = new Map((observed.redriven ?? []).map(({ from, to }) => [to, from]));
  const sentIdOf = (messageId: string): string => {
    let id = messageId;
    for (let hops = 0; copiedFrom.has(id) && hops <= copiedFrom.size; hops += 1) id = copiedFrom.get(id) ?? id;
    return id;
  };
  const copiesOf = new Map<string, string[]>();
  for (const copy of copiedFrom.keys()) {
    const root = sentIdOf(copy);
    copiesOf.set(root, [...(copiesOf.get(root) ?? []), copy]);
  }
  const idsOf = (messageId: string): string[] => [messageId, ...(copiesOf.get(messageId) ?? [])];
  for (const rejection of observed.rejections) {
    const root = sentIdOf(rejection.messageId);
    if (root !== rejection.messageId && !rejectionsByMessage.has(root)) rejectionsByMessage.set(root, rejection);
  }

  // 1. Every send, exactly one outcome.
  const outcome = { dispatch: 0, duplicate: 0, blocked: 0, rejection: 0, dlqOnly: 0, lost: 0 };
  for (const message of observed.sent) {
    const { send } = message;
    const rejection = rejectionsByMessage.get(message.messageId);
    const held = send.dispatchId ? observed.dispatches.get(send.dispatchId) : undefined;
    const anchor = held?.anchorMessageId ? sentIdOf(held.anchorMessageId) : null;
    const inDlq = idsOf(message.messageId).some((id) => dlq.has(id));
    if (rejection) {
      outcome.rejection += 1;
      const expected = send.role === 'rejection' || send.role === 'conflict' ? send.rejection : undefined;
      if (expected !== rejection.reason) find('misrouted', message.messageId, `${send.role} message rejected as ${rejection.reason}${expected ? `, expected ${expected}` : ''}`);
      continue;
    }
    if (held?.view && anchor) {
      if (anchor === message.messageId) {
        if (held.view.phase === 'blocked') outcome.blocked += 1;
        else outcome.dispatch += 1;
        if (send.role === 'rejection' || send.role === 'conflict') find('misrouted', message.messageId, `${send.role} message became dispatch ${send.dispatchId}`);
        continue;
      }
      const taken = sentById.get(anchor);
      if (taken && taken.send.body === send.body) {
        outcome.duplicate += 1;
        continue;
      }
      // Another content under a held id that left no rejection: the conflict was swallowed.
      if (!taken) find('unexpected', send.dispatchId ?? message.messageId, `taken from message ${held.anchorMessageId ?? ''}, which the census never sent`);
      else if (!inDlq) find('misrouted', message.messageId, `other content under ${send.dispatchId ?? ''} left no conflict rejection`);
    }
    if (inDlq) {
      outcome.dlqOnly += 1;
      continue;
    }
    outcome.lost += 1;
    find('lost', message.messageId, `${send.role} ${send.dispatchId ?? '(no id)'}: no dispatch, duplicate, rejection or DLQ entry`);
  }

  // 2. Nothing that was never sent.
  for (const dispatchId of observed.tableDispatchIds) {
    if (!plans.has(dispatchId)) find('unexpected', dispatchId, 'a dispatch in the table the census never sent');
  }
  for (const rejection of observed.rejections) {
    if (!sentById.has(sentIdOf(rejection.messageId))) find('unexpected', rejection.messageId, `a rejection (${rejection.reason}) of a message the census never sent`);
  }
  for (const messageId of observed.dlqMessageIds) {
    if (!sentById.has(sentIdOf(messageId))) find('unexpected', messageId, 'a DLQ message the census never sent');
  }
  for (const { from, to } of observed.redriven ?? []) {
    if (!sentById.has(sentIdOf(from))) find('unexpected', to, `a redriven copy of ${from}, which the census never sent`);
  }

  // 3. At most one run per attempt at the target, and none the ledger does not know of.
  let repeatedSubmissions = 0;
  for (const [key, attempt] of Object.entries(observed.stats.attempts)) {
    repeatedSubmissions += Math.max(0, attempt.submissions - Math.max(attempt.runs, 1));
    if (attempt.runs > 1) find('doubleSubmittedAttempts', key, `${attempt.runs} runs for one attempt (${attempt.submissions} submissions)`);
    const separator = key.lastIndexOf(':');
    const dispatchId = key.slice(0, separator);
    const number = Number(key.slice(separator + 1));
    const view = observed.dispatches.get(dispatchId)?.view;
    if (attempt.runs > 0 && (!view || number > view.attempt)) find('unexpected', key, `a run at the target for attempt ${number}, the ledger's is ${view?.attempt ?? 'none'}`);
  }

  // 4. Events: once per id, in order, each for a change the ledger holds.
  const byId = new Map<string, LoggedEvent>();
  for (const event of observed.events) {
    const eventId = String(event.detail['eventId'] ?? '');
    const seen = byId.get(eventId);
    if (!seen) byId.set(eventId, event);
    else if (seen.detailType !== event.detailType || JSON.stringify(seen.detail) !== JSON.stringify(event.detail)) {
      find('eventsWithoutChange', eventId, `two different events carry eventId ${eventId}: ${seen.detailType} and ${event.detailType}`);
    }
  }
  const events = [...byId.values()];
  const perDispatch = new Map<string, LoggedEvent[]>();
  for (const event of events) {
    if (event.detailType === 'Message Rejected') {
      const messageId = String(event.detail['messageId'] ?? '');
      if (!rejectionsByMessage.has(messageId)) find('eventsWithoutChange', messageId, 'Message Rejected for a message with no rejection record');
      continue;
    }
    if (event.detailType === 'Receipt Recorded') continue;
    const dispatchId = String(event.detail['dispatchId'] ?? '');
    const list = perDispatch.get(dispatchId) ?? [];
    list.push(event);
    perDispatch.set(dispatchId, list);
  }
  for (const [dispatchId, list] of perDispatch) {
    const view = observed.dispatches.get(dispatchId)?.view;
    if (!view) {
      for (const event of list) find('eventsWithoutChange', dispatchId, `${event.detailType} for a dispatch the ledger does not hold`);
      continue;
    }
    checkEventOrder(dispatchId, list, find);
    checkEventsAgainstRecord(dispatchId, list, view, find);
  }

  // 4b. Every committed change that publishes, published.
  for (const missing of missingEvents(observed.dispatches, observed.rejections, events)) find('missingEvents', missing.id, missing.detail);

  // 5. Where each dispatch ended, and the orphans.
  const orphanEvents = new Map(events.filter((event) => event.detailType === 'Dispatch Orphaned').map((event) => [`${String(event.detail['dispatchId'])}:${String(event.detail['attempt'])}`, event]));
  const orphanedAnyAttempt = new Set(events.filter((event) => event.detailType === 'Dispatch Orphaned').map((event) => String(event.detail['dispatchId'])));
  let injected = 0;
  let detected = 0;
  let maxTicks = 0;
  let maxUnfaulted = 0;
  const histogram: Record<string, number> = {};
  for (const plan of observed.workload.dispatches) {
    const view = observed.dispatches.get(plan.dispatchId)?.view;
    if (!view) {
      // Its sends are counted lost or DLQ-only above; one the DLQ holds waits for an operator (alarmed), any other did not get where it must.
      const inDlq = observed.sent.some((message) => message.send.dispatchId === plan.dispatchId && idsOf(message.messageId).some((id) => dlq.has(id)));
      if (!inDlq) find('notFinal', plan.dispatchId, 'the ledger holds no dispatch');
      continue;
    }
    const orphaned = orphanEvents.get(`${plan.dispatchId}:${view.attempt}`);
    if (plan.injectedOrphan) {
      injected += 1;
      if (!orphaned || view.evidence.outcome !== 'orphan_no_delivery') {
        find('missedOrphans', plan.dispatchId, `not found orphaned (outcome ${view.evidence.outcome}, event ${orphaned ? 'published' : 'none'})`);
      } else {
        detected += 1;
        const lag = ticksAfterGrace(view, orphaned, observed);
        maxTicks = Math.max(maxTicks, lag.ticks);
        maxUnfaulted = Math.max(maxUnfaulted, lag.unfaulted);
        histogram[String(lag.ticks)] = (histogram[String(lag.ticks)] ?? 0) + 1;
        if (lag.unfaulted > 1) find('missedOrphans', plan.dispatchId, `found ${lag.unfaulted} unfaulted ticks after its grace window (${lag.ticks} in all)`);
      }
    } else if (orphanedAnyAttempt.has(plan.dispatchId) || view.evidence.outcome === 'orphan_no_delivery') {
      find('falseOrphans', plan.dispatchId, `orphaned though its run uploaded every expected file (behaviour ${plan.behavior ?? 'none'})`);
    }
    const final = finalOf(view);
    if (!final.settled) find('notFinal', plan.dispatchId, `still ${final.describe} (behaviour ${plan.behavior ?? 'none'})`);
    else if (!matches(plan, view)) find('wrongFinal', plan.dispatchId, `ended ${final.describe}, expected ${JSON.stringify(plan.expected)}`);
  }

  // 6. Every poison class, and whether each came out as itself.
  const poison: Record<string, { sent: number; asExpected: number }> = {};
  const tally = (poisonClass: string, asExpected: boolean): void => {
    const entry = (poison[poisonClass] ??= { sent: 0, asExpected: 0 });
    entry.sent += 1;
    if (asExpected) entry.asExpected += 1;
  };
  for (const message of observed.sent) {
    const { send } = message;
    if (send.rejection) tally(send.rejection, rejectionsByMessage.get(message.messageId)?.reason === send.rejection);
    const plan = send.role === 'blocked' && send.dispatchId ? plans.get(send.dispatchId) : undefined;
    if (plan?.expected.kind === 'blocked') {
      const view = observed.dispatches.get(plan.dispatchId)?.view;
      tally(plan.expected.code, view !== null && view !== undefined && matches(plan, view));
    }
  }

  // 7. The limited target: no run opened beyond the limit in force.
  const limitChanges = observed.limited ? checkLimit(observed.limited, observed.dispatches, find) : { changes: 0, runsOpened: 0, maxOpen: 0 };

  // 8. DLQ round trips: dead-lettered, redriven, and back as their dispatch where planned.
  const dlqRoundTrips = { planned: 0, redriven: 0, asExpected: 0 };
  for (const plan of observed.workload.dispatches) {
    if (!plan.dlqRoundTrip) continue;
    dlqRoundTrips.planned += 1;
    const original = observed.sent.find((message) => message.send.dispatchId === plan.dispatchId);
    if (!original || !copiesOf.has(original.messageId)) continue;
    dlqRoundTrips.redriven += 1;
    const held = observed.dispatches.get(plan.dispatchId);
    if (held?.view && held.anchorMessageId && copiesOf.get(original.messageId)?.includes(held.anchorMessageId) && matches(plan, held.view)) dlqRoundTrips.asExpected += 1;
  }

  const sent = observed.sent.length;
  return {
    seed: observed.workload.seed,
    sent,
    dispatches: outcome.dispatch,
    duplicates: outcome.duplicate,
    blocked: outcome.blocked,
    rejections: outcome.rejection,
    dlqOnly: outcome.dlqOnly,
    balanced: sent === outcome.dispatch + outcome.duplicate + outcome.blocked + outcome.rejection + outcome.dlqOnly,
    lost: outcome.lost,
    unexpected: count('unexpected'),
    misrouted: count('misrouted'),
    doubleSubmittedAttempts: count('doubleSubmittedAttempts'),
    repeatedSubmissions,
    statusRegressions: count('statusRegressions'),
    eventsWithoutChange: count('eventsWithoutChange'),
    missingEvents: count('missingEvents'),
    missedOrphans: count('missedOrphans'),
    falseOrphans: count('falseOrphans'),
    notFinal: count('notFinal'),
    wrongFinal: count('wrongFinal'),
    overLimit: count('overLimit'),
    limitChanges,
    dlqRoundTrips,
    orphans: { injected, detected, maxTicksAfterGrace: maxTicks, maxUnfaultedTicksAfterGrace: maxUnfaulted, ticksAfterGrace: histogram },
    events: events.length,
    poison,
    faultsFired: observed.faultsFired,
    findings,
  };
}

type Find = (check: string, id: string, detail: string) => void;

/**
 * Each run the limited target opened, held to the limit in force (CONTRACT §11): open at that moment,
 * by the target's own count, at most the highest limit that could have admitted a slot still held —
 * a limit stands from when it was asked for until the next one is written, and a run may open up to
 * `slackMs` after its slot was taken. A lowered limit never closes runs already open: it only stops
 * new ones until they have drained below it.
 */
function checkLimit(limited: LimitObservations, dispatches: ReadonlyMap<string, ObservedDispatch>, find: Find): { changes: number; runsOpened: number; maxOpen: number } {
  const { changes } = limited;
  const allowedAt = (at: number): number => {
    let allowed = 0;
    changes.forEach((change, index) => {
      const replacedBy = changes[index + 1];
      const from = index === 0 ? Number.NEGATIVE_INFINITY : change.at;
      const until = replacedBy ? replacedBy.done : Number.POSITIVE_INFINITY;
      if (from <= at && until > at - limited.slackMs) allowed = Math.max(allowed, change.limit);
    });
    return allowed;
  };
  let maxOpen = 0;
  for (const run of limited.opened) {
    maxOpen = Math.max(maxOpen, run.open);
    const allowed = allowedAt(run.at);
    if (run.open > allowed) {
      const settled = [...changes].reverse().find((change) => change.done <= run.at);
      const since = settled ? ` (set ${run.at - settled.done} ms before)` : '';
      find('overLimit', run.dispatchId, `${limited.target} opened its run with ${run.open} open; the limit in force was ${allowed}${since}`);
    }
    if (!dispatches.get(run.dispatchId)?.view) find('unexpected', run.dispatchId, `a run at ${limited.target} for a dispatch the ledger does not hold`);
  }
  return { changes: Math.max(0, changes.length - 1), runsOpened: limited.opened.length, maxOpen };
}

/**
 * The events the final record says must have been published, and are not in `events`: for the
 * current attempt its submission, its final run event, its evidence verdict or its block; a
 * Message Rejected for each rejection. (The census deploys with every detail-type published.)
 */
export function missingEvents(
  dispatches: ReadonlyMap<string, ObservedDispatch>,
  rejections: readonly ObservedRejection[],
  events: readonly LoggedEvent[],
): Array<{ readonly id: string; readonly detail: string }> {
  const have = new Set(events.map((event) => `${String(event.detail['dispatchId'] ?? event.detail['messageId'] ?? '')}:${String(event.detail['attempt'] ?? '')}:${event.detailType}`));
  const has = (id: string, attempt: number | '', ...types: string[]): boolean => types.some((type) => have.has(`${id}:${attempt}:${type}`));
  const missing: Array<{ id: string; detail: string }> = [];
  for (const [dispatchId, { view }] of dispatches) {
    if (!view) continue;
    const { attempt, execution, evidence } = view;
    const need = (what: string, ...types: string[]): void => {
      if (!has(dispatchId, attempt, ...types)) missing.push({ id: dispatchId, detail: `no ${what} event for attempt ${attempt}` });
    };
    if (view.phase === 'blocked') need('Dispatch Blocked', 'Dispatch Blocked');
    if (view.runId) need('Dispatch Submitted', 'Dispatch Submitted');
    if (execution.nativeStatus && TERMINAL.has(execution.nativeStatus)) need('final run', ...RUN_FINAL);
    if (evidence.outcome === 'handled') need('Dispatch Handled', 'Dispatch Handled');
    if (evidence.outcome === 'orphan_no_delivery') need('Dispatch Orphaned', 'Dispatch Orphaned');
  }
  const rejected = new Set(events.filter((event) => event.detailType === 'Message Rejected').map((event) => String(event.detail['messageId'] ?? '')));
  for (const rejection of rejections) if (!rejected.has(rejection.messageId)) missing.push({ id: rejection.messageId, detail: `no Message Rejected (${rejection.reason})` });
  return missing;
}

/** Per attempt, in commit order: nothing after a final run event but its evidence verdict; one of each. */
function checkEventOrder(dispatchId: string, list: readonly LoggedEvent[], find: Find): void {
  // One write can publish several events with one `at` (a resubmission that finds the run already
  // completed: Submitted and Completed together); among those, the order the state machine gives.
  const ordered = [...list].sort((a, b) => String(a.detail['at']).localeCompare(String(b.detail['at'])) || (RANK[a.detailType] ?? 0) - (RANK[b.detailType] ?? 0));
  let highestAttempt = 0;
  const perAttempt = new Map<number, { rank: number; final?: string; verdict?: string; submitted: boolean }>();
  const once = new Set<string>();
  for (const event of ordered) {
    const attempt = Number(event.detail['attempt'] ?? 0);
    const rank = RANK[event.detailType];
    // Run Superseded speaks of the attempt it ended; Dispatch Blocked ends an attempt before any run.
    if (event.detailType === 'Run Superseded') continue;
    if (attempt < highestAttempt) find('statusRegressions', dispatchId, `${event.detailType} of attempt ${attempt} after attempt ${highestAttempt} began`);
    highestAttempt = Math.max(highestAttempt, attempt);
    const seen = perAttempt.get(attempt) ?? { rank: -1, submitted: false };
    // A change that happens once per attempt, published under a second id, is a state that left and came back.
    if (ONCE_PER_ATTEMPT.has(event.detailType)) {
      const key = `${attempt}:${event.detailType}`;
      if (once.has(key)) find('statusRegressions', dispatchId, `a second ${event.detailType} for attempt ${attempt}`);
      once.add(key);
    }
    if (event.detailType === 'Dispatch Blocked') {
      if (seen.submitted) find('statusRegressions', dispatchId, `Dispatch Blocked after attempt ${attempt} was submitted`);
      perAttempt.set(attempt, seen);
      continue;
    }
    if (rank === undefined) continue;
    if (seen.rank >= 3 && rank < 3) find('statusRegressions', dispatchId, `${event.detailType} after ${seen.final ?? 'a final event'} (attempt ${attempt})`);
    if (RUN_FINAL.has(event.detailType)) {
      if (seen.final && seen.final !== event.detailType) find('statusRegressions', dispatchId, `${event.detailType} after ${seen.final} (attempt ${attempt})`);
      seen.final ??= event.detailType;
    }
    if (rank === 4) {
      if (seen.verdict && seen.verdict !== event.detailType) find('statusRegressions', dispatchId, `${event.detailType} after ${seen.verdict} (attempt ${attempt})`);
      seen.verdict ??= event.detailType;
    }
    if (rank === 1) seen.submitted = true;
    seen.rank = Math.max(seen.rank, rank);
    perAttempt.set(attempt, seen);
  }
}

/** Each published change must be one the ledger holds: the final word of each run, the verdict of the current attempt. */
function checkEventsAgainstRecord(dispatchId: string, list: readonly LoggedEvent[], view: DispatchView, find: Find): void {
  const runs = new Map(view.runs.map((run) => [run.attempt, run]));
  for (const event of list) {
    const attempt = Number(event.detail['attempt'] ?? 0);
    if (attempt > view.attempt) {
      find('eventsWithoutChange', dispatchId, `${event.detailType} of attempt ${attempt}; the ledger is at attempt ${view.attempt}`);
      continue;
    }
    const run = runs.get(attempt);
    if (RUN_FINAL.has(event.detailType)) {
      const native = String(event.detail['nativeStatus'] ?? '');
      if (!run || run.nativeStatus !== native || (NATIVE_OF[event.detailType] && NATIVE_OF[event.detailType] !== native)) {
        find('eventsWithoutChange', dispatchId, `${event.detailType} (${native}) of attempt ${attempt}; the ledger holds ${run?.nativeStatus ?? 'no run'}`);
      }
    }
    if (attempt === view.attempt) {
      if (event.detailType === 'Dispatch Handled' && view.evidence.outcome !== 'handled') find('eventsWithoutChange', dispatchId, `Dispatch Handled; the ledger says ${view.evidence.outcome}`);
      if (event.detailType === 'Dispatch Orphaned' && view.evidence.outcome !== 'orphan_no_delivery') find('eventsWithoutChange', dispatchId, `Dispatch Orphaned; the ledger says ${view.evidence.outcome}`);
      if (event.detailType === 'Dispatch Blocked' && view.phase !== 'blocked') find('eventsWithoutChange', dispatchId, `Dispatch Blocked; the ledger says ${view.phase}`);
    }
  }
}

function finalOf(view: DispatchView): { settled: boolean; describe: string } {
  const { execution, evidence } = view;
  if (view.phase === 'blocked') return { settled: true, describe: `blocked (${view.blockedReason ?? ''})` };
  if (execution.nativeStatus && TERMINAL.has(execution.nativeStatus)) {
    return { settled: evidence.outcome !== 'pending', describe: `${execution.nativeStatus}, evidence ${evidence.outcome}` };
  }
  if (execution.status === 'unknown' && execution.monitorStatus) return { settled: true, describe: `unknown (${execution.monitorStatus})` };
  return { settled: false, describe: `${view.phase}/${execution.status ?? 'no status'}${execution.monitorStatus ? ` (${execution.monitorStatus})` : ''}` };
}

/** What both a view and a stored state say about where a dispatch stands. */
export type Standing = Pick<DispatchView, 'phase' | 'blockedReason'> & { readonly execution: Omit<Execution, 'nativeStatus'> & { readonly nativeStatus: string | null }; readonly evidence: { readonly outcome: string } };

/** Whether a dispatch stands where its plan says it must end. */
export function matches(plan: DispatchPlan, view: Standing): boolean {
  const { expected } = plan;
  const native = view.execution.nativeStatus;
  switch (expected.kind) {
    case 'blocked':
      return view.phase === 'blocked' && (view.blockedReason ?? '').startsWith(`${expected.code}:`);
    case 'handled':
      return native === 'completed' && view.evidence.outcome === 'handled';
    case 'completed_unverified':
      return native === 'completed' && view.evidence.outcome === 'unverified';
    case 'orphan':
      return native === 'completed' && view.evidence.outcome === 'orphan_no_delivery';
    case 'failed':
      return native === 'failed';
    case 'cancelled':
      return native === 'cancelled';
    case 'unknown':
      return view.execution.status === 'unknown' && expected.monitorStatuses.includes(view.execution.monitorStatus ?? '');
  }
}

/**
 * How many ticks an orphan waited after its grace window: the ticks that began after the window closed
 * and ended before the orphan was found (each one missed it), plus the tick that found it.
 * `unfaulted` counts as misses only the ticks that had the orphan's shard to read (CONTRACT §4: found
 * within one tick after the deadline; §14: a tick takes no work once its budget is spent, the rest is
 * the next tick's, and never works a shard another tick holds). It leaves out a tick during which a
 * fault fired, one that ran past its budget (cut short, it may never have reached the shard: on a busy
 * machine most do) and one that started while another tick was still at work (the census runs a second
 * tick alongside the scheduled one, and a slow tick overlaps the next): it may have found the shard held.
 */
function ticksAfterGrace(view: DispatchView, orphaned: LoggedEvent, observed: CensusObservations): { ticks: number; unfaulted: number } {
  const completedAt = Date.parse(view.execution.completedAt ?? '');
  const deadline = completedAt + observed.deliveryGraceSeconds * 1000;
  const foundAt = Date.parse(String(orphaned.detail['at'] ?? ''));
  const missed = observed.monitorTicks.filter((tick) => tick.start > deadline && tick.end < foundAt);
  const hadTheShard = missed.filter(
    (tick) =>
      tick.end - tick.start <= observed.monitorTickBudgetMs &&
      !observed.monitorTicks.some((other) => other !== tick && other.start <= tick.start && other.end > tick.start) &&
      !observed.faultLog.some((fault) => fault.at >= tick.start && fault.at <= tick.end),
  );
  return { ticks: missed.length + 1, unfaulted: hadTheShard.length + 1 };
}
