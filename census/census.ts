import { MESSAGE_ITEM, isStateItemKey } from '../shared/adapters/item-kinds.js';
import { ROUTES, routePath } from '@dispatch-ledger/protocol';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { GetQueueAttributesCommand, ReceiveMessageCommand, SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDBDocumentClient, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { localClients, type LocalEndpoints } from '../local/clients.js';
import { startPlatform, type RunningPlatform } from '../local/platform.js';
import type { InvocationReport } from '../local/runtime/context.js';
import { startDemoAgent, type DemoAgent, type DemoAgentStats } from '../local/demo-agent/server.js';
import { redriveDeadLetters } from '../shared/adapters/dlq-redrive.js';

import { MAX_CONCURRENT_RUNS_LIMIT } from '../shared/targets/port.js';
import { LedgerTable } from '../shared/adapters/ledger-writes.js';
import type { DispatchView } from '../shared/dispatch/view.js';
import { installFaults } from '../shared/faults.js';
import { MONITOR_TIMEOUT_SECONDS, tickBudget } from '../shared/usecases/monitor.js';
import { startActors } from './actors.js';
import { checkCensus, matches, missingEvents } from './checker.js';
import type { CensusReport, LimitChange, LoggedEvent, ObservedDispatch, ObservedRejection, SentMessage } from './observations.js';
import { CensusFaults, type FaultKind } from './faults.js';
import { LIMIT_CHANGE, LIMITED_TARGET, ORIGIN, planWorkload, UNREACHABLE_TARGET, type PlannedSend, type Workload } from './workload.js';

/**
 * One census: the local platform on real engines, a seeded workload sent to its queue, faults
 * injected across the pipeline while it runs, a drain, and the checker's verdict on everything the
 * system holds afterwards. Used by `npm run census` (census/main.ts) and the CI-sized run in `npm test`.
 */

export interface CensusOptions {
  readonly dispatches: number;
  readonly seed: number;
  readonly faults: readonly FaultKind[];
  /** Engines someone else started (the test suite's); by default the census starts and stops its own. */
  readonly engines?: LocalEndpoints;
  /** Resource-name prefix, so a census can share engines. */
  readonly prefix?: string;
  /** When the late wave (late duplicates, conflicts, children of held dispatches) is sent, seconds after the first. */
  readonly lateAfterSeconds?: number;
  /** The longest the drain may take before what is left is reported not final. */
  readonly drainSeconds?: number;
  readonly log?: (line: Record<string, unknown>) => void;
}

/**
 * Census timing, stated: every clock the verdicts depend on, in seconds, so a 10k run drains in
 * minutes. The monitor ticks every TICK; the stall verdict needs STALL of silence (plus the
 * coalescing window, a fifth of it); evidence is due GRACE after completion.
 */
export const CENSUS_TIMING = {
  tickSeconds: 1,
  stallAfterSeconds: 4,
  deliveryGraceSeconds: 2,
  approvalWaitSeconds: 120,
  resumeAfterSeconds: 8,
  slowSeconds: 3,
  /** The dispatch queue's visibility timeout: a crashed delivery comes back after this long. */
  visibilityTimeoutSeconds: 3,
  /** The target timeout (a hang is longer) and the claim (≥ 2 × the target timeout). */
  targetTimeoutMs: 1_000,
  hangMs: 1_500,
  claimSeconds: 2,
  /** Above the monitor's first look for a held child's parent (5 s). */
  parentWaitSeconds: 8,
  /** Submission retries: 6 attempts over ~10 s. */
  submitRetryDelaysSeconds: '1,1,2,2,4',
  /** How often the census runs a second monitor tick alongside the scheduled one. */
  concurrentTickEverySeconds: 3,
} as const;

export interface CensusRun {
  readonly report: CensusReport;
  readonly timing: typeof CENSUS_TIMING;
  readonly durationSeconds: number;
  readonly drainedInSeconds: number | null;
}

export async function runCensus(options: CensusOptions): Promise<CensusRun> {
  const log = options.log ?? (() => undefined);
  const started = Date.now();
  const workload = planWorkload({
    dispatches: options.dispatches,
    seed: options.seed,
    timeouts: {
      stallAfterSeconds: CENSUS_TIMING.stallAfterSeconds,
      approvalWaitSeconds: CENSUS_TIMING.approvalWaitSeconds,
      deliveryGraceSeconds: CENSUS_TIMING.deliveryGraceSeconds,
    },
    resumeAfterSeconds: CENSUS_TIMING.resumeAfterSeconds,
    slowSeconds: CENSUS_TIMING.slowSeconds,
  });
  const faults = new CensusFaults(options.faults, options.seed, CENSUS_TIMING.hangMs);
  const platform = await startPlatform({
    stateDir: mkdtempSync(join(tmpdir(), 'ledger-census-')),
    tickSeconds: CENSUS_TIMING.tickSeconds,
    log: (line) => {
      if (line['level'] === 'error') log({ component: 'platform', ...line });
    },
    ...(options.engines ? { engines: options.engines } : {}),
    ...(options.prefix ? { prefix: options.prefix } : {}),
    dispatchVisibilityTimeoutSeconds: CENSUS_TIMING.visibilityTimeoutSeconds,
    environment: {
      SUBMIT_RETRY_DELAYS_SECONDS: CENSUS_TIMING.submitRetryDelaysSeconds,
      CLAIM_SECONDS: String(CENSUS_TIMING.claimSeconds),
      // A child sent before its parent is held for it (CONTRACT §1 V3): 300 s would outlast the CI census's drain.
      PARENT_WAIT_SECONDS: String(CENSUS_TIMING.parentWaitSeconds),
      TARGET_TIMEOUT_MS: String(CENSUS_TIMING.targetTimeoutMs),
      // The census's own crashes are logged as errors by design; its report is the verdict.
      POWERTOOLS_LOG_LEVEL: 'SILENT',
      POWERTOOLS_METRICS_DISABLED: 'true',
    },
    faults: { demoAgent: faults.demoAgent(), redeliverStreamBatch: faults.redeliverStreamBatch },
    eventLogReceivers: 4,
  });
  // The limited target (fault `limit_change`): a demo agent of its own, so its open runs are its own count.
  const opened: Array<{ at: number; open: number; dispatchId: string }> = [];
  let limitedAgent: DemoAgent | undefined;
  /** Logs the limited target's slots as the ledger holds them (when a limit changes, and when a run opens over it). */
  let logSlots: (why: string) => void = () => undefined;
  let currentLimit = 0;
  try {
    limitedAgent = await startDemoAgent({
      targetName: LIMITED_TARGET,
      log: (line) => {
        if (line['msg'] !== 'run_created' || !limitedAgent) return;
        const run = { at: Date.now(), open: limitedAgent.stats().open, dispatchId: String(line['dispatchId'] ?? '') };
        opened.push(run);
        if (run.open > currentLimit) logSlots(`${run.dispatchId} opened with ${run.open} open (limit ${currentLimit})`);
      },
    });
  } catch (error) {
    await platform.stop();
    throw error;
  }
  const uninstall = installFaults(faults);
  log({ msg: 'platform up', eventLog: platform.info.eventLog, invocationLog: platform.invocationLog });
  const clients = localClients({
    dynamodbEndpoint: platform.info.dynamodbEndpoint,
    sqsEndpoint: platform.info.sqsEndpoint,
    s3Endpoint: platform.info.s3Endpoint,
    motoEndpoint: platform.info.eventBridgeEndpoint,
  });
  const redriven: Array<{ from: string; to: string }> = [];
  try {
    const table = new LedgerTable(DynamoDBDocumentClient.from(clients.dynamodb), { tableName: platform.resources.ledgerTable, retentionSeconds: 90 * 86_400 });
    // Nothing listens on port 9 of the loopback: every submission fails until the budget is spent.
    await table.putTarget({ name: UNREACHABLE_TARGET, kind: 'http', baseUrl: 'http://127.0.0.1:9' });
    // The demo agent under a concurrency limit (CONTRACT §11): every submission takes a slot, so a crash
    // between taking one and submitting is injected too. As high as the dispatches: runs that stay
    // unknown keep their slots for good, and the census must still drain.
    await table.putTarget({ name: 'demo-agent', kind: 'http', baseUrl: platform.demoAgent.url, maxConcurrentRuns: Math.min(MAX_CONCURRENT_RUNS_LIMIT, Math.max(1, options.dispatches)) });
    const limitChanges: LimitChange[] = [];
    const setLimit = async (limit: number): Promise<void> => {
      const at = Date.now();
      try {
        await table.putTarget({ name: LIMITED_TARGET, kind: 'http', baseUrl: limitedAgent?.url ?? '', maxConcurrentRuns: limit });
      } finally {
        limitChanges.push({ at, done: Date.now(), limit });
        currentLimit = limit;
      }
      logSlots(`limit set to ${limit}`);
    };
    logSlots = (why) =>
      void table
        .slotShards(LIMITED_TARGET)
        .then((shards) => log({ msg: 'limited target slots', why, slots: shards.map((shard) => `${shard.held}/${shard.cap}`).join(' ') }))
        .catch(() => undefined);
    await setLimit(LIMIT_CHANGE.low);
    faults.spareSlotCrash(workload.dispatches.filter((plan) => plan.limited).map((plan) => plan.dispatchId));
    // DLQ round trips: the table is unavailable for these dispatches until their messages are in the DLQ.
    const dlqPlans = faults.enabled('dlq_round_trip') ? workload.dispatches.filter((plan) => plan.dlqRoundTrip) : [];
    faults.makeUnavailable(dlqPlans.map((plan) => MESSAGE_ITEM.key(plan.dispatchId).pk));

    const sent: SentMessage[] = [];
    const send = async (batch: readonly PlannedSend[]): Promise<void> => {
      for (let i = 0; i < batch.length; i += 10) {
        const entries = batch.slice(i, i + 10);
        const answer = await clients.sqs.send(
          new SendMessageBatchCommand({ QueueUrl: platform.info.dispatchQueueUrl, Entries: entries.map((entry, k) => ({ Id: String(k), MessageBody: entry.body })) }),
        );
        for (const failed of answer.Failed ?? []) throw new Error(`the queue refused a census message: ${failed.Code ?? ''} ${failed.Message ?? ''}`);
        for (const ok of answer.Successful ?? []) {
          const entry = entries[Number(ok.Id)];
          if (entry && ok.MessageId) sent.push({ messageId: ok.MessageId, send: entry });
        }
      }
    };
    countWorkloadFaults(workload, faults);

    const dlqSent = (messageId: string): boolean => sent.some((message) => message.messageId === messageId && dlqPlans.some((plan) => plan.dispatchId === message.send.dispatchId));
    const actors = startActors(platform, table, workload, faults, log, {
      concurrentTickEverySeconds: CENSUS_TIMING.concurrentTickEverySeconds,
      setLimit,
      redrive: async (signal) => {
        await waitForDeadLetters(clients.sqs, platform.info.dlqUrl, dlqPlans.length, signal);
        // The fault clears, then the operator's redrive (`ledger dlq redrive`) sends each back.
        faults.makeAvailable();
        const moved = await redriveDeadLetters(clients.sqs, {
          deadLetterQueueUrl: platform.info.dlqUrl,
          queueUrl: platform.info.dispatchQueueUrl,
          onMoved: (copy) => {
            redriven.push(copy);
            if (dlqSent(copy.from)) faults.count('dlq_round_trip', copy.from);
          },
        });
        log({ msg: 'DLQ redriven', moved: moved.moved, failed: moved.failed.length, seconds: (Date.now() - started) / 1000 });
      },
      hasRedrive: dlqPlans.length > 0,
    });
    await send(workload.sends.filter((entry) => entry.wave === 'first'));
    log({ msg: 'first wave sent', messages: sent.length, seconds: (Date.now() - started) / 1000 });
    await sleep(Math.max(0, (options.lateAfterSeconds ?? 10) * 1000 - (Date.now() - started)));
    const late = workload.sends.filter((entry) => entry.wave === 'late');
    await heldBy(table, late.flatMap((entry) => (entry.after ? [entry.after] : [])), 300);
    await send(late);
    log({ msg: 'late wave sent', messages: sent.length, seconds: (Date.now() - started) / 1000 });

    const drainedInSeconds = await drain(platform, table, workload, clients, faults, options.drainSeconds ?? 300, started, log);
    faults.quiesce();
    await actors.stop();
    const observed = await observe(platform, clients, table, workload, limitedAgent.stats());
    // What the last writes publish reaches the event log a moment later: wait until every change the
    // final records say was published is in the log (at most two minutes), then judge.
    for (let waited = 0; waited < 120 && missingEvents(observed.dispatches, observed.rejections, observed.events).length > 0; waited += 3) {
      await sleep(3_000);
      observed.events = readEventLog(platform.info.eventLog);
    }
    const report = checkCensus({
      workload,
      sent,
      ...observed,
      faultLog: faults.log,
      faultsFired: faults.fired(),
      deliveryGraceSeconds: CENSUS_TIMING.deliveryGraceSeconds,
      // The budget the monitor gives each tick of this period (its invocation has the stack's timeout).
      monitorTickBudgetMs: tickBudget(new Date(0), MONITOR_TIMEOUT_SECONDS * 1000, CENSUS_TIMING.tickSeconds).stopTakingAt.getTime(),
      redriven,
      // A slot is taken just before its submission call, which the target timeout bounds.
      limited: { target: LIMITED_TARGET, changes: limitChanges, opened, slackMs: 2 * CENSUS_TIMING.targetTimeoutMs },
    });
    return { report, timing: CENSUS_TIMING, durationSeconds: Math.round((Date.now() - started) / 100) / 10, drainedInSeconds };
  } finally {
    uninstall();
    clients.destroy();
    await limitedAgent.stop();
    await platform.stop();
  }
}

/** Waits until the DLQ holds `count` messages (or `signal` aborts). */
async function waitForDeadLetters(sqs: SQSClient, dlqUrl: string, count: number, signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    const dlq = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ['ApproximateNumberOfMessages'] }));
    if (Number(dlq.Attributes?.ApproximateNumberOfMessages ?? 0) >= count) return;
    await sleep(2_000, undefined, { signal }).catch(() => undefined);
  }
}

