import { ROUTES, routePath } from '@dispatch-ledger/protocol';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { DescribeTableCommand, DynamoDBClient, UpdateTableCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import { S3Client } from '@aws-sdk/client-s3';
import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../local/engines/index.js';
import { ensureBucket, ensureLedgerTable } from '../local/resources.js';
import { StreamEventSource } from '../local/runtime/stream-event-source.js';
import { CapacityMeter } from './capacity-meter.js';
import { scaleFigures, type ScaleResult, type ScaleWorkloadResult } from './scale-figures.js';
import { httpTarget } from '../shared/adapters/http-target.js';
import { InboxTable } from '../shared/adapters/inbox-table.js';
import { LedgerFeedsTable } from '../shared/adapters/ledger-feeds.js';
import { messageItem } from '../shared/adapters/ledger-items.js';
import { stateItem, stateVersionOf } from '../shared/adapters/state-item.js';
import { STATE_ITEM } from '../shared/adapters/item-kinds.js';
import type { StateVersion } from '../shared/events/derive.js';
import { LEDGER_TABLE_DEFINITION } from '../shared/adapters/ledger-keys.js';
import { LedgerDueIndex } from '../shared/adapters/due-index.js';
import { LedgerTable } from '../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../shared/adapters/s3-blobs.js';
import type { ApiRequest } from '../shared/api/http.js';
import { route, type ApiDeps } from '../shared/api/routes.js';
import { DEFAULT_RETRY_POLICY } from '../shared/dispatch/retry.js';
import type { DispatchState } from '../shared/dispatch/state.js';
import type { AcceptedMessage } from '../shared/dispatch/records.js';
import { takeDispatchMessage, type IntakeDeps, type IntakeResult } from '../shared/usecases/intake.js';
import { DUE_PAGE_SIZE, monitorTick, type MonitorDeps } from '../shared/usecases/monitor.js';
import { batchPutItems } from './batch-load.js';
import type { BenchContext } from './types.js';

/**
 * CONTRACT §14, the write side: 5,000 dispatches/s from one origin to one target, and 100,000 dispatches
 * retrying during a target outage, with no partition key of the table or of an index above 1,000 write
 * units a second. Two workloads run through the real use cases (the intake's `takeDispatchMessage`, the
 * API router, `monitorTick`) on DynamoDB Local; the capacity meter counts every committed change per
 * partition key from the table's own stream (`CapacityMeter.trackPartitionKeys`). A local machine cannot
 * reach 5,000 dispatches/s, so the figure that matters is per dispatch: the hottest key's write units per
 * dispatch × 5,000 is what that key would take at the contract's rate, whatever rate was measured here.
 */

const ORIGIN = 'planner';
const TARGET = 'scale-agent';
/** Messages per intake invocation (the event source mapping's batch size), processed concurrently as BatchProcessor does. */
const INTAKE_BATCH = 10;
/** Intake invocations in flight at once, as several Lambda environments draining one queue. */
const INTAKE_INVOCATIONS = 6;
/**
 * The submission's timeout. The target answers at once, but it shares this process's event loop with
 * dozens of calls in flight: on a loaded machine a 5 s timeout fires before its answer is read.
 */
const TARGET_TIMEOUT_MS = 60_000;
/** API calls in flight at once. */
const API_CONCURRENCY = 40;
const RETENTION_SECONDS = 90 * 86_400;
/**
 * The inbox partitions of this workload (the construct's `inboxShards`): one origin's 5,000 results a
 * second, each entry written when made (this workload neither claims nor acks), 16 keys. A deployment whose
 * origin also claims and acks them all (made 1, claim's move 2, removal 1) needs 32 to stay under 1,000
 * WCU/s each; the default of 1 suits origins up to ~250 results a second.
 */
export const SCALE_INBOX_SHARDS = 16;
/**
 * The outage workload's size: 100,000 (CONTRACT §14), 2,000 with --quick, or SCALE_OUTAGE_DISPATCHES to
 * see the trend at sizes between (bench/run.ts's header).
 */
function outageDispatches(ctx: BenchContext): number {
  const override = process.env.SCALE_OUTAGE_DISPATCHES;
  if (override === undefined || override === '') return ctx.quick ? 2_000 : 100_000;
  const count = Number(override);
  if (!Number.isInteger(count) || count < INTAKE_BATCH) throw new Error(`SCALE_OUTAGE_DISPATCHES=${override}: an integer of at least ${INTAKE_BATCH}`);
  return count;
}
/** How often a long tick logs its progress. */
const PROGRESS_EVERY_MS = 15_000;
/** Outage dispatches cloned and loaded at a time (bounded memory, progress lines). */
const SEED_CHUNK = 5_000;

async function startTarget(down: boolean): Promise<{ url: string; server: Server; submissions: () => number }> {
  let submissions = 0;
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      submissions += 1;
      if (down) {
        response.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'down for maintenance' } }));
        return;
      }
      const { dispatchId } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { dispatchId: string };
      response.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ runId: runIdOf(dispatchId), status: 'running' }));
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, submissions: () => submissions };
}

