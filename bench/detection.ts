import { randomUUID } from 'node:crypto';
import { setTimeout as pause } from 'node:timers/promises';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { startDemoAgent, type DemoAgent } from '../local/demo-agent/server.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../local/engines/index.js';
import { ensureBucket, ensureLedgerTable } from '../local/resources.js';
import { startHttpApi, type HttpApiHandler } from '../local/runtime/http-api.js';
import { httpTarget } from '../shared/adapters/http-target.js';
import { InvalidCursorError, LedgerFeedsTable } from '../shared/adapters/ledger-feeds.js';
import { InboxTable } from '../shared/adapters/inbox-table.js';
import { coalescingWindowMs, stallDeadline } from '../shared/dispatch/transitions/run.js';
import { LedgerDueIndex } from '../shared/adapters/due-index.js';
import { LedgerTable } from '../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../shared/adapters/s3-blobs.js';
import { ApiError, errorResponse, type ApiResponse } from '../shared/api/http.js';
import { route, type ApiDeps } from '../shared/api/routes.js';
import { DEFAULT_RETRY_POLICY } from '../shared/dispatch/retry.js';
import type { DispatchState } from '../shared/dispatch/state.js';
import { takeDispatchMessage, type IntakeDeps } from '../shared/usecases/intake.js';
import { DUE_PAGE_SIZE, monitorTick, type MonitorDeps } from '../shared/usecases/monitor.js';
import type { TargetPort, TargetRegistration } from '../shared/targets/port.js';
import { loopbackOnly } from '../local/loopback.js';
import type { BenchContext } from './types.js';

/**
 * Detection latency: stall and orphan detection, in monitor ticks after the deadline.
 *
 * A real dispatch goes through the intake use case to the demo agent (a real HTTP target, in process);
 * the agent's callbacks land in the real API routes served in process. A fake clock drives the ledger
 * (intake, API, monitor all take `now` from it); the monitor is ticked once per period of fake time.
 * Wall-clock pieces (the agent's 10 ms steps, its callback retries, HTTP timeouts) only decide when a
 * callback lands, and the bench waits for them before moving the fake clock, so they cannot change
 * the figures.
 */

/** One detection, in fake time. */
export interface Detection {
  /** The deadline the ledger holds: lastActivityAt + stallAfterSeconds, or completedAt + deliveryGraceSeconds. */
  readonly deadline: string;
  /** Time of the first tick whose state shows the detection; null if none did within the ticks run. */
  readonly detectedAt: string | null;
  /** Ticks at or after the deadline up to and including the detecting one (1: the first such tick detected it). */
  readonly ticksAfterDeadline: number | null;
  /** detectedAt − deadline. */
  readonly secondsAfterDeadline: number | null;
  /** Ticks run in all, from the submission. */
  readonly ticks: number;
  /** What the deadline was computed from, as recorded in the state. */
  readonly basis: string;
}

export interface DetectionRun {
  readonly periodSeconds: number;
  /** Seconds from the submission to the tick before the first one (0: ticks at submission + k × period). */
  readonly phaseSeconds: number;
  readonly stall: Detection;
  readonly orphan: Detection;
}

export interface DetectionResult {
  /** The monitor period of the headline figures: 60 s, as the EventBridge schedule in AWS (CONTRACT §4). */
  readonly periodSeconds: number;
  readonly stall: Detection;
  readonly orphan: Detection;
  readonly stallDetectionTicks: number;
  readonly orphanDetectionTicks: number;
  /** Every run: the headline (60 s, ticks aligned on the submission), 60 s off by half a period, 10 s both ways. */
  readonly runs: DetectionRun[];
  readonly notes: string[];
}

const STALL_AFTER_SECONDS = 600;
const DELIVERY_GRACE_SECONDS = 300;
const RETENTION_SECONDS = 90 * 86_400;
/** Wall-clock bound on waiting for the agent's callbacks (they land in tens of milliseconds). */
const CALLBACK_WAIT_MS = 15_000;
const TARGET_TIMEOUT_MS = 10_000;
const DEMO_AGENT = 'demo-agent';

type Kind = 'stall' | 'orphan';


interface Shared {
  readonly ctx: BenchContext;
  readonly dynamodb: DynamoDBClient;
  readonly documents: DynamoDBDocumentClient;
  readonly blobs: S3Blobs;
  readonly agent: DemoAgent;
  readonly targetFor: (registration: TargetRegistration) => TargetPort;
  /** Problems worth a note (callbacks that did not land, ticks that failed...). */
  readonly problems: string[];
}

/** Status codes the in-process API answered, for the notes. */
type Tally = Record<string, number>;

