import { ROUTES, routePath, TARGET_ROUTES } from '@dispatch-ledger/protocol';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CreateEventBusCommand, EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import { S3Client } from '@aws-sdk/client-s3';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../local/engines/index.js';
import { ensureBucket, ensureLedgerTable } from '../local/resources.js';
import { StreamEventSource } from '../local/runtime/stream-event-source.js';
import { CapacityMeter } from './capacity-meter.js';
import type { CapacityTotals } from './capacity-units.js';
import { publish } from '../shared/adapters/event-bus.js';
import { httpTarget } from '../shared/adapters/http-target.js';
import { InboxTable } from '../shared/adapters/inbox-table.js';
import { LedgerFeedsTable } from '../shared/adapters/ledger-feeds.js';
import { LedgerDueIndex } from '../shared/adapters/due-index.js';
import { LedgerTable } from '../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../shared/adapters/s3-blobs.js';
import { streamChangeOf } from '../shared/adapters/stream-records.js';
import type { ApiDeps } from '../shared/api/routes.js';
import { route } from '../shared/api/routes.js';
import type { ApiRequest } from '../shared/api/http.js';
import { DEFAULT_RETRY_POLICY } from '../shared/dispatch/retry.js';
import { publishStreamBatch } from '../shared/events/derive.js';
import { takeDispatchMessage, type IntakeDeps } from '../shared/usecases/intake.js';
import { DUE_PAGE_SIZE, monitorTick, type MonitorDeps } from '../shared/usecases/monitor.js';
import { billedMs, combined, meanRoundTrips, modelledMs, NO_ROUND_TRIPS, scaled, LATENCY_MS, type DurationModel, type ModelStep, type Work } from './duration-model.js';
import { spreadOf, type BenchContext, type LifecycleUsage } from './types.js';
import { countCommands, watchCommands } from './command-watch.js';

/** Memory of each function as the stack deploys it (infra/constructs/dispatch-ledger.ts). */
const MEMORY_GB = { intake: 0.5, api: 0.5, monitor: 0.5, publisher: 0.25 } as const;
/** Messages per intake invocation (the SQS event source mapping's batch size). */
const INTAKE_BATCH = 10;
/** Stream records per publisher invocation, assumed at steady load (batch size 100, 1 s window). */
const PUBLISHER_RECORDS_PER_INVOCATION = 10;
const TARGET = 'bench-agent';

export interface LifecycleCostResult {
  readonly lifecycles: number;
  /** One lifecycle as the issue defines it: accept, submit, 2 heartbeats, complete, evidence check, 1 operator receipt. */
  readonly usage: LifecycleUsage;
  /** Write units per step, averaged. */
  readonly writeUnitsByStep: Readonly<Record<string, number>>;
  /** Read units per step, averaged. */
  readonly readUnitsByStep: Readonly<Record<string, number>>;
  /** What delivering one small evidence file through the API adds (not part of the lifecycle). */
  readonly evidenceUpload: LifecycleUsage;
  /** Cost of a monitor tick with nothing due (one query per due shard, DUE_SHARDS), which the schedule pays every minute. */
  readonly emptyTick: { readonly readUnits: number; readonly requests: number; readonly ms: number };
  readonly eventsPerLifecycle: Readonly<Record<string, number>>;
  /** One claim with `waitSeconds: 20` on an empty inbox (callback runs only; zero otherwise). */
  readonly emptyLongPoll: { readonly readUnits: number; readonly requests: number };
  /** Lambda by the duration model: each step's own CPU plus its round trips at fixed latencies (bench/duration-model.ts). */
  readonly durationModel: DurationModel;
  readonly notes: readonly string[];
}