const runIdOf = (dispatchId: string): string => `r-${dispatchId}`;

/** Runs `work` over `items`, `concurrency` at a time, logging progress every `every` items. */
async function inParallel<T>(items: readonly T[], concurrency: number, work: (item: T) => Promise<void>, progress: (done: number, seconds: number) => void, every: number): Promise<void> {
  let next = 0;
  let done = 0;
  const started = performance.now();
  const worker = async (): Promise<void> => {
    for (let index = next++; index < items.length; index = next++) {
      await work(items[index] as T);
      done += 1;
      if (done % every === 0 || done === items.length) progress(done, (performance.now() - started) / 1000);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}

interface Rig {
  readonly meter: CapacityMeter;
  readonly table: LedgerTable;
  /** Writes items of ledger-items.ts's shapes as they are (fixtures), through the metered client. */
  readonly load: (items: readonly Record<string, unknown>[]) => Promise<void>;
  /** A state item as stored: the state, its version and what its write changed (a clone carries them too). */
  readonly readState: (dispatchId: string) => Promise<StateVersion | undefined>;
  readonly intakeDeps: IntakeDeps;
  readonly apiDeps: ApiDeps;
  readonly monitorDeps: MonitorDeps;
  /** Moves the ledger's clock (every dep reads it). */
  readonly setClock: (at: Date) => void;
  /** Submissions the target has answered so far. */
  readonly submissions: () => number;
  /**
   * Turns the table's stream on (NEW_AND_OLD_IMAGES, as the stack has it) when the rig was made without
   * it: DynamoDB Streams records only the changes made after, so what was loaded before is never metered.
   */
  readonly enableStream: () => Promise<void>;
  /** Feeds the meter every stream record written so far; returns how many. */
  readonly drainStream: () => Promise<number>;
  readonly close: () => Promise<void>;
}

/**
 * A fresh ledger table on the local engines, its use cases' deps on a metered client, and the target.
 * `stream: 'later'` makes the table without its stream, for a workload that loads a fixture first and
 * calls `enableStream` before its measured part.
 */
async function rig(ctx: BenchContext, name: string, targetDown: boolean, stream: 'now' | 'later'): Promise<Rig> {
  const base = { region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS } as const;
  const dynamodb = new DynamoDBClient({ ...base, endpoint: ctx.endpoints.dynamodbEndpoint, maxAttempts: 10 });
  const streams = new DynamoDBStreamsClient({ ...base, endpoint: ctx.endpoints.dynamodbEndpoint });
  const s3 = new S3Client({ ...base, endpoint: ctx.endpoints.s3Endpoint, forcePathStyle: true });
  const meter = new CapacityMeter();
  meter.attach(dynamodb);
  const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
  // No TTL: DynamoDB Local's sweeper would delete the bench's records (its clock is in the past) mid-run.
  const ledger = stream === 'now' ? await ensureLedgerTable(dynamodb, ctx.uniqueName(name), { ttl: false }) : await ensureLedgerTable(dynamodb, ctx.uniqueName(name), { ttl: false, stream: false });
  meter.trackPartitionKeys(ledger.name, LEDGER_TABLE_DEFINITION);
  const bucket = await ensureBucket(s3, ctx.uniqueName(name).toLowerCase());
  const target = await startTarget(targetDown);
  let clock = new Date('2026-12-01T12:00:00.000Z');
  const now = (): Date => clock;
  const retentionSeconds = RETENTION_SECONDS;
  const table = new LedgerTable(documents, { tableName: ledger.name, retentionSeconds, inboxShards: SCALE_INBOX_SHARDS });
  await table.putTarget({ name: TARGET, kind: 'http', baseUrl: target.url });
  const targetFor = ((cached?: ReturnType<typeof httpTarget>) => (registration: Parameters<typeof httpTarget>[0]) => (cached ??= httpTarget(registration, { timeoutMs: TARGET_TIMEOUT_MS })))();
  const common = { store: table, blobs: new S3Blobs(s3, bucket), targetFor, callbackUrl: 'http://127.0.0.1:9', retryPolicy: DEFAULT_RETRY_POLICY, now, claimSeconds: 60 };
  const meterOn = (streamArn: string): StreamEventSource =>
    new StreamEventSource({
      functionName: 'capacity-meter',
      streams,
      streamArn,
      region: LOCAL_REGION,
      batchSize: 1_000,
      handler: async (event) => {
        meter.recordStreamRecords(ledger.name, event.Records);
      },
    });
  let source = ledger.streamArn === undefined ? undefined : meterOn(ledger.streamArn);
  return {
    meter,
    table,
    load: (items) => batchPutItems(documents, ledger.name, items),
    readState: async (dispatchId) => {
      const { Item } = await documents.send(new GetCommand({ TableName: ledger.name, Key: STATE_ITEM.key(dispatchId), ConsistentRead: true }));
      return Item ? stateVersionOf(Item) : undefined;
    },
    intakeDeps: { ...common, principals: table, principalMode: 'open' },
    apiDeps: {
      ...common,
      feeds: new LedgerFeedsTable(documents, { tableName: ledger.name, retentionSeconds, now }),
      principals: table,
      principalMode: 'open',
      inbox: new InboxTable(documents, { tableName: ledger.name, retentionSeconds, inboxShards: SCALE_INBOX_SHARDS }),
      inboxShards: SCALE_INBOX_SHARDS,
    },
    monitorDeps: { ...common, dueIndex: new LedgerDueIndex(documents, ledger.name), pageSize: DUE_PAGE_SIZE },
    setClock: (at) => {
      clock = at;
    },
    submissions: target.submissions,
    enableStream: async () => {
      if (source) throw new Error(`${ledger.name} has its stream already`);
      source = meterOn(await enableLedgerStream(dynamodb, ledger.name));
    },
    drainStream: async () => {
      const reading = source;
      if (!reading) throw new Error(`${ledger.name} has no stream yet: enableStream first`);
      let records = 0;
      for (let idle = 0; idle < 2; ) {
        const handled = await reading.pollOnce();
        records += handled;
        idle = handled === 0 ? idle + 1 : 0;
      }
      return records;
    },
    close: async () => {
      target.server.closeAllConnections();
      await new Promise<void>((resolve) => target.server.close(() => resolve()));
      dynamodb.destroy();
      streams.destroy();
      s3.destroy();
    },
  };
}

/** Turns on the stream the stack gives the table (NEW_AND_OLD_IMAGES); its records start with the next change. */
async function enableLedgerStream(dynamodb: DynamoDBClient, name: string): Promise<string> {
  const updated = await dynamodb.send(new UpdateTableCommand({ TableName: name, StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' } }));
  const streamArn = updated.TableDescription?.LatestStreamArn ?? (await dynamodb.send(new DescribeTableCommand({ TableName: name }))).Table?.LatestStreamArn;
  if (!streamArn) throw new Error(`${name}: UpdateTable turned on no stream`);
  return streamArn;
}

function message(dispatchId: string): { messageId: string; body: string; senderId: string } {
  return {
    messageId: `m-${dispatchId}`,
    body: JSON.stringify({ dispatchId, origin: ORIGIN, target: TARGET, task: { goal: 'summarise the incident' } }),
    senderId: 'bench',
  };
}

/** Every dispatch through the intake use case, in batches of 10 processed concurrently, several batches at once. */
async function intake(ctx: BenchContext, deps: IntakeDeps, ids: readonly string[], expected: IntakeResult['outcome'], label: string): Promise<void> {
  const batches: string[][] = [];
  for (let index = 0; index < ids.length; index += INTAKE_BATCH) batches.push(ids.slice(index, index + INTAKE_BATCH));
  const every = Math.max(1, Math.round(batches.length / 10));
  await inParallel(
    batches,
    INTAKE_INVOCATIONS,
    async (batch) => {
      const results = await Promise.all(batch.map((dispatchId) => takeDispatchMessage(deps, message(dispatchId))));
      const wrong = results.find((result) => result.outcome !== expected);
      if (wrong) throw new Error(`${label}: intake answered ${JSON.stringify(wrong)}, expected ${expected}`);
    },
    (done, seconds) => ctx.log(`  ${label}: ${Math.min(ids.length, done * INTAKE_BATCH).toLocaleString('en-US')} / ${ids.length.toLocaleString('en-US')} dispatches taken in (${seconds.toFixed(1)} s)`),
    every,
  );
}

function apiRequest(method: string, path: string, body: unknown): ApiRequest {
  return { method, rawPath: path, query: {}, headers: { 'content-type': 'application/json' }, body: Buffer.from(JSON.stringify(body)), iamUserId: undefined };
}

/** Per table and index: the hottest key, its share, and what it would take at 5,000 dispatches/s. */
/**
 * Steady load: one origin → one target, each dispatch a full lifecycle — taken in and submitted by the
 * intake, completed through the API (`POST /runs/{runId}/events`), then the monitor's ticks.
 */
async function steady(ctx: BenchContext): Promise<ScaleWorkloadResult> {
  const count = ctx.quick ? 500 : 5_000;
  const rigged = await rig(ctx, 'scale-steady', false, 'now');
  try {
    const t0 = new Date('2026-12-01T12:00:00.000Z');
    const ids = Array.from({ length: count }, (_, index) => `d-steady-${String(index).padStart(6, '0')}`);
    // Warm the code paths off the books, then forget what the warm-up wrote.
    await intake(ctx, rigged.intakeDeps, ['d-steady-warm'], 'submitted', 'warm-up');
    await rigged.drainStream();
    rigged.meter.reset();

    const started = performance.now();
    ctx.log(`scale: steady, ${count.toLocaleString('en-US')} lifecycles ${ORIGIN} → ${TARGET}`);
    await intake(ctx, rigged.intakeDeps, ids, 'submitted', 'steady intake');
    rigged.setClock(new Date(t0.getTime() + 60_000));
    await inParallel(
      ids,
      API_CONCURRENCY,
      async (dispatchId) => {
        const response = await route(rigged.apiDeps, apiRequest('POST', routePath(ROUTES.postRunEvent, { runId: runIdOf(dispatchId) }), { dispatchId, seq: 1, type: 'completed', result: { summary: 'done' } }));
        if (response.statusCode >= 300) throw new Error(`complete ${dispatchId} → ${response.statusCode}: ${response.body}`);
      },
      (done, seconds) => ctx.log(`  steady completions: ${done.toLocaleString('en-US')} / ${count.toLocaleString('en-US')} (${seconds.toFixed(1)} s)`),
      Math.max(1, Math.round(count / 5)),
    );
    // The monitor's ticks after completion, until nothing is due (a completed run without expected evidence has nothing left).
    rigged.setClock(new Date(t0.getTime() + 150_000));
    let ticks = 0;
    for (let due = Number.POSITIVE_INFINITY; due > 0 && ticks < 20; ticks += 1) due = (await monitorTick(rigged.monitorDeps)).due;
    const seconds = (performance.now() - started) / 1000;
    const records = await rigged.drainStream();
    ctx.log(`  steady: ${count} lifecycles in ${seconds.toFixed(1)} s (${(count / seconds).toFixed(0)}/s), ${ticks} monitor tick(s), ${records.toLocaleString('en-US')} stream records metered`);
    return scaleFigures(rigged.meter.partitionWrites(seconds, 3), count, rigged.meter.snapshot().writeUnits, [
      `${count.toLocaleString('en-US')} lifecycles (origin ${ORIGIN} → target ${TARGET}, result delivery by callback, inboxShards ${SCALE_INBOX_SHARDS}): intake (takeDispatchMessage, batches of ${INTAKE_BATCH} concurrently, ${INTAKE_INVOCATIONS} batches at once), completion through the API router (${API_CONCURRENCY} calls at once), ${ticks} monitor tick(s); measured wall time includes all three.`,
      'Write units per partition key from the table stream (NEW_AND_OLD_IMAGES) by the GSI write rules (CapacityMeter.trackPartitionKeys); rejected conditional writes and transactions from the requests. The stream publisher\'s counter writes (COUNTS#n, one per stream batch) and the origin\'s claims and acks are not part of this workload.',
    ]);
  } finally {
    await rigged.close();
  }
}

/**
 * A target outage: dispatches whose submission fails (503) wait `retrying` on the ledger's schedule; the
 * measured part is the monitor retrying every one of them once (they fail again).
 */
async function outage(ctx: BenchContext): Promise<ScaleWorkloadResult> {
  const count = outageDispatches(ctx);
  const rigged = await rig(ctx, 'scale-outage', true, 'later');
  try {
    const t0 = new Date('2026-12-01T12:00:00.000Z');
    rigged.setClock(t0);
    const ids = Array.from({ length: count }, (_, index) => `d-outage-${String(index).padStart(6, '0')}`);
    ctx.log(`scale: outage, seeding ${count.toLocaleString('en-US')} dispatches (target down: each ends retrying)`);
    const seedStarted = performance.now();
    await seedRetrying(ctx, rigged, ids);
    const seedSeconds = (performance.now() - seedStarted) / 1000;
    // The stream goes on now: it holds only what the monitor writes from here. The meter forgets the
    // seeding's requests (their ConsumedCapacity) too.
    await rigged.enableStream();
    rigged.meter.reset();
    ctx.log(`  outage seeded in ${seedSeconds.toFixed(1)} s; the table's stream is on from here`);

    // Past the longest first delay (30 s + 20% jitter): every dispatch is due for its second attempt.
    rigged.setClock(new Date(t0.getTime() + 40_000));
    let retried = 0;
    const started = performance.now();
    let ticks = 0;
    // Each tick works every due shard page by page (no budget here: a bench tick runs to the end);
    // a retried dispatch is rescheduled past this clock, so no dispatch is retried twice.
    // A tick of 100,000 runs for minutes: its progress, by the submissions the target has answered.
    const submittedBefore = rigged.submissions();
    let lastProgress = { at: started, submitted: 0 };
    const progress = setInterval(() => {
      const at = performance.now();
      const submitted = rigged.submissions() - submittedBefore;
      ctx.log(`  outage retries: ${submitted.toLocaleString('en-US')} / ${count.toLocaleString('en-US')} submitted (${((at - started) / 1000).toFixed(0)} s, ${((submitted - lastProgress.submitted) / ((at - lastProgress.at) / 1000)).toFixed(0)}/s lately)`);
      lastProgress = { at, submitted };
    }, PROGRESS_EVERY_MS);
    try {
      for (let due = Number.POSITIVE_INFINITY; due > 0 && retried < count && ticks < 200; ticks += 1) {
        const report = await monitorTick(rigged.monitorDeps);
        due = report.due;
        const failure = report.failures[0];
        if (failure) throw new Error(`monitor failed on ${failure.subject}: ${failure.error}`);
        retried += report.actions.retrying ?? 0;
        ctx.log(`  outage retries: tick ${ticks + 1}, ${report.due} due, ${retried.toLocaleString('en-US')} / ${count.toLocaleString('en-US')} retried`);
      }
    } finally {
      clearInterval(progress);
    }
    const seconds = (performance.now() - started) / 1000;
    if (retried !== count) throw new Error(`${retried} retries for ${count} dispatches: each must be retried once`);
    const drainStarted = performance.now();
    const records = await rigged.drainStream();
    ctx.log(`  outage: ${count} retries in ${seconds.toFixed(1)} s (${(count / seconds).toFixed(0)}/s), ${ticks} tick(s), ${records.toLocaleString('en-US')} stream records metered in ${((performance.now() - drainStarted) / 1000).toFixed(1)} s`);
    return scaleFigures(rigged.meter.partitionWrites(seconds, 3), count, rigged.meter.snapshot().writeUnits, [
      `Seeding (not measured, ${seedSeconds.toFixed(0)} s): the first ${INTAKE_BATCH} dispatches through the real intake (takeDispatchMessage) against a target answering 503, each ending retrying on the attention list; the other ${(count - INTAKE_BATCH).toLocaleString('en-US')} cloned from the first one's state and accepted message with the dispatch id swapped, written with BatchWriteItem in ledger-items.ts's shapes (stateItem, messageItem: every index key recomputed for the new id). The real intake runs at ~50-300 dispatches/s on DynamoDB Local here, too slow to seed 100,000. The table is made without its stream and the stream (NEW_AND_OLD_IMAGES) turned on once seeded (UpdateTable), so it holds only the measured part's changes; each workload runs on engines of its own.`,
      `Measured: the monitor's ticks (monitorTick, due shards in parallel, pages of ${rigged.monitorDeps.pageSize}) retrying each dispatch once (it fails again and is rescheduled): ${ticks} tick(s). Projected figures are per retried dispatch.`,
    ]);
  } finally {
    await rigged.close();
  }
}

/**
 * Dispatches waiting `retrying` for a target that is down. The intake is the real one for a first batch;
 * the rest are clones of its first dispatch (the state and the accepted message, the dispatch id swapped
 * everywhere), stored through ledger-items.ts's codecs so every index key is the one the ledger would
 * write for that id: taking 100,000 dispatches through the intake takes longer than the bench can.
 */
async function seedRetrying(ctx: BenchContext, rigged: Rig, ids: readonly string[]): Promise<void> {
  await intake(ctx, rigged.intakeDeps, ids.slice(0, INTAKE_BATCH), 'retrying', 'outage seeding, real intake');
  const sampleId = ids[0] ?? '';
  const [stored, message] = await Promise.all([rigged.readState(sampleId), rigged.table.getAcceptedMessage(sampleId)]);
  const state = stored?.state;
  if (!stored || state?.phase !== 'accepted' || !state.dueAt || !message) throw new Error(`${sampleId} is not waiting for a retry: ${JSON.stringify(state)}`);
  const stateJson = JSON.stringify(state);
  const messageJson = JSON.stringify(message);
  // Fixed-width ids: no id is a part of another, so swapping the text swaps exactly the id.
  const swapped = (json: string, dispatchId: string): unknown => JSON.parse(json.split(sampleId).join(dispatchId));
  const rest = ids.slice(INTAKE_BATCH);
  for (let start = 0; start < rest.length; start += SEED_CHUNK) {
    const chunk = rest.slice(start, start + SEED_CHUNK);
    await rigged.load(
      chunk.flatMap((dispatchId) => [stateItem(swapped(stateJson, dispatchId) as DispatchState, stored, RETENTION_SECONDS), messageItem(swapped(messageJson, dispatchId) as AcceptedMessage, RETENTION_SECONDS)]),
    );
    ctx.log(`  outage seeding, cloned: ${(INTAKE_BATCH + start + chunk.length).toLocaleString('en-US')} / ${ids.length.toLocaleString('en-US')}`);
  }
}

/**
 * Both workloads, each on engines of its own (`onFreshEngines`, bench/run.ts's `withEngines`). DynamoDB
 * Local looks its stream up on every request with a query that walks the stream records of every table it
 * holds from the oldest (SQLiteDBAccessJob.getStreamDescription, `SELECT MIN(SequenceNumber) FROM us
 * WHERE StreamID = ?`, no index on StreamID): after the steady workload's records, 5,000 outage retries
 * took 22.7 ms of DynamoDB Local's CPU each on the same engine, 4.5 ms on a fresh one (154 s against 54 s).
 */
export async function runScale(onFreshEngines: <T>(part: (ctx: BenchContext) => Promise<T>) => Promise<T>): Promise<ScaleResult> {
  const steadyResult = await onFreshEngines(steady);
  const outageResult = await onFreshEngines(outage);
  return {
    steady: steadyResult,
    outage: outageResult,
    hottestKeyWcuAt5kPerSecond: Math.max(steadyResult.hottestKeyWcuAt5kPerSecond, outageResult.hottestKeyWcuAt5kPerSecond),
    measuredDispatchesPerSecond: steadyResult.dispatchesPerSecond,
  };
}