/** The API function's handler (functions/api/function.ts) without the deps its factory builds: route() over `deps`. */
function apiHandler(deps: () => ApiDeps, tally: Tally, problems: string[]): HttpApiHandler {
  return async (event) => {
    const { method } = event.requestContext.http;
    let answer: ApiResponse;
    try {
      answer = await route(deps(), {
        method,
        rawPath: event.rawPath,
        query: event.queryStringParameters ?? {},
        headers: event.headers ?? {},
        body: event.body === undefined ? undefined : Buffer.from(event.body, event.isBase64Encoded ? 'base64' : 'utf8'),
        iamUserId: undefined,
      });
    } catch (error) {
      if (error instanceof ApiError) answer = errorResponse(error);
      else if (error instanceof InvalidCursorError) answer = errorResponse(new ApiError('malformed', error.message));
      else {
        problems.push(`API ${method} ${event.rawPath} failed: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`);
        answer = errorResponse(new ApiError('internal', 'internal error'));
      }
    }
    const key = `${method} ${event.rawPath.split('/')[1] ?? ''} ${answer.statusCode}`;
    tally[key] = (tally[key] ?? 0) + 1;
    return answer;
  };
}

async function waitFor(read: () => Promise<DispatchState | undefined>, done: (state: DispatchState) => boolean): Promise<DispatchState | undefined> {
  const until = Date.now() + CALLBACK_WAIT_MS;
  let state = await read();
  while (!(state && done(state)) && Date.now() < until) {
    await pause(20);
    state = await read();
  }
  return state;
}

const iso = (ms: number): string => new Date(ms).toISOString();

/**
 * One dispatch, on its own table (the monitor acts on everything due in its table, so runs at other fake
 * times must not share one): submitted at S through intake, its callbacks landed, then one monitor tick
 * per period of fake time until the state shows the detection.
 */