/** Waits until the ledger holds each of `dispatchIds` (at most `limitSeconds`). */
async function heldBy(table: LedgerTable, dispatchIds: readonly string[], limitSeconds: number): Promise<void> {
  const waiting = new Set(dispatchIds);
  const deadline = Date.now() + limitSeconds * 1000;
  while (waiting.size > 0 && Date.now() < deadline) {
    for (const dispatchId of [...waiting]) if (await table.getState(dispatchId)) waiting.delete(dispatchId);
    if (waiting.size > 0) await sleep(2_000);
  }
}

/** The workload's own faults: each planned message or behaviour that is one counts as fired when sent. */
function countWorkloadFaults(workload: Workload, faults: CensusFaults): void {
  const byBehavior: Partial<Record<string, FaultKind>> = {
    complete_without_evidence: 'orphan',
    stall: 'stall',
    stall_resume: 'stall',
    vanish: 'vanish',
    lose_callback: 'lost_callback',
    await_approval: 'approval',
    lookup_unavailable: 'lookup_unavailable',
  };
  for (const plan of workload.dispatches) {
    const kind = plan.behavior ? byBehavior[plan.behavior] : undefined;
    if (kind && faults.enabled(kind)) faults.count(kind, plan.dispatchId);
  }
  for (const entry of workload.sends) {
    const kind: FaultKind | undefined =
      entry.role === 'duplicate_concurrent' || entry.role === 'duplicate_late' || entry.role === 'conflict'
        ? entry.role
        : entry.role === 'rejection' || entry.role === 'blocked'
          ? 'poison'
          : undefined;
    if (kind && faults.enabled(kind)) faults.count(kind, entry.dispatchId ?? '');
  }
}

