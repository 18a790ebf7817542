import { describe, expect, it } from 'vitest';
import { checkCensus } from '../../census/checker.js';
import { MUST_BE_ZERO, type CensusObservations, type CensusReport, type LoggedEvent, type ObservedDispatch, type SentMessage } from '../../census/observations.js';
import type { DispatchPlan, PlannedSend } from '../../census/workload.js';
import type { DispatchView, RunEntry } from '../../shared/dispatch/view.js';

// The census checker is pure: each test builds what a census observed by hand, starting from one
// clean observation (an original and its duplicate, a rejection, a blocked dispatch), adds one kind of
// defect, and asserts the exact counts it raises, collateral counts included, and the ids it names.

const T0 = Date.parse('2026-03-01T10:00:00.000Z');
/** An ISO instant `seconds` after T0. */
const at = (seconds: number): string => new Date(T0 + seconds * 1000).toISOString();

const GRACE_SECONDS = 2;

/** A complete, valid view of a dispatch that completed at at(3) and proved its one evidence file. */
function dispatchViewFactory(overrides: Partial<DispatchView> = {}): DispatchView {
  const dispatchId = overrides.dispatchId ?? 'd';
  const ref = `out/${dispatchId}-0.md`;
  const base: DispatchView = {
    dispatchId,
    origin: 'census',
    target: 'demo-agent',
    runId: 'r-1',
    attempt: 1,
    phase: 'submitted',
    blockedReason: null,
    submission: { attempts: 1, nextRetryAt: null, lastError: null, waitingFor: null, priority: 5, notBefore: null },
    slot: { held: false, since: null, released: null },
    execution: {
      cancelRequestedAt: null,
      cancel: null,
      status: 'completed',
      nativeStatus: 'completed',
      monitorStatus: null,
      lastActivityAt: at(3),
      completedAt: at(3),
      pendingApproval: null,
      result: { summary: 'done' },
    },
    evidence: {
      expected: [ref],
      found: [ref],
      missing: [],
      invalid: [],
      files: [{ ref, sha256: 'a'.repeat(64), bytes: 12, checkedAt: at(4) }],
      outcome: 'handled',
    },
    artifactAcceptance: { state: 'unverified', receiptId: null, basis: null },
    ownerDelivery: { state: 'unconfirmed', receiptId: null, basis: null },
    originAcks: [],
    result: null,
    receipts: [
      { event: 'dispatch_written', at: at(0), attempt: 1 },
      { event: 'dispatch_submitted', at: at(1), attempt: 1, runId: 'r-1', requestId: 'req-1' },
      { event: 'dispatch_completed', at: at(4), attempt: 1, runId: 'r-1', evidenceCount: 1 },
    ],
    operatorReceipts: [],
    manualAttestations: [],
    runs: [],
    conflicts: [],
    gate: { satisfied: true, reasons: [] },
    unknowns: [],
  };
  const view = { ...base, ...overrides };
  // The current run, as runsOf derives it from the state, unless the test gives every run itself.
  const current: RunEntry = {
    attempt: view.attempt,
    runId: view.runId,
    status: view.execution.status,
    nativeStatus: view.execution.nativeStatus,
    completedAt: view.execution.completedAt,
    superseded: false,
    endedAt: null,
    reason: null,
  };
  return { ...view, runs: overrides.runs ?? [current] };
}

/** The same dispatch, completed without the evidence it was asked for, past its grace window. */
function orphanedViewFactory(dispatchId: string): DispatchView {
  const handled = dispatchViewFactory({ dispatchId });
  return dispatchViewFactory({
    dispatchId,
    evidence: { ...handled.evidence, found: [], missing: handled.evidence.expected, files: [], outcome: 'orphan_no_delivery' },
    receipts: handled.receipts.filter((receipt) => receipt.event !== 'dispatch_completed'),
    gate: { satisfied: false, reasons: ['no dispatch_completed receipt: the expected evidence has not been checked present'] },
  });
}

function blockedViewFactory(dispatchId: string, blockedReason: string): DispatchView {
  return dispatchViewFactory({
    dispatchId,
    runId: null,
    phase: 'blocked',
    blockedReason,
    execution: { status: null, nativeStatus: null, monitorStatus: null, lastActivityAt: null, completedAt: null, pendingApproval: null, result: null, cancelRequestedAt: null, cancel: null },
    evidence: { expected: [], found: [], missing: [], invalid: [], files: [], outcome: 'unverified' },
    receipts: [
      { event: 'dispatch_written', at: at(0), attempt: 1 },
      { event: 'dispatch_blocked', at: at(0), attempt: 1, reason: blockedReason },
    ],
    gate: { satisfied: false, reasons: [`latest receipt is dispatch_blocked (${blockedReason})`] },
    runs: [],
  });
}