/** A target that accepts every submission at once (the same Idempotency-Key → the same run); counts the requests it answered. */
async function startBenchTarget(): Promise<{ url: string; server: Server; requests: () => number }> {
  let requests = 0;
  const body = (request: IncomingMessage): Promise<string> =>
    new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      request.on('error', reject);
    });
  const server = createServer((request, response) => {
    requests += 1;
    void body(request).then(() => {
      const key = String(request.headers['idempotency-key'] ?? 'x');
      response.writeHead(request.method === 'POST' && request.url === TARGET_ROUTES.submit.path ? 201 : 404, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ runId: `r-${key.replace(/[^A-Za-z0-9._-]/g, '-')}`, status: 'running' }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, requests: () => requests };
}

/** The process's CPU time since `since` (`process.cpuUsage()`), in ms: user and system, every thread. */
const cpuMsSince = (since: NodeJS.CpuUsage): number => {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1000;
};

/** Counts S3 requests by pricing tier. */
function countS3(client: S3Client): { put: number; get: number } {
  const counts = { put: 0, get: 0 };
  watchCommands(client, (command) => {
    if (/^(Get|Head)Object/.test(command)) counts.get += 1;
    else counts.put += 1;
  });
  return counts;
}

const ZERO_USAGE: LifecycleUsage = {
  dynamodb: { requests: 0, readUnits: 0, writeUnits: 0, failedConditions: 0 },
  sqsRequests: 0,
  lambda: { invocations: 0, gbSeconds: 0 },
  eventBridgeEvents: 0,
  s3: { putRequests: 0, getRequests: 0 },
  secretsManagerCalls: 0,
  functionUrlRequests: 0,
};

const failedConditionsOf = (totals: CapacityTotals): number => Object.values(totals.byOperation).reduce((sum, operation) => sum + operation.failedConditions, 0);

/**
 * Runs `count` lifecycles through the ledger's real use cases (intake, the API routes, the monitor,
 * the stream publisher) on the local engines, counting every AWS request their adapters send and the
 * capacity DynamoDB reports, and timing each handler-sized step for Lambda GB-seconds: by wall time here,
 * and by the duration model (its CPU time and round trips, bench/duration-model.ts).
 */
export async function runLifecycleCost(ctx: BenchContext, delivery: 'detached' | 'callback' = 'detached', flow: { readonly maxConcurrentRuns?: number } = {}): Promise<LifecycleCostResult> {
  const count = ctx.quick ? 5 : 50;
  const base = { region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS } as const;
  const dynamodb = new DynamoDBClient({ ...base, endpoint: ctx.endpoints.dynamodbEndpoint });
  const meter = new CapacityMeter();
  meter.attach(dynamodb);
  const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
  const s3 = new S3Client({ ...base, endpoint: ctx.endpoints.s3Endpoint, forcePathStyle: true });
  const s3Counts = countS3(s3);
  const streams = new DynamoDBStreamsClient({ ...base, endpoint: ctx.endpoints.dynamodbEndpoint });
  const eventBridge = new EventBridgeClient({ ...base, endpoint: ctx.endpoints.motoEndpoint });
  // PutEvents calls (up to 10 entries each): the publisher's round trips to the bus.
  const commands = countCommands(eventBridge);
  const target = await startBenchTarget();

  try {
    const name = ctx.uniqueName('cost');
    const ledger = await ensureLedgerTable(dynamodb, name);
    const bucket = await ensureBucket(s3, name);
    await eventBridge.send(new CreateEventBusCommand({ Name: name }));
    let clock = new Date('2026-12-01T12:00:00.000Z');
    const now = (): Date => clock;
    const table = new LedgerTable(documents, { tableName: ledger.name, retentionSeconds: 90 * 86_400 });
    // With a limit (CONTRACT §11) every submission takes a slot and the final write gives it back.
    await table.putTarget({ name: TARGET, kind: 'http', baseUrl: target.url, ...(flow.maxConcurrentRuns === undefined ? {} : { maxConcurrentRuns: flow.maxConcurrentRuns }) });
    const blobs = new S3Blobs(s3, bucket);
    const targets = new Map<string, ReturnType<typeof httpTarget>>();
    const common = {
      store: table,
      blobs,
      targetFor: (registration: Parameters<typeof httpTarget>[0]) => {
        const existing = targets.get(registration.name) ?? httpTarget(registration, { timeoutMs: 5_000 });
        targets.set(registration.name, existing);
        return existing;
      },
      callbackUrl: 'http://127.0.0.1:9',
      retryPolicy: DEFAULT_RETRY_POLICY,
      now,
      claimSeconds: 60,
    };
    const intakeDeps: IntakeDeps = { ...common, principals: table, principalMode: 'open' };
    const apiDeps: ApiDeps = { ...common, feeds: new LedgerFeedsTable(documents, { tableName: ledger.name, retentionSeconds: 90 * 86_400, now }), principals: table, principalMode: 'open', inbox: new InboxTable(documents, { tableName: ledger.name, retentionSeconds: 90 * 86_400 }),
      // A long poll's waits move the bench's clock: the polls it makes, and their reads, are the real ones.
      sleep: async (ms: number) => {
        clock = new Date(clock.getTime() + ms);
      },
    };
    const monitorDeps: MonitorDeps = { ...common, dueIndex: new LedgerDueIndex(documents, ledger.name), pageSize: DUE_PAGE_SIZE };

    const request = (method: string, path: string, body?: unknown, origin?: string): ApiRequest => {
      const [rawPath = '', search = ''] = path.split('?');
      return {
        method,
        rawPath,
        query: Object.fromEntries(new URLSearchParams(search)),
        headers: { 'content-type': 'application/json', ...(origin ? { 'x-ledger-origin': origin } : {}) },
        body: body === undefined ? undefined : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)),
        iamUserId: undefined,
      };
    };
    const call = async (method: string, path: string, body?: unknown, origin?: string): Promise<number> => {
      const response = await route(apiDeps, request(method, path, body, origin));
      if (response.statusCode >= 300) throw new Error(`${method} ${path} → ${response.statusCode}: ${response.body}`);
      return response.statusCode;
    };

    type StepEntry = { writeUnits: number; readUnits: number; requests: number; failed: number; ms: number; samples: number[]; s3Put: number; s3Get: number; work: Work[] };
    const units: Record<string, StepEntry> = {};
    const step = async <T>(label: string, work: () => Promise<T>): Promise<T> => {
      const before = meter.snapshot();
      const s3Before = { ...s3Counts };
      const targetBefore = target.requests();
      const cpuBefore = process.cpuUsage();
      const started = performance.now();
      const result = await work();
      const ms = performance.now() - started;
      const cpuMs = cpuMsSince(cpuBefore);
      const spent = meter.since(before);
      const entry = (units[label] ??= { writeUnits: 0, readUnits: 0, requests: 0, failed: 0, ms: 0, samples: [], s3Put: 0, s3Get: 0, work: [] });
      // The duration model's inputs: this call's own CPU and the round trips it waited on.
      const s3Requests = s3Counts.put - s3Before.put + (s3Counts.get - s3Before.get);
      entry.work.push({ cpuMs, roundTrips: { ...NO_ROUND_TRIPS, dynamodb: spent.requests, s3: s3Requests, target: target.requests() - targetBefore } });
      entry.writeUnits += spent.writeUnits;
      entry.readUnits += spent.readUnits;
      entry.requests += spent.requests;
      entry.failed += failedConditionsOf(spent);
      entry.ms += ms;
      entry.samples.push(ms);
      entry.s3Put += s3Counts.put - s3Before.put;
      entry.s3Get += s3Counts.get - s3Before.get;
      return result;
    };

    // Warm the code paths (and DynamoDB Local) once, off the books.
    const warm = ctx.uniqueName('warm');
    await takeDispatchMessage(intakeDeps, { messageId: warm, body: JSON.stringify({ dispatchId: warm, origin: 'planner', target: TARGET, task: { goal: 'warm' }, delivery: { mode: 'detached' } }), senderId: 'bench' });

    const emptyBefore = meter.snapshot();
    const emptyCpu = process.cpuUsage();
    const emptyStarted = performance.now();
    clock = new Date(clock.getTime() - 3_600_000);
    await monitorTick(monitorDeps);
    const emptyMs = performance.now() - emptyStarted;
    const emptyCpuMs = cpuMsSince(emptyCpu);
    const empty = meter.since(emptyBefore);
    const emptyWork: Work = { cpuMs: emptyCpuMs, roundTrips: { ...NO_ROUND_TRIPS, dynamodb: empty.requests } };
    clock = new Date('2026-12-01T12:00:00.000Z');

    const ids = Array.from({ length: count }, (_, index) => `d-cost-${index}-${ctx.uniqueName('x')}`);
    const runs = new Map<string, string>();
    const ref = 'out/report.md';
    for (const dispatchId of ids) {
      const body = JSON.stringify({ dispatchId, origin: 'planner', target: TARGET, task: { goal: 'summarise the incident' }, expectedEvidence: [ref], delivery: { mode: delivery } });
      await step('accept + submit (intake)', () => takeDispatchMessage(intakeDeps, { messageId: `m-${dispatchId}`, body, senderId: 'bench' }));
      const state = await table.getState(dispatchId);
      if (!state?.runId) throw new Error(`${dispatchId} was not submitted: ${JSON.stringify(state)}`);
      runs.set(dispatchId, state.runId);
    }
    // Each run's own timeline from its submission at T0: heartbeats at +30 s and +60 s (an agent's usual
    // cadence, inside the coalescing window of a fifth of the 600 s stall timeout), completion at +90 s.
    const t0 = clock.getTime();
    for (const [dispatchId, runId] of runs) {
      clock = new Date(t0 + 30_000);
      await step('heartbeat 1 (API)', () => call('POST', routePath(ROUTES.postRunEvent, { runId }), { dispatchId, seq: 1, type: 'heartbeat' }));
      clock = new Date(t0 + 60_000);
      await step('heartbeat 2 (API)', () => call('POST', routePath(ROUTES.postRunEvent, { runId }), { dispatchId, seq: 2, type: 'heartbeat' }));
      await step('evidence upload (API, delivery)', () => call('PUT', `${routePath(ROUTES.putEvidence, { dispatchId, ref })}?runId=${encodeURIComponent(runId)}`, '# report\n'.repeat(200)));
      clock = new Date(t0 + 90_000);
      await step('complete (API)', () => call('POST', routePath(ROUTES.postRunEvent, { runId }), { dispatchId, seq: 3, type: 'completed', result: { summary: 'done' }, evidence: [ref] }));
    }
    // The monitor's next tick: evidence already settled at completion, nothing left to check.
    clock = new Date(t0 + 150_000);
    await step('monitor tick after completion', () => monitorTick(monitorDeps));
    for (const dispatchId of ids) {
      const state = await table.getState(dispatchId);
      if (state?.evidence.outcome !== 'handled') throw new Error(`${dispatchId}: evidence outcome ${state?.evidence.outcome}, expected handled`);
    }
    for (const [dispatchId, runId] of runs) {
      await step('operator receipt (API)', () =>
        call(
          'POST',
          routePath(ROUTES.recordReceipt, { dispatchId }),
          { receiptId: `rcpt-${dispatchId}`, runId, kind: 'artifact_acceptance', state: 'accepted', evidenceRef: ref, verifiedBy: 'bench' },
          'planner',
        ),
      );
    }

    let emptyLongPoll = { readUnits: 0, requests: 0 };
    if (delivery === 'callback') {
      // An origin waiting on an empty inbox: one claim with a 20 s long poll that finds nothing.
      const before = meter.snapshot();
      const answer = await route(apiDeps, request('POST', routePath(ROUTES.inboxClaim, { origin: 'nobody-waiting' }), { mode: 'after_turn', waitSeconds: 20 }, 'nobody-waiting'));
      if (answer.statusCode !== 200) throw new Error(`empty long poll → ${answer.statusCode}: ${answer.body}`);
      const spent = meter.since(before);
      emptyLongPoll = { readUnits: spent.readUnits, requests: spent.requests };
      // The origin takes its results back (CONTRACT §10): one claim and one ack per result, as an agent
      // that claims between turns does; the result itself was made in the completion's write.
      const acked = new Set<string>();
      for (let index = 0; index < ids.length; index += 1) {
        const claimed = await step('claim (API, inbox)', () => route(apiDeps, request('POST', routePath(ROUTES.inboxClaim, { origin: 'planner' }), { mode: 'after_turn', max: 1 }, 'planner')));
        const { claimToken, results } = JSON.parse(claimed.body) as { claimToken?: string; results?: Array<{ resultId: string; dispatchId: string }> };
        const result = results?.[0];
        if (!claimToken || !result || !ids.includes(result.dispatchId)) throw new Error(`claim ${index}: no result of these lifecycles: ${claimed.body}`);
        acked.add(result.dispatchId);
        await step('ack (API, inbox)', () => call('POST', routePath(ROUTES.inboxAck, { origin: 'planner', resultId: result.resultId }), { claimToken }, 'planner'));
      }
      if (acked.size !== ids.length) throw new Error(`${ids.length - acked.size} results were never claimed`);
    }

    // The publisher: every committed change of these lifecycles, from the table's real stream, to the bus.
    const published: Record<string, number> = {};
    let publishMs = 0;
    let publishCpuMs = 0;
    let records = 0;
    const source = new StreamEventSource({
      functionName: 'publisher',
      streams,
      streamArn: ledger.streamArn,
      region: LOCAL_REGION,
      handler: async (event) => {
        const started = performance.now();
        const cpuBefore = process.cpuUsage();
        const report = await publishStreamBatch(event.Records.map(streamChangeOf), { publish: (events) => publish(events, { client: eventBridge, busName: name }) });
        publishCpuMs += cpuMsSince(cpuBefore);
        publishMs += performance.now() - started;
        records += event.Records.length;
        for (const published1 of report.published) {
          const mine = 'dispatchId' in published1.detail && typeof published1.detail.dispatchId === 'string' && ids.includes(published1.detail.dispatchId);
          if (mine) published[published1.detailType] = (published[published1.detailType] ?? 0) + 1;
        }
        return { batchItemFailures: [...report.batchItemFailures] };
      },
    });
    for (let poll = 0, idle = 0; poll < 200 && idle < 3; poll += 1) idle = (await source.pollOnce()) === 0 ? idle + 1 : 0;

    const per = (value: number): number => value / count;
    const lifecycleSteps = Object.keys(units).filter((label) => !label.includes('delivery'));
    const sum = (labels: readonly string[], pick: (entry: (typeof units)[string]) => number): number => labels.reduce((total, label) => total + pick(units[label] ?? { writeUnits: 0, readUnits: 0, requests: 0, failed: 0, ms: 0, samples: [], s3Put: 0, s3Get: 0, work: [] }), 0);
    // The median call, not the mean: one slow call (a JIT warm-up, a GC pause of DynamoDB Local) is not the typical invocation.
    const msOf = (label: string): number => (units[label]?.samples.length ? spreadOf(units[label]?.samples ?? []).median : 0);
    // Every call to the API is an invocation of it: '(API)' and '(API, inbox)' alike.
    const apiSteps = lifecycleSteps.filter((label) => /\(API[,)]/.test(label));
    const eventsPerLifecycle = Object.fromEntries(Object.entries(published).map(([detailType, n]) => [detailType, per(n)]));
    const events = Object.values(eventsPerLifecycle).reduce((total, n) => total + n, 0);
    // Records of the warm-up dispatch are in the stream too: attribute records by share of events.
    const recordsPerLifecycle = per(records) * (count / (count + 1));

    const usage: LifecycleUsage = {
      dynamodb: {
        requests: per(sum(lifecycleSteps, (entry) => entry.requests)),
        readUnits: per(sum(lifecycleSteps, (entry) => entry.readUnits)) - per(empty.readUnits),
        writeUnits: per(sum(lifecycleSteps, (entry) => entry.writeUnits)),
        failedConditions: per(sum(lifecycleSteps, (entry) => entry.failed)),
      },
      // Send 1 + the event source mapping's receive and delete, each batched by 10.
      sqsRequests: 1 + 2 / INTAKE_BATCH,
      lambda: {
        invocations: 1 / INTAKE_BATCH + apiSteps.length + recordsPerLifecycle / PUBLISHER_RECORDS_PER_INVOCATION,
        gbSeconds:
          (msOf('accept + submit (intake)') * MEMORY_GB.intake +
            apiSteps.reduce((total, label) => total + msOf(label), 0) * MEMORY_GB.api +
            Math.max(0, (per(units['monitor tick after completion']?.ms ?? 0) * count - emptyMs) / count) * MEMORY_GB.monitor +
            per(publishMs) * (count / (count + 1)) * MEMORY_GB.publisher) /
          1000,
      },
      eventBridgeEvents: events,
      s3: { putRequests: per(sum(lifecycleSteps, (entry) => entry.s3Put)), getRequests: per(sum(lifecycleSteps, (entry) => entry.s3Get)) },
      secretsManagerCalls: 0,
      functionUrlRequests: apiSteps.length,
    };
    const upload = units['evidence upload (API, delivery)'];
    const evidenceUpload: LifecycleUsage = {
      ...ZERO_USAGE,
      dynamodb: { requests: per(upload?.requests ?? 0), readUnits: per(upload?.readUnits ?? 0), writeUnits: per(upload?.writeUnits ?? 0), failedConditions: per(upload?.failed ?? 0) },
      lambda: { invocations: 1, gbSeconds: (msOf('evidence upload (API, delivery)') * MEMORY_GB.api) / 1000 },
      s3: { putRequests: per(upload?.s3Put ?? 0), getRequests: per(upload?.s3Get ?? 0) },
      functionUrlRequests: 1,
    };

    // The duration model: the median call's own CPU plus its round trips at fixed latencies (bench/duration-model.ts).
    const median = (values: readonly number[]): number => (values.length > 0 ? spreadOf(values).median : 0);
    const modelStep = (label: string, memoryGb: number, how: { readonly concurrent?: number; readonly billed?: boolean }): ModelStep => {
      const samples = units[label]?.work ?? [];
      const modelled = median(samples.map((work) => (how.billed ? billedMs(modelledMs(work, how)) : modelledMs(work, how))));
      return { wallMs: msOf(label), cpuMs: median(samples.map((work) => work.cpuMs)), roundTrips: meanRoundTrips(samples), modelledMs: modelled, gbSeconds: (modelled * memoryGb) / 1000 };
    };
    /** A lifecycle's share of work done for all of them at once (the monitor's tick, the publisher's batches). */
    const shareStep = (work: Work, wallMs: number, memoryGb: number): ModelStep => ({ wallMs, cpuMs: work.cpuMs, roundTrips: work.roundTrips, modelledMs: modelledMs(work), gbSeconds: (modelledMs(work) * memoryGb) / 1000 });
    const tick = units['monitor tick after completion'];
    const tickWork = (tick?.work ?? []).reduce((total, work) => combined(total, work), { cpuMs: 0, roundTrips: NO_ROUND_TRIPS });
    const steps: Record<string, ModelStep> = {
      'accept + submit (intake)': modelStep('accept + submit (intake)', MEMORY_GB.intake, { concurrent: INTAKE_BATCH }),
      ...Object.fromEntries(apiSteps.map((label) => [label, modelStep(label, MEMORY_GB.api, { billed: true })])),
      'monitor tick after completion': shareStep(scaled(combined(tickWork, emptyWork, -1), 1 / count), Math.max(0, ((tick?.ms ?? 0) - emptyMs) / count), MEMORY_GB.monitor),
      // The warm-up dispatch's records are in the stream too (as above).
      'publisher (stream batches)': shareStep(scaled({ cpuMs: publishCpuMs, roundTrips: { ...NO_ROUND_TRIPS, eventBridge: commands.get('PutEvents') ?? 0 } }, 1 / (count + 1)), publishMs / (count + 1), MEMORY_GB.publisher),
    };
    const durationModel: DurationModel = {
      gbSeconds: Object.values(steps).reduce((total, entry) => total + entry.gbSeconds, 0),
      evidenceUploadGbSeconds: modelStep('evidence upload (API, delivery)', MEMORY_GB.api, { billed: true }).gbSeconds,
      steps,
      latencyMs: LATENCY_MS,
    };
    return {
      lifecycles: count,
      usage,
      writeUnitsByStep: Object.fromEntries(Object.entries(units).map(([label, entry]) => [label, per(entry.writeUnits)])),
      readUnitsByStep: Object.fromEntries(Object.entries(units).map(([label, entry]) => [label, per(entry.readUnits)])),
      evidenceUpload,
      emptyTick: { readUnits: empty.readUnits, requests: empty.requests, ms: emptyMs },
      emptyLongPoll,
      eventsPerLifecycle,
      durationModel,
      notes: [
        `${count} lifecycles through the real use cases (takeDispatchMessage, the API router, monitorTick, the stream publisher) on DynamoDB Local, fauxqs S3 and moto EventBridge; DynamoDB units from ConsumedCapacity (failed conditions and transactions modelled per AWS rules, bench/capacity-units.ts).`,
        `Lambda: intake ${MEMORY_GB.intake * 1024} MB in batches of ${INTAKE_BATCH}; API ${MEMORY_GB.api * 1024} MB, one invocation per call; monitor ${MEMORY_GB.monitor * 1024} MB, only the check work above an empty tick; publisher ${MEMORY_GB.publisher * 1024} MB at ${PUBLISHER_RECORDS_PER_INVOCATION} stream records per invocation. Wall-time durations are measured on this machine against local engines (in-process, no cold starts).`,
        `Duration model: each step's CPU time on this machine (process.cpuUsage() around the call: the handler's code and its SDK clients, plus the in-process bench target's share of a submission) plus its round trips at the fixed latencies of bench/prices.ts: DynamoDB requests as the capacity meter counts them, S3 requests, requests to the target, PutEvents calls. The intake's batch of ${INTAKE_BATCH} overlaps its records' round trips; an API invocation is billed rounded up to the millisecond; the monitor's share is what its tick did beyond an empty one. No cold starts.`,
        `The monitor's schedule costs the same whatever the load: ${empty.requests} requests and ${empty.readUnits} read units per tick (43,200 ticks a month), priced separately as a fixed cost.`,
        'Heartbeats at +30 s and +60 s fall inside the coalescing window (a fifth of the stall timeout since the last recorded activity) and write nothing; a run that keeps heartbeating records its activity once per window, 3 WRU each (the state and its due index entry).',
        'SQS: 1 SendMessage per dispatch plus the event source mapping\'s ReceiveMessage and DeleteMessageBatch per 10 (its empty long polls are a fixed cost). Secrets Manager: cached per execution environment, so ~0 per lifecycle.',
      ],
    };
  } finally {
    target.server.close();
    dynamodb.destroy();
    s3.destroy();
    streams.destroy();
    eventBridge.destroy();
  }
}