/** Waits until every planned dispatch has settled and the queue is empty; the seconds it took, or null at the limit. */
async function drain(
  platform: RunningPlatform,
  table: LedgerTable,
  workload: Workload,
  clients: ReturnType<typeof localClients>,
  faults: CensusFaults,
  limitSeconds: number,
  started: number,
  log: (line: Record<string, unknown>) => void,
): Promise<number | null> {
  // Each dispatch is waited for until it stands where its plan says (a run the monitor lost sight of
  // in a lookup outage comes back at its next lookup, with backoff); what is left at the limit the
  // checker reports not final, or final elsewhere.
  const plans = new Map(workload.dispatches.map((plan) => [plan.dispatchId, plan]));
  const pending = new Set(plans.keys());
  // The limit is a liveness budget, not a timing: while the platform makes progress (fewer messages
  // queued, fewer dispatches pending) it moves on, so a machine whose cores are shared with other work
  // drains later rather than "fails"; a platform stuck for half the limit stops it (at most 3 × the limit).
  const begun = Date.now();
  let deadline = begun + limitSeconds * 1000;
  let least = Number.POSITIVE_INFINITY;
  const progressed = (remaining: number): void => {
    if (remaining >= least) return;
    least = remaining;
    deadline = Math.min(begun + 3 * limitSeconds * 1000, Math.max(deadline, Date.now() + (limitSeconds * 1000) / 2));
  };
  while (Date.now() < deadline) {
    const queue = await clients.sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: platform.info.dispatchQueueUrl, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] }),
    );
    const inQueue = Number(queue.Attributes?.ApproximateNumberOfMessages ?? 0) + Number(queue.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0);
    progressed(inQueue + pending.size);
    if (inQueue > 0) {
      // The census's own reads compete with the platform: none while the intake still has work.
      log({ msg: 'draining', pending: pending.size, inQueue, seconds: Math.round((Date.now() - started) / 1000) });
      await sleep(2_000);
      continue;
    }
    faults.endBursts();
    // Read by key from the table (the checker reads the views once, at the end).
    const ids = [...pending];
    const sample: string[] = [];
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let dispatchId = ids.shift(); dispatchId !== undefined; dispatchId = ids.shift()) {
          const state = await table.getState(dispatchId);
          const plan = plans.get(dispatchId);
          if (state && plan && matches(plan, state)) pending.delete(dispatchId);
          else if (sample.length < 3) sample.push(`${dispatchId}: ${state ? `${state.phase}/${state.execution.status ?? '-'}/${state.execution.monitorStatus ?? '-'}/${state.evidence.outcome} due ${state.dueAt ?? '-'}` : 'no state'}`);
        }
      }),
    );
    log({ msg: 'draining', pending: pending.size, inQueue, seconds: Math.round((Date.now() - started) / 1000), sample });
    progressed(inQueue + pending.size);
    if (pending.size === 0) return Math.round((Date.now() - started) / 100) / 10;
    await sleep(2_000);
  }
  return null;
}