/** A ledger event as the event log holds it; its eventId names the change unless the test gives one. */
function ledgerEvent(detailType: string, seconds: number, detail: Readonly<Record<string, unknown>> = {}): LoggedEvent {
  const dispatchId = String(detail['dispatchId'] ?? 'd');
  const attempt = Number(detail['attempt'] ?? 1);
  return {
    detailType,
    detail: { eventId: `${dispatchId}:${attempt}:${detailType}`, at: at(seconds), dispatchId, origin: 'census', target: 'demo-agent', attempt, ...detail },
  };
}

/** The events of a dispatch that completed at at(3) and was found handled at at(4). */
function handledEvents(dispatchId: string): LoggedEvent[] {
  return [
    ledgerEvent('Dispatch Accepted', 0, { dispatchId }),
    ledgerEvent('Dispatch Submitted', 1, { dispatchId, runId: 'r-1' }),
    ledgerEvent('Run Completed', 3, { dispatchId, runId: 'r-1', nativeStatus: 'completed' }),
    ledgerEvent('Dispatch Handled', 4, { dispatchId, runId: 'r-1' }),
  ];
}

function handledPlan(dispatchId: string): DispatchPlan {
  return { dispatchId, behavior: 'complete', expectedEvidence: [`out/${dispatchId}-0.md`], expected: { kind: 'handled' } };
}

function orphanPlan(dispatchId: string): DispatchPlan {
  return { dispatchId, behavior: 'complete_without_evidence', expectedEvidence: [`out/${dispatchId}-0.md`], expected: { kind: 'orphan' }, injectedOrphan: true };
}

const bodyOf = (dispatchId: string): string => JSON.stringify({ dispatchId, origin: 'census', target: 'demo-agent', task: { goal: `census ${dispatchId}` } });

const ORIGINAL: PlannedSend = { wave: 'first', role: 'original', body: bodyOf('d'), dispatchId: 'd' };
const DUPLICATE: PlannedSend = { wave: 'first', role: 'duplicate_concurrent', body: bodyOf('d'), dispatchId: 'd' };
const NOT_JSON: PlannedSend = { wave: 'first', role: 'rejection', rejection: 'not_json', body: '{"dispatchId": "p-json", oops', dispatchId: null };
const BLOCKED: PlannedSend = { wave: 'first', role: 'blocked', body: JSON.stringify({ dispatchId: 'p', origin: 'census', target: 'census-no-such-target', task: {} }), dispatchId: 'p' };

/**
 * A clean census: `d` sent twice (m-1 original, m-2 duplicate) and handled; m-3 rejected as not_json;
 * `p` (m-4) blocked as unknown_target.
 */
function cleanObservations(): CensusObservations {
  const sent: SentMessage[] = [
    { messageId: 'm-1', send: ORIGINAL },
    { messageId: 'm-2', send: DUPLICATE },
    { messageId: 'm-3', send: NOT_JSON },
    { messageId: 'm-4', send: BLOCKED },
  ];
  return {
    workload: {
      seed: 7,
      dispatches: [handledPlan('d'), { dispatchId: 'p', behavior: null, expectedEvidence: [], expected: { kind: 'blocked', code: 'unknown_target' } }],
      sends: sent.map((message) => message.send),
    },
    sent,
    dispatches: new Map<string, ObservedDispatch>([
      ['d', { view: dispatchViewFactory(), anchorMessageId: 'm-1' }],
      ['p', { view: blockedViewFactory('p', 'unknown_target: census-no-such-target is not registered'), anchorMessageId: 'm-4' }],
    ]),
    tableDispatchIds: ['d', 'p'],
    rejections: [{ messageId: 'm-3', reason: 'not_json', dispatchId: null }],
    dlqMessageIds: [],
    events: [
      ...handledEvents('d'),
      ledgerEvent('Dispatch Accepted', 0, { dispatchId: 'p' }),
      ledgerEvent('Dispatch Blocked', 0, { dispatchId: 'p', reason: 'unknown_target: census-no-such-target is not registered' }),
      { detailType: 'Message Rejected', detail: { eventId: 'rejection:m-3', at: at(0), messageId: 'm-3', reason: 'not_json' } },
    ],
    stats: { submissions: { d: 1 }, runs: { d: 1 }, attempts: { 'd:1': { submissions: 1, runs: 1 } }, open: 0, maxOpen: { 'demo-agent': 1 } },
    monitorTicks: [],
    monitorTickBudgetMs: 750,
    faultLog: [],
    faultsFired: {},
    deliveryGraceSeconds: GRACE_SECONDS,
  };
}