async function detect(shared: Shared, kind: Kind, periodSeconds: number, phaseSeconds: number): Promise<Detection & { readonly api: Tally }> {
  const { ctx } = shared;
  const tableName = ctx.uniqueName(`bench-detection-${kind}-${periodSeconds}s`);
  await ensureLedgerTable(shared.dynamodb, tableName);
  // Fake time starts at the wall clock's minute, so retention (TTL) times are sane; it then moves only by hand.
  const start = Math.floor(Date.now() / 60_000) * 60_000;
  let clock = new Date(start);
  const now = (): Date => clock;
  const table = new LedgerTable(shared.documents, { tableName, retentionSeconds: RETENTION_SECONDS });
  await table.putTarget({ name: DEMO_AGENT, kind: 'http', baseUrl: shared.agent.url });

  const tally: Tally = {};
  let apiDeps: ApiDeps | undefined;
  const api = await startHttpApi({
    functionName: 'api',
    region: LOCAL_REGION,
    handler: apiHandler(
      () => {
        if (!apiDeps) throw new Error('the API deps are not built yet');
        return apiDeps;
      },
      tally,
      shared.problems,
    ),
    onError: (error) => shared.problems.push(`API server error: ${error instanceof Error ? error.message : String(error)}`),
  });
  try {
    const work = {
      store: table,
      blobs: shared.blobs,
      targetFor: shared.targetFor,
      callbackUrl: api.url,
      retryPolicy: DEFAULT_RETRY_POLICY,
      now,
      claimSeconds: 60,
    };
    apiDeps = { ...work, feeds: new LedgerFeedsTable(shared.documents, { tableName, retentionSeconds: RETENTION_SECONDS, now }), principals: table, principalMode: 'open', inbox: new InboxTable(shared.documents, { tableName: tableName, retentionSeconds: RETENTION_SECONDS }) };
    const intakeDeps: IntakeDeps = { ...work, principals: table, principalMode: 'open' };
    const monitorDeps: MonitorDeps = { ...work, dueIndex: new LedgerDueIndex(shared.documents, tableName), pageSize: DUE_PAGE_SIZE };

    const dispatchId = ctx.uniqueName(`d-${kind}`);
    const message =
      kind === 'stall'
        ? { dispatchId, origin: 'planner', target: DEMO_AGENT, task: { behavior: 'stall' }, timeouts: { stallAfterSeconds: STALL_AFTER_SECONDS } }
        : {
            dispatchId,
            origin: 'planner',
            target: DEMO_AGENT,
            task: { behavior: 'complete_without_evidence' },
            expectedEvidence: ['out/report.md'],
            timeouts: { deliveryGraceSeconds: DELIVERY_GRACE_SECONDS },
          };
    const intake = await takeDispatchMessage(intakeDeps, { messageId: randomUUID(), body: JSON.stringify(message), senderId: undefined });
    if (intake.outcome !== 'submitted') throw new Error(`intake answered ${intake.outcome}${'reason' in intake && intake.reason ? `: ${intake.reason}` : ''}`);

    // The agent's last callback: the heartbeat for a stall (seq 1, then silence), `completed` for the orphan (seq 2).
    const landed = await waitFor(
      () => table.getState(dispatchId),
      (state) => (kind === 'stall' ? (state.lastSeq ?? 0) >= 1 : state.execution.status === 'completed'),
    );
    if (!landed) throw new Error(`dispatch ${dispatchId} has no state after intake`);
    const callbacksLanded = kind === 'stall' ? (landed.lastSeq ?? 0) >= 1 : landed.execution.status === 'completed';
    if (!callbacksLanded) {
      shared.problems.push(`${kind} @ ${periodSeconds} s: the agent's callbacks had not landed after ${CALLBACK_WAIT_MS} ms; the deadline is taken from the state as the monitor finds it`);
    }

    const detected = (state: DispatchState): boolean =>
      kind === 'stall' ? state.execution.monitorStatus === 'stalled' : state.evidence.outcome === 'orphan_no_delivery';
    // Generous: the deadline is at most stall timeout (+ grace, if completion is only found by lookup) away.
    const horizonSeconds = STALL_AFTER_SECONDS + DELIVERY_GRACE_SECONDS + 5 * periodSeconds;
    const maxTicks = Math.ceil(horizonSeconds / periodSeconds);
    const tickTimes: number[] = [];
    let state: DispatchState | undefined = landed;
    let detectedAt: number | null = null;
    for (let tick = 1; tick <= maxTicks && detectedAt === null; tick += 1) {
      const at = start + (phaseSeconds + tick * periodSeconds) * 1000;
      clock = new Date(at);
      tickTimes.push(at);
      const report = await monitorTick(monitorDeps);
      for (const { subject, error } of report.failures) shared.problems.push(`${kind} @ ${periodSeconds} s, tick ${tick}: ${subject} failed: ${error}`);
      state = await table.getState(dispatchId);
      if (state && detected(state)) detectedAt = at;
    }
    if (!state) throw new Error(`dispatch ${dispatchId} lost its state`);

    let deadline: number;
    let basis: string;
    if (kind === 'stall') {
      // The deadline the ledger holds (CONTRACT §4 v2): the recorded activity, plus the coalescing window
      // (a heartbeat inside it is absorbed, not recorded: silence may have begun as late as its end), plus
      // stallAfterSeconds — so coalescing can never advance a verdict.
      const activity = state.execution.lastActivityAt ?? state.updatedAt;
      deadline = stallDeadline(state);
      basis = `lastActivityAt ${activity} (${(Date.parse(activity) - start) / 1000} s after submission) + coalescing window ${coalescingWindowMs(state) / 1000} s + stallAfterSeconds ${state.timeouts.stallAfterSeconds}`;
    } else {
      const completedAt = state.execution.completedAt;
      if (!completedAt) throw new Error(`orphan run ${dispatchId} never reached a delivery deadline (status ${state.execution.status})`);
      // The grace deadline the check held (a settled state no longer carries it).
      deadline = Date.parse(completedAt) + state.timeouts.deliveryGraceSeconds * 1000;
      basis = `completedAt ${completedAt} (${(Date.parse(completedAt) - start) / 1000} s after submission${callbacksLanded ? ', from the completed callback' : ', found by lookup'}) + deliveryGraceSeconds ${state.timeouts.deliveryGraceSeconds}`;
    }
    if (detectedAt === null) shared.problems.push(`${kind} @ ${periodSeconds} s: not detected within ${maxTicks} ticks (final state: status ${state.execution.status}, monitorStatus ${state.execution.monitorStatus}, evidence ${state.evidence.outcome})`);
    const found = detectedAt;
    return {
      deadline: iso(deadline),
      detectedAt: found === null ? null : iso(found),
      ticksAfterDeadline: found === null ? null : tickTimes.filter((at) => at >= deadline && at <= found).length,
      secondsAfterDeadline: found === null ? null : (found - deadline) / 1000,
      ticks: tickTimes.length,
      basis,
      api: tally,
    };
  } finally {
    await api.close();
  }
}