function readEventLog(file: string): LoggedEvent[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as { 'detail-type': string; detail: Record<string, unknown> })
    .map((event) => ({ detailType: event['detail-type'], detail: event.detail }));
}

async function observe(
  platform: RunningPlatform,
  clients: ReturnType<typeof localClients>,
  table: LedgerTable,
  workload: Workload,
  limitedStats: DemoAgentStats,
): Promise<{
  dispatches: Map<string, ObservedDispatch>;
  tableDispatchIds: string[];
  rejections: ObservedRejection[];
  dlqMessageIds: string[];
  events: LoggedEvent[];
  stats: ReturnType<RunningPlatform['demoAgent']['stats']>;
  monitorTicks: Array<{ start: number; end: number }>;
}> {
  const api = platform.info.apiUrl;
  const dispatches = new Map<string, ObservedDispatch>();
  const ids = workload.dispatches.map((plan) => plan.dispatchId);
  // A few readers at a time: the API and the table are local, the census has many.
  const queue = [...ids];
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      for (let dispatchId = queue.shift(); dispatchId !== undefined; dispatchId = queue.shift()) {
        const response = await fetch(`${api}${routePath(ROUTES.getDispatch, { dispatchId })}`, { headers: { 'x-ledger-origin': ORIGIN } });
        const view = response.status === 200 ? ((await response.json()) as DispatchView) : null;
        if (!view) await response.body?.cancel();
        const anchor = await table.getAcceptedMessage(dispatchId);
        dispatches.set(dispatchId, { view, anchorMessageId: anchor?.messageId ?? null });
      }
    }),
  );

  // The whole census table, read once by the checker (never by the product): any state item counts.
  const documents = DynamoDBDocumentClient.from(clients.dynamodb);
  const tableDispatchIds: string[] = [];
  let startKey: Record<string, unknown> | undefined;
  do {
    const page = await documents.send(new ScanCommand({ TableName: platform.resources.ledgerTable, ProjectionExpression: 'pk, sk', ExclusiveStartKey: startKey }));
    for (const item of page.Items ?? []) {
      const pk = String(item['pk']);
      if (isStateItemKey(pk, String(item['sk']))) tableDispatchIds.push(pk.slice(pk.indexOf('#') + 1));
    }
    startKey = page.LastEvaluatedKey;
  } while (startKey);

  const rejections: ObservedRejection[] = [];
  let cursor: string | null = null;
  do {
    const response = await fetch(`${api}${ROUTES.rejections.path}?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    const page = (await response.json()) as { items: Array<{ messageId: string; reason: string; dispatchId: string | null }>; cursor: string | null };
    rejections.push(...page.items.map(({ messageId, reason, dispatchId }) => ({ messageId, reason, dispatchId })));
    cursor = page.cursor;
  } while (cursor);

  // The DLQ, read without deleting (each message stays invisible for the rest of the census).
  const dlqMessageIds: string[] = [];
  for (;;) {
    const received = await clients.sqs.send(new ReceiveMessageCommand({ QueueUrl: platform.info.dlqUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 0, VisibilityTimeout: 600 }));
    const messages = received.Messages ?? [];
    if (messages.length === 0) break;
    dlqMessageIds.push(...messages.flatMap((message) => (message.MessageId ? [message.MessageId] : [])));
  }

  const events = readEventLog(platform.info.eventLog);

  const monitorTicks = readFileSync(platform.invocationLog, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as InvocationReport)
    .filter((report) => report.function === 'monitor')
    .map((report) => ({ start: Date.parse(report.at), end: Date.parse(report.at) + report.durationMs }));

  // Both agents' counts: their runs are of different dispatches.
  const demo = platform.demoAgent.stats();
  const stats: DemoAgentStats = {
    ...demo,
    submissions: { ...demo.submissions, ...limitedStats.submissions },
    runs: { ...demo.runs, ...limitedStats.runs },
    attempts: { ...demo.attempts, ...limitedStats.attempts },
    open: demo.open + limitedStats.open,
    maxOpen: { ...demo.maxOpen, ...limitedStats.maxOpen },
  };
  return { dispatches, tableDispatchIds, rejections, dlqMessageIds, events, stats, monitorTicks };
}