/** One more valid dispatch, sent once (as `m-<id>`) and held by the ledger with `view`. */
function withDispatch(observed: CensusObservations, plan: DispatchPlan, view: DispatchView | null, events: readonly LoggedEvent[] = []): CensusObservations {
  const message: SentMessage = { messageId: `m-${plan.dispatchId}`, send: { wave: 'first', role: 'original', body: bodyOf(plan.dispatchId), dispatchId: plan.dispatchId } };
  return {
    ...observed,
    workload: { ...observed.workload, dispatches: [...observed.workload.dispatches, plan], sends: [...observed.workload.sends, message.send] },
    sent: [...observed.sent, message],
    dispatches: view ? new Map([...observed.dispatches, [plan.dispatchId, { view, anchorMessageId: message.messageId }]]) : observed.dispatches,
    tableDispatchIds: view ? [...observed.tableDispatchIds, plan.dispatchId] : observed.tableDispatchIds,
    events: [...observed.events, ...events],
  };
}

/** The must-be-zero counts that are not zero: `{}` for a census that passes. */
/**
 * The must-be-zero counts that are not. Each test crafts only the events it is about, so the log's
 * completeness (`missingEvents`) is left out here and has a test of its own (`failingAll` keeps it).
 */
function failing(report: CensusReport): Partial<Record<(typeof MUST_BE_ZERO)[number], number>> {
  return Object.fromEntries(MUST_BE_ZERO.filter((check) => check !== 'missingEvents' && report[check] !== 0).map((check) => [check, report[check]]));
}

function failingAll(report: CensusReport): Partial<Record<(typeof MUST_BE_ZERO)[number], number>> {
  return Object.fromEntries(MUST_BE_ZERO.filter((check) => report[check] !== 0).map((check) => [check, report[check]]));
}

/** The ids the findings of one check name, in the order found. */
const idsOf = (report: CensusReport, check: string): string[] => report.findings.filter((finding) => finding.check === check).map((finding) => finding.id);