export async function runDetection(ctx: BenchContext): Promise<DetectionResult> {
  const clientConfig = { region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS, maxAttempts: 3 } as const;
  const dynamodb = loopbackOnly(new DynamoDBClient({ ...clientConfig, endpoint: ctx.endpoints.dynamodbEndpoint }));
  const s3 = loopbackOnly(new S3Client({ ...clientConfig, endpoint: ctx.endpoints.s3Endpoint, forcePathStyle: true }));
  const agentErrors: string[] = [];
  const agent = await startDemoAgent({
    log: (line) => {
      if (line.level === 'error' || line.level === 'warn') agentErrors.push(JSON.stringify(line));
    },
  });
  try {
    const bucket = await ensureBucket(s3, ctx.uniqueName('bench-detection'));
    const targets = new Map<string, TargetPort>();
    const shared: Shared = {
      ctx,
      dynamodb,
      documents: DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } }),
      blobs: new S3Blobs(s3, bucket),
      agent,
      targetFor: (registration) => {
        let target = targets.get(registration.name);
        if (!target) {
          target = httpTarget(registration, { timeoutMs: TARGET_TIMEOUT_MS });
          targets.set(registration.name, target);
        }
        return target;
      },
      problems: [],
    };

    const plans: Array<{ periodSeconds: number; phaseSeconds: number }> = [
      { periodSeconds: 60, phaseSeconds: 0 },
      { periodSeconds: 60, phaseSeconds: 30 },
      { periodSeconds: 10, phaseSeconds: 0 },
      { periodSeconds: 10, phaseSeconds: 5 },
    ];
    const runs: DetectionRun[] = [];
    const apiCalls: Tally = {};
    for (const { periodSeconds, phaseSeconds } of plans) {
      const { api: stallApi, ...stall } = await detect(shared, 'stall', periodSeconds, phaseSeconds);
      const { api: orphanApi, ...orphan } = await detect(shared, 'orphan', periodSeconds, phaseSeconds);
      for (const [key, count] of [...Object.entries(stallApi), ...Object.entries(orphanApi)]) apiCalls[key] = (apiCalls[key] ?? 0) + count;
      runs.push({ periodSeconds, phaseSeconds, stall, orphan });
      ctx.log(
        `detection: period ${periodSeconds} s, phase ${phaseSeconds} s: stall ${stall.ticksAfterDeadline} tick(s) / ${stall.secondsAfterDeadline} s after the deadline, orphan ${orphan.ticksAfterDeadline} tick(s) / ${orphan.secondsAfterDeadline} s`,
      );
    }

    const headline = runs[0];
    if (!headline) throw new Error('no detection run');
    const allWithinOne = runs.every((run) => run.stall.ticksAfterDeadline === 1 && run.orphan.ticksAfterDeadline === 1);
    const notes = [
      `fake clock: intake, API and monitor share one clock the bench moves; tick k runs at submission + phase + k × period. Headline: period 60 s (the AWS schedule, CONTRACT §4), phase 0`,
      `stall: task.behavior "stall", stallAfterSeconds ${STALL_AFTER_SECONDS}; the agent's one heartbeat lands at the submission time, then silence. Detection = first state with execution.monitorStatus "stalled" (the monitor looked the run up at the target, which still says running)`,
      `orphan: task.behavior "complete_without_evidence", expectedEvidence ["out/report.md"], deliveryGraceSeconds ${DELIVERY_GRACE_SECONDS}; the completed callback lands at the submission time. Detection = evidence outcome "orphan_no_delivery" (HEAD on the evidence key in the fauxqs bucket finds nothing)`,
      `callbacks into the in-process API (method, first path segment, status): ${JSON.stringify(apiCalls)} (a 409 is the ledger saying "run not recorded yet", which the agent retries)`,
      `the monitor acts at now ≥ deadline (monitorStep and checkEvidence compare with ≥), so a tick landing exactly on the deadline detects: with phase 0 detection is at the deadline (0 s late); with a phase offset it is the first tick after it, less than one period late. Either way 1 tick`,
      `the stall deadline is the one the ledger holds: recorded lastActivityAt + the coalescing window (a fifth of the stall timeout) + stallAfterSeconds. Activity inside the window is absorbed, not recorded, so silence may have begun as late as the window's end; declaring a stall earlier could advance a verdict (CONTRACT §4 v2). Measured from the agent's last heartbeat, detection is therefore up to one window (here ${(STALL_AFTER_SECONDS * 0.2).toFixed(0)} s) plus one tick late`,
      `target: detection within one tick after the deadline at every period and phase: ${allWithinOne ? 'met' : 'NOT met'}`,
      ...shared.problems,
      ...agentErrors.slice(0, 10).map((line) => `demo agent: ${line}`),
    ];
    return {
      periodSeconds: headline.periodSeconds,
      stall: headline.stall,
      orphan: headline.orphan,
      stallDetectionTicks: headline.stall.ticksAfterDeadline ?? Number.NaN,
      orphanDetectionTicks: headline.orphan.ticksAfterDeadline ?? Number.NaN,
      runs,
      notes,
    };
  } finally {
    await agent.stop();
    dynamodb.destroy();
    s3.destroy();
  }
}