describe('checkCensus', () => {
  it('passes a clean census: every send has exactly one outcome and every must-be-zero count is 0', () => {
    const report = checkCensus(cleanObservations());

    expect(failing(report)).toEqual({});
    expect(report.findings).toEqual([]);
    expect(report).toMatchObject({ seed: 7, sent: 4, dispatches: 1, duplicates: 1, rejections: 1, blocked: 1, dlqOnly: 0, balanced: true, repeatedSubmissions: 0 });
    expect(report.poison).toEqual({ not_json: { sent: 1, asExpected: 1 }, unknown_target: { sent: 1, asExpected: 1 } });
    expect(report.orphans).toEqual({ injected: 0, detected: 0, maxTicksAfterGrace: 0, maxUnfaultedTicksAfterGrace: 0, ticksAfterGrace: {} });
  });

  it('counts a send with no dispatch, rejection or DLQ entry as lost', () => {
    const report = checkCensus(withDispatch(cleanObservations(), handledPlan('l'), null));

    // Lost, and so its dispatch never got where its plan says.
    expect(failing(report)).toEqual({ lost: 1, notFinal: 1 });
    expect(idsOf(report, 'lost')).toEqual(['m-l']);
    expect(report.balanced).toBe(false);
  });

  it('counts a send found only in the DLQ as dlqOnly, and a DLQ copy of an anchored message as its dispatch', () => {
    const observed = withDispatch(cleanObservations(), handledPlan('l'), null);
    const report = checkCensus({ ...observed, dlqMessageIds: ['m-l', 'm-1'] });

    expect(failing(report)).toEqual({});
    expect(report).toMatchObject({ lost: 0, dlqOnly: 1, dispatches: 1, duplicates: 1, balanced: true });
  });

  it('counts as unexpected a table dispatch never planned, a rejection of a message never sent and a run above the ledger attempt', () => {
    const clean = cleanObservations();
    const report = checkCensus({
      ...clean,
      tableDispatchIds: [...clean.tableDispatchIds, 'x-never-planned'],
      rejections: [...clean.rejections, { messageId: 'm-never-sent', reason: 'not_json', dispatchId: null }],
      stats: { ...clean.stats, attempts: { ...clean.stats.attempts, 'd:2': { submissions: 1, runs: 1 } } },
    });

    expect(failing(report)).toEqual({ unexpected: 3 });
    expect(idsOf(report, 'unexpected')).toEqual(['x-never-planned', 'm-never-sent', 'd:2']);
  });

  it('counts as misrouted a rejection message that became a dispatch and a conflict rejected for another reason', () => {
    const clean = cleanObservations();
    const unreadableOrigin: PlannedSend = { wave: 'first', role: 'rejection', rejection: 'no_readable_origin', body: JSON.stringify({ dispatchId: 'q', origin: 'Not An Origin' }), dispatchId: 'q' };
    const conflict: PlannedSend = { wave: 'late', role: 'conflict', rejection: 'conflict', body: JSON.stringify({ dispatchId: 'd', origin: 'census', task: { goal: 'other' } }), dispatchId: 'd' };
    const report = checkCensus({
      ...clean,
      workload: { ...clean.workload, sends: [...clean.workload.sends, unreadableOrigin, conflict] },
      sent: [...clean.sent, { messageId: 'm-origin', send: unreadableOrigin }, { messageId: 'm-conflict', send: conflict }],
      dispatches: new Map([...clean.dispatches, ['q', { view: dispatchViewFactory({ dispatchId: 'q' }), anchorMessageId: 'm-origin' }]]),
      // The dispatch the ledger should never have made is in the table too: the census never planned it.
      tableDispatchIds: [...clean.tableDispatchIds, 'q'],
      rejections: [...clean.rejections, { messageId: 'm-conflict', reason: 'not_json', dispatchId: 'd' }],
    });

    expect(failing(report)).toEqual({ misrouted: 2, unexpected: 1 });
    expect(idsOf(report, 'misrouted')).toEqual(['m-origin', 'm-conflict']);
    expect(idsOf(report, 'unexpected')).toEqual(['q']);
    expect(report).toMatchObject({ dispatches: 2, rejections: 2, balanced: true });
  });

  it('counts as unexpected a DLQ message the census never sent', () => {
    const clean = cleanObservations();
    const report = checkCensus({ ...clean, dlqMessageIds: ['m-stranger'] });
    expect(failing(report)).toEqual({ unexpected: 1 });
    expect(idsOf(report, 'unexpected')).toEqual(['m-stranger']);
  });

  it('counts a conflicting message that left no rejection as misrouted (the conflict was swallowed) and lost', () => {
    const clean = cleanObservations();
    const conflict: PlannedSend = { wave: 'late', role: 'conflict', rejection: 'conflict', body: 'other content', dispatchId: 'd' };
    const report = checkCensus({ ...clean, sent: [...clean.sent, { messageId: 'm-swallowed', send: conflict }] });
    expect(failing(report)).toEqual({ misrouted: 1, lost: 1 });
    expect(idsOf(report, 'misrouted')).toEqual(['m-swallowed']);
  });

  it('counts an attempt the target ran twice as double-submitted', () => {
    const clean = cleanObservations();
    const report = checkCensus({ ...clean, stats: { ...clean.stats, attempts: { 'd:1': { submissions: 3, runs: 2 } } } });

    expect(failing(report)).toEqual({ doubleSubmittedAttempts: 1 });
    expect(idsOf(report, 'doubleSubmittedAttempts')).toEqual(['d:1']);
    expect(report.repeatedSubmissions).toBe(1);
  });

  it('counts same-key submissions beyond the run as repeated submissions without failing', () => {
    const clean = cleanObservations();
    const report = checkCensus({ ...clean, stats: { ...clean.stats, attempts: { 'd:1': { submissions: 3, runs: 1 } } } });

    expect(failing(report)).toEqual({});
    expect(report.repeatedSubmissions).toBe(2);
  });

  it('counts as status regressions, in `at` order whatever the log order, a stall after a completion, a failure after a completion and an event of an attempt after the next began', () => {
    const [accepted, submitted, completed, handled] = handledEvents('s-stalled');
    if (!accepted || !submitted || !completed || !handled) throw new Error('handledEvents gives four events');
    // Logged before the completion, but committed after it.
    const stalledLate = [accepted, submitted, ledgerEvent('Run Stalled', 5, { dispatchId: 's-stalled', runId: 'r-1', nativeStatus: 'running' }), completed, handled];
    // Control: logged after the completion, but committed before it.
    const okEvents = handledEvents('s-ok');
    const stalledEarly = [...okEvents, ledgerEvent('Run Stalled', 2, { dispatchId: 's-ok', runId: 'r-1', nativeStatus: 'running' })];
    const failedAfterCompleted = [...handledEvents('s-failed'), ledgerEvent('Run Failed', 5, { dispatchId: 's-failed', runId: 'r-1', nativeStatus: 'failed' })];

    const secondAttempt = dispatchViewFactory({
      dispatchId: 's-attempt',
      attempt: 2,
      runId: 'r-2',
      execution: { ...dispatchViewFactory().execution, lastActivityAt: at(7), completedAt: at(7) },
      runs: [
        { attempt: 1, runId: 'r-1', status: 'running', nativeStatus: 'running', completedAt: null, superseded: true, endedAt: at(5), reason: 'census redispatch' },
        { attempt: 2, runId: 'r-2', status: 'completed', nativeStatus: 'completed', completedAt: at(7), superseded: false, endedAt: null, reason: null },
      ],
    });
    const attemptEvents = [
      ledgerEvent('Dispatch Accepted', 0, { dispatchId: 's-attempt' }),
      ledgerEvent('Dispatch Submitted', 1, { dispatchId: 's-attempt', runId: 'r-1' }),
      ledgerEvent('Dispatch Submitted', 5, { dispatchId: 's-attempt', attempt: 2, runId: 'r-2' }),
      ledgerEvent('Run Stalled', 6, { dispatchId: 's-attempt', attempt: 1, runId: 'r-1', nativeStatus: 'running' }),
      ledgerEvent('Run Completed', 7, { dispatchId: 's-attempt', attempt: 2, runId: 'r-2', nativeStatus: 'completed' }),
      ledgerEvent('Dispatch Handled', 8, { dispatchId: 's-attempt', attempt: 2, runId: 'r-2' }),
    ];

    let observed = withDispatch(cleanObservations(), handledPlan('s-stalled'), dispatchViewFactory({ dispatchId: 's-stalled' }), stalledLate);
    observed = withDispatch(observed, handledPlan('s-ok'), dispatchViewFactory({ dispatchId: 's-ok' }), stalledEarly);
    observed = withDispatch(observed, handledPlan('s-failed'), dispatchViewFactory({ dispatchId: 's-failed' }), failedAfterCompleted);
    observed = withDispatch(observed, handledPlan('s-attempt'), secondAttempt, attemptEvents);
    const report = checkCensus(observed);

    // Run Failed also claims a change the ledger never committed: it holds the run completed.
    expect(failing(report)).toEqual({ statusRegressions: 3, eventsWithoutChange: 1 });
    expect(idsOf(report, 'statusRegressions')).toEqual(['s-stalled', 's-failed', 's-attempt']);
    expect(idsOf(report, 'eventsWithoutChange')).toEqual(['s-failed']);
  });

  it('counts as events without change a verdict, a run status, an eventId and a rejection the ledger does not hold', () => {
    // The orphan the census injected, found orphaned, and also announced handled.
    const contradicted = [
      ...handledEvents('w-orphan').filter((event) => event.detailType !== 'Dispatch Handled'),
      ledgerEvent('Dispatch Orphaned', 6, { dispatchId: 'w-orphan', runId: 'r-1' }),
      ledgerEvent('Dispatch Handled', 5, { dispatchId: 'w-orphan', runId: 'r-1' }),
    ];
    // The ledger holds the run failed; the event says completed.
    const failedView = dispatchViewFactory({
      dispatchId: 'w-native',
      execution: { ...dispatchViewFactory().execution, status: 'failed', nativeStatus: 'failed' },
      evidence: { expected: [], found: [], missing: [], invalid: [], files: [], outcome: 'unverified' },
      receipts: [
        { event: 'dispatch_written', at: at(0), attempt: 1 },
        { event: 'dispatch_submitted', at: at(1), attempt: 1, runId: 'r-1', requestId: 'req-1' },
      ],
      gate: { satisfied: false, reasons: ['no dispatch_completed receipt: the expected evidence has not been checked present'] },
    });
    const nativeEvents = [
      ledgerEvent('Dispatch Accepted', 0, { dispatchId: 'w-native' }),
      ledgerEvent('Run Completed', 3, { dispatchId: 'w-native', runId: 'r-1', nativeStatus: 'completed' }),
    ];
    const [, submitted] = handledEvents('d');
    if (!submitted) throw new Error('handledEvents gives four events');

    let observed = withDispatch(cleanObservations(), orphanPlan('w-orphan'), orphanedViewFactory('w-orphan'), contradicted);
    observed = withDispatch(observed, { dispatchId: 'w-native', behavior: 'fail', expectedEvidence: [], expected: { kind: 'failed' } }, failedView, nativeEvents);
    const report = checkCensus({
      ...observed,
      events: [
        ...observed.events,
        // Another change under the eventId of d's Dispatch Submitted.
        { detailType: submitted.detailType, detail: { ...submitted.detail, runId: 'r-other' } },
        { detailType: 'Message Rejected', detail: { eventId: 'rejection:m-ghost', at: at(0), messageId: 'm-ghost', reason: 'not_json' } },
      ],
    });

    // Orphaned and Handled for one attempt are also two verdicts, the later contradicting the earlier.
    expect(failing(report)).toEqual({ eventsWithoutChange: 4, statusRegressions: 1 });
    expect(idsOf(report, 'eventsWithoutChange')).toEqual(['d:1:Dispatch Submitted', 'm-ghost', 'w-orphan', 'w-native']);
    expect(idsOf(report, 'statusRegressions')).toEqual(['w-orphan']);
  });

  it('counts a once-per-attempt change published under a second eventId as a regression, and orders one write\'s events by the state machine', () => {
    const clean = cleanObservations();
    const again = ledgerEvent('Run Completed', 9, { dispatchId: 'd', attempt: 1, nativeStatus: 'completed', eventId: 'e-second-completed' });
    const report = checkCensus({ ...clean, events: [...clean.events, again] });
    expect(failing(report)).toEqual({ statusRegressions: 1 });
    expect(report.findings.find((finding) => finding.check === 'statusRegressions')?.detail).toContain('a second Run Completed');

    // Submitted and Completed of one write share an `at`; logged the other way round, they are not a regression.
    const sameWrite = [
      ledgerEvent('Run Completed', 50, { dispatchId: 'e', attempt: 1, nativeStatus: 'completed', eventId: 'e-c' }),
      ledgerEvent('Dispatch Submitted', 50, { dispatchId: 'e', attempt: 1, eventId: 'e-s' }),
    ];
    const plan = handledPlan('e');
    const tied = checkCensus(withDispatch(cleanObservations(), plan, dispatchViewFactory({ dispatchId: 'e' }), sameWrite));
    expect(failing(tied).statusRegressions).toBeUndefined();
  });

  it('counts committed changes the event log never showed as missing events: the submission, the final run event, the verdict, a block and a rejection', () => {
    const clean = cleanObservations();
    expect(failingAll(checkCensus(clean))).toEqual({});
    const silent = checkCensus({ ...clean, events: [] });
    // d: submitted, completed, handled; p: blocked; m-3: rejected.
    expect(failingAll(silent)).toEqual({ missingEvents: 5 });
    expect(idsOf(silent, 'missingEvents')).toEqual(['d', 'd', 'd', 'p', 'm-3']);
  });

  it('does not count the same event delivered twice (same eventId, same content)', () => {
    const clean = cleanObservations();
    const report = checkCensus({ ...clean, events: [...clean.events, ...handledEvents('d')] });

    expect(failing(report)).toEqual({});
    expect(report.events).toBe(clean.events.length);
  });

  it('counts an injected orphan never announced as missed, and a healthy dispatch orphaned in the ledger or by an event as a false orphan', () => {
    let observed = withDispatch(cleanObservations(), orphanPlan('o-missed'), orphanedViewFactory('o-missed'));
    observed = withDispatch(observed, handledPlan('o-false'), orphanedViewFactory('o-false'));
    observed = withDispatch(observed, handledPlan('o-false-event'), dispatchViewFactory({ dispatchId: 'o-false-event' }), [
      ledgerEvent('Dispatch Orphaned', 6, { dispatchId: 'o-false-event', runId: 'r-1' }),
    ]);
    const report = checkCensus(observed);

    // The ledger's false orphan also ended elsewhere than its plan; the event's claims a verdict the ledger never reached.
    expect(failing(report)).toEqual({ missedOrphans: 1, falseOrphans: 2, wrongFinal: 1, eventsWithoutChange: 1 });
    expect(idsOf(report, 'missedOrphans')).toEqual(['o-missed']);
    expect(idsOf(report, 'falseOrphans')).toEqual(['o-false', 'o-false-event']);
    expect(idsOf(report, 'wrongFinal')).toEqual(['o-false']);
    expect(idsOf(report, 'eventsWithoutChange')).toEqual(['o-false-event']);
    expect(report.orphans).toMatchObject({ injected: 1, detected: 0 });
  });

  // Completed at at(3), grace 2 s: the window closes at at(5). Ticks start at at(5.5) and at(6.5); the
  // second finds the orphan at at(6.6): two ticks after the window, counting the one that found it.
  const lateOrphan = (): CensusObservations => ({
    ...withDispatch(cleanObservations(), orphanPlan('o-late'), orphanedViewFactory('o-late'), [ledgerEvent('Dispatch Orphaned', 6.6, { dispatchId: 'o-late', runId: 'r-1' })]),
    monitorTicks: [
      { start: T0 + 4_500, end: T0 + 4_700 },
      { start: T0 + 5_500, end: T0 + 5_700 },
      { start: T0 + 6_500, end: T0 + 6_700 },
    ],
  });

  it('counts an orphan found two unfaulted ticks after its grace window as missed', () => {
    const report = checkCensus(lateOrphan());

    expect(failing(report)).toEqual({ missedOrphans: 1 });
    expect(idsOf(report, 'missedOrphans')).toEqual(['o-late']);
    // Found, but late: detected and missed at once.
    expect(report.orphans).toEqual({ injected: 1, detected: 1, maxTicksAfterGrace: 2, maxUnfaultedTicksAfterGrace: 2, ticksAfterGrace: { '2': 1 } });
  });

  it('leaves out of an orphan\'s unfaulted lag the ticks during which a fault fired', () => {
    const report = checkCensus({ ...lateOrphan(), faultLog: [{ at: T0 + 5_600, kind: 'lookup_outage', subject: 'r-1' }] });

    expect(failing(report)).toEqual({});
    expect(report.orphans).toEqual({ injected: 1, detected: 1, maxTicksAfterGrace: 2, maxUnfaultedTicksAfterGrace: 1, ticksAfterGrace: { '2': 1 } });
  });

  it('does not count as a miss a tick that ran past its budget or started while another tick was at work: either may have left the orphan\'s shard to the next tick', () => {
    const late = lateOrphan();
    // The tick that missed it ran 900 ms, past its 750 ms budget: cut short, it may never have read the shard.
    const overBudget = checkCensus({ ...late, monitorTicks: late.monitorTicks.map((tick) => (tick.start === T0 + 5_500 ? { ...tick, end: T0 + 6_400 } : tick)) });
    expect(failing(overBudget)).toEqual({});
    expect(overBudget.orphans).toEqual({ injected: 1, detected: 1, maxTicksAfterGrace: 2, maxUnfaultedTicksAfterGrace: 1, ticksAfterGrace: { '2': 1 } });

    // A tick begun at the deadline still held the shards it worked on when the one at 5.5 s started.
    const overlapped = checkCensus({ ...late, monitorTicks: [...late.monitorTicks, { start: T0 + 5_000, end: T0 + 5_600 }] });
    expect(failing(overlapped)).toEqual({});
    expect(overlapped.orphans.maxUnfaultedTicksAfterGrace).toBe(1);
  });

  it('holds each run the limited target opened to the limit in force: over it after a lowered limit has settled is over limit; within the slack after it, or under a raised one, is not', () => {
    const clean = cleanObservations();
    const limited = {
      target: 'census-limited',
      // Registered at 2; raised to 10 at 10 s (written by 10.1 s); lowered to 2 at 20 s (written by 20.1 s).
      changes: [
        { at: T0, done: T0, limit: 2 },
        { at: T0 + 10_000, done: T0 + 10_100, limit: 10 },
        { at: T0 + 20_000, done: T0 + 20_100, limit: 2 },
      ],
      opened: [
        { at: T0 + 1_000, open: 2, dispatchId: 'd' },
        // Raised: up to 10 from the moment it was asked for.
        { at: T0 + 10_050, open: 7, dispatchId: 'd' },
        // Lowered, but within the slack: a slot taken under 10 opening its run.
        { at: T0 + 21_000, open: 9, dispatchId: 'd' },
        // Lowered and settled: a third run opened with two already open.
        { at: T0 + 25_000, open: 3, dispatchId: 'd' },
        { at: T0 + 26_000, open: 2, dispatchId: 'd' },
      ],
      slackMs: 2_000,
    };
    const report = checkCensus({ ...clean, limited });

    expect(failing(report)).toEqual({ overLimit: 1 });
    expect(report.findings.filter((finding) => finding.check === 'overLimit').map((finding) => finding.detail)).toEqual(['census-limited opened its run with 3 open; the limit in force was 2 (set 4900 ms before)']);
    expect(report.limitChanges).toEqual({ changes: 2, runsOpened: 5, maxOpen: 9 });
  });

  it('follows a message through the DLQ and its redrive: the copy the ledger took is the sent message\'s dispatch; a copy nobody took is lost', () => {
    const back: DispatchPlan = { ...handledPlan('q'), dlqRoundTrip: true };
    const gone: DispatchPlan = { ...handledPlan('q-gone'), dlqRoundTrip: true };
    let observed = withDispatch(cleanObservations(), back, dispatchViewFactory({ dispatchId: 'q' }), handledEvents('q'));
    observed = withDispatch(observed, gone, null);
    const report = checkCensus({
      ...observed,
      // q's message (m-q) was redriven as m-q-copy, which the ledger took; m-q-gone's copy was never taken.
      dispatches: new Map([...observed.dispatches, ['q', { view: dispatchViewFactory({ dispatchId: 'q' }), anchorMessageId: 'm-q-copy' }]]),
      redriven: [
        { from: 'm-q', to: 'm-q-copy' },
        { from: 'm-q-gone', to: 'm-q-gone-copy' },
      ],
    });

    expect(failing(report)).toEqual({ lost: 1, notFinal: 1 });
    expect(idsOf(report, 'lost')).toEqual(['m-q-gone']);
    expect(report).toMatchObject({ dispatches: 2, duplicates: 1, dlqOnly: 0 });
    expect(report.dlqRoundTrips).toEqual({ planned: 2, redriven: 2, asExpected: 1 });
  });

  it('counts a counted run at the limited target for a dispatch the ledger does not hold, and a redriven copy of a message never sent, as unexpected', () => {
    const clean = cleanObservations();
    const report = checkCensus({
      ...clean,
      limited: { target: 'census-limited', changes: [{ at: T0, done: T0, limit: 2 }], opened: [{ at: T0 + 1_000, open: 1, dispatchId: 'x-ghost' }], slackMs: 2_000 },
      redriven: [{ from: 'm-never-sent', to: 'm-ghost-copy' }],
    });

    expect(failing(report)).toEqual({ unexpected: 2 });
    expect(idsOf(report, 'unexpected')).toEqual(['m-ghost-copy', 'x-ghost']);
  });

  it('counts a dispatch still running as not final, and one settled elsewhere than planned as wrong final', () => {
    const handled = dispatchViewFactory();
    const running = dispatchViewFactory({
      dispatchId: 'n-running',
      execution: { ...handled.execution, status: 'running', nativeStatus: 'running', completedAt: null, result: null },
      evidence: { ...handled.evidence, found: [], files: [], outcome: 'pending' },
      receipts: handled.receipts.slice(0, 2),
      gate: { satisfied: false, reasons: ['no dispatch_completed receipt: the expected evidence has not been checked present'] },
    });
    const failed = dispatchViewFactory({
      dispatchId: 'n-failed',
      execution: { ...handled.execution, status: 'failed', nativeStatus: 'failed' },
      evidence: { ...handled.evidence, found: [], files: [], outcome: 'unverified' },
      receipts: handled.receipts.slice(0, 2),
      gate: { satisfied: false, reasons: ['no dispatch_completed receipt: the expected evidence has not been checked present'] },
    });
    let observed = withDispatch(cleanObservations(), handledPlan('n-running'), running, handledEvents('n-running').slice(0, 2));
    observed = withDispatch(observed, handledPlan('n-failed'), failed, [
      ...handledEvents('n-failed').slice(0, 2),
      ledgerEvent('Run Failed', 3, { dispatchId: 'n-failed', runId: 'r-1', nativeStatus: 'failed' }),
    ]);
    const report = checkCensus(observed);

    expect(failing(report)).toEqual({ notFinal: 1, wrongFinal: 1 });
    expect(idsOf(report, 'notFinal')).toEqual(['n-running']);
    expect(idsOf(report, 'wrongFinal')).toEqual(['n-failed']);
  });

  it('tallies each poison class: how many were sent and how many came out as that class', () => {
    const clean = cleanObservations();
    const tooDeep: PlannedSend = { wave: 'first', role: 'rejection', rejection: 'too_deep', body: JSON.stringify({ deep: { inner: { leaf: true } } }), dispatchId: null };
    const unreachable: PlannedSend = { wave: 'first', role: 'blocked', body: JSON.stringify({ dispatchId: 'p-retry', origin: 'census', target: 'census-unreachable', task: {} }), dispatchId: 'p-retry' };
    const report = checkCensus({
      ...clean,
      workload: {
        ...clean.workload,
        dispatches: [...clean.workload.dispatches, { dispatchId: 'p-retry', behavior: null, expectedEvidence: [], expected: { kind: 'blocked', code: 'retry_budget_spent' } }],
        sends: [...clean.workload.sends, tooDeep, unreachable],
      },
      sent: [...clean.sent, { messageId: 'm-deep', send: tooDeep }, { messageId: 'm-retry', send: unreachable }],
      dispatches: new Map([...clean.dispatches, ['p-retry', { view: blockedViewFactory('p-retry', 'target_rejected: HTTP 422'), anchorMessageId: 'm-retry' }]]),
      tableDispatchIds: [...clean.tableDispatchIds, 'p-retry'],
      // The too-deep message read as not JSON at all.
      rejections: [...clean.rejections, { messageId: 'm-deep', reason: 'not_json', dispatchId: null }],
    });

    expect(report.poison).toEqual({
      not_json: { sent: 1, asExpected: 1 },
      unknown_target: { sent: 1, asExpected: 1 },
      too_deep: { sent: 1, asExpected: 0 },
      retry_budget_spent: { sent: 1, asExpected: 0 },
    });
    expect(failing(report)).toEqual({ misrouted: 1, wrongFinal: 1 });
    expect(idsOf(report, 'misrouted')).toEqual(['m-deep']);
    expect(idsOf(report, 'wrongFinal')).toEqual(['p-retry']);
  });
});
