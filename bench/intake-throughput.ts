import { STATE_ITEM } from '../shared/adapters/item-kinds.js';
import { ROUTES, routePath, TARGET_ROUTES } from '@dispatch-ledger/protocol';
import { execFileSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { BatchGetCommand, DynamoDBDocumentClient, PutCommand, type BatchGetCommandOutput } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { Context, LambdaFunctionURLEvent, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { type LocalEndpoints } from '../local/clients.js';
import { INTAKE_TARGET_TIMEOUT_MS, oursEnvironment } from './ours-environment.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../local/engines/index.js';
import { ensureBucket, ensureLedgerTable } from '../local/resources.js';
import { CapacityMeter, itemSizeBytes } from './capacity-meter.js';
import { stateItem } from '../shared/adapters/state-item.js';
import { newWriteId, WRITE_ID_ATTRIBUTE } from '../shared/adapters/ledger-keys.js';
import { LedgerTable } from '../shared/adapters/ledger-writes.js';
import { accepted, submitted } from '../shared/dispatch/transitions/lifecycle.js';
import { DEFAULT_RETRY_POLICY } from '../shared/dispatch/retry.js';
import { DEFAULT_TIMEOUTS } from '../shared/dispatch/message.js';
import type { TargetRegistration } from '../shared/targets/port.js';
import { createFloorTable, floorPipeline, floorStateKey, readLedgerItemTemplates, type LedgerItemTemplates } from './floor-pipeline.js';
import { primeTable } from './table-definition.js';
import {
  createKeyTable,
  createReferenceTables,
  referenceEvidenceKey,
  referencePipeline,
  referenceRecordItem,
  referenceRecordKey,
  type ReferencePipeline,
  type ReferenceTables,
} from './reference-pipeline.js';
import { lambdaContext } from '../local/runtime/context.js';
import { spreadOf, type BenchContext, type LifecycleUsage, type Spread } from './types.js';

/**
 * Intake throughput, ours against the Powertools reference (`bench/reference-pipeline.ts`) and against
 * the bare floor (`bench/floor-pipeline.ts`: the same three round trips with no logic), and the
 * reference's usage per dispatch lifecycle (priced by `bench/prices.ts` next to ours).
 *
 * The pipelines run in this process, on the same engines (DynamoDB Local, fauxqs S3), against the
 * same in-process HTTP target, with SQS events built in memory as Lambda delivers them, each handler
 * invoked directly: one invocation at a time (as one Lambda execution environment runs them), 10
 * records per batch, which every handler's `BatchProcessor` processes concurrently (Powertools' default).
 */

const BATCH_SIZE = 10;
/** A multiple of the five pipelines: each runs in each position of the rotation equally often. */
const ROUNDS = 10;
const TARGET_NAME = 'bench-target';
const ORIGIN = 'planner';
/** Lambda memory the lifecycle's GB-seconds are computed for. */
const MEMORY_MB = 512;
const TARGET_TIMEOUT_MS = INTAKE_TARGET_TIMEOUT_MS;
const SENDER_ID = 'AIDABENCHSENDER0000001';
const QUEUE_ARN = `arn:aws:sqs:${LOCAL_REGION}:000000000000:bench-dispatch`;
const EVIDENCE_REF = 'out/report.md';

// --- Results -----------------------------------------------------------------------------------------

/**
 * `floorLedgerTable`: the floor's requests on a table made as the ledger's (what its definition costs on
 * DynamoDB Local). `floorLedgerItems`: the floor writing copies of our own anchor and state items there
 * (what the ledger's items cost, behind no logic: the fastest any intake writing them could go).
 */
type PipelineName = 'ours' | 'reference' | 'floor' | 'floorLedgerTable' | 'floorLedgerItems';
const PIPELINES: readonly PipelineName[] = ['ours', 'reference', 'floor', 'floorLedgerTable', 'floorLedgerItems'];
const perPipelineOf = <T>(value: (name: PipelineName) => T): Record<PipelineName, T> => ({
  ours: value('ours'),
  reference: value('reference'),
  floor: value('floor'),
  floorLedgerTable: value('floorLedgerTable'),
  floorLedgerItems: value('floorLedgerItems'),
});
const perPipeline = <T>(value: () => T): Record<PipelineName, T> => perPipelineOf(() => value());

export interface RoundResult {
  readonly round: number;
  /** The order the pipelines ran in this round (rotated from round to round). */
  readonly order: readonly PipelineName[];
  readonly messages: number;
  readonly oursMessagesPerSecond: number;
  readonly referenceMessagesPerSecond: number;
  readonly floorMessagesPerSecond: number;
  readonly floorLedgerTableMessagesPerSecond: number;
  readonly floorLedgerItemsMessagesPerSecond: number;
  /** ours ÷ reference in this round. */
  readonly ratioVsPowertools: number;
  /** ours ÷ floor in this round. */
  readonly ratioVsFloor: number;
  /** ours ÷ the floor on the ledger's table definition, in this round. */
  readonly ratioVsFloorLedgerTable: number;
  /** ours ÷ the floor writing the ledger's items, in this round. */
  readonly ratioVsFloorLedgerItems: number;
  /** The floor writing the ledger's items ÷ the bare floor, in this round: the most any intake writing those items could reach. */
  readonly ledgerItemsFloorRatioVsFloor: number;
}

export interface IntakeThroughputResult {
  /** Messages per pipeline, over all measured rounds. */
  readonly messages: number;
  readonly batchSize: 10;
  readonly rounds: number;
  readonly messagesPerRound: number;
  /** Invocations are sequential (one at a time per pipeline); records within a batch run concurrently. */
  readonly invocationConcurrency: 1;
  readonly warmupSeconds: number;
  /** DynamoDB Local's rate during the warm-up's last seconds: small unconditional puts at concurrency 8. */
  readonly warmupPutsPerSecond: number;
  readonly oursMessagesPerSecond: Spread;
  readonly referenceMessagesPerSecond: Spread;
  readonly floorMessagesPerSecond: Spread;
  readonly floorLedgerTableMessagesPerSecond: Spread;
  readonly floorLedgerItemsMessagesPerSecond: Spread;
  /** ours ÷ reference, per interleaved round. */
  readonly ratioVsPowertools: Spread;
  /** ours ÷ floor, per interleaved round (informative). */
  readonly ratioVsFloor: Spread;
  /** ours ÷ the floor on the ledger's table definition, per interleaved round (informative). */
  readonly ratioVsFloorLedgerTable: Spread;
  /** ours ÷ the floor writing the ledger's own items, per interleaved round: the target (≥ 0.9×, bench/run.ts). */
  readonly ratioVsFloorLedgerItems: Spread;
  /**
   * The floor writing the ledger's own items ÷ the bare floor, per interleaved round: the ratio vs the
   * bare floor that an intake with no logic at all, writing what the ledger writes, reaches on these engines.
   */
  readonly ledgerItemsFloorRatioVsFloor: Spread;
  /**
   * CPU per message over the measured rounds, in microseconds: this node process (the pipeline's code,
   * its SDK clients and the in-process target alike) and DynamoDB Local's java process (absent where
   * /proc cannot be read). On a machine with few cores they compete, so this is what sets the rates.
   */
  readonly cpuMicrosecondsPerMessage: Readonly<Record<PipelineName, { readonly node: Spread; readonly dynamodbLocal: Spread | undefined; readonly both: Spread | undefined }>>;
  readonly perRound: readonly RoundResult[];
  /** Over the measured rounds; anything but 0 makes the run throw. */
  readonly batchItemFailures: Readonly<Record<PipelineName, number>>;
  /** The billed size of the state record each writes per dispatch (ours: the ledger's state item; its anchor item comes on top). */
  readonly recordBytes: { readonly ours: number; readonly reference: number };
  /** A duplicate delivered in the same batch as its original (outside the measured rounds). */
  readonly duplicateInSameBatch: {
    readonly ours: DuplicateOutcome;
    readonly reference: DuplicateOutcome;
  };
  readonly notes: string[];
}

export interface DuplicateOutcome {
  /** Batch item failures of the batch holding the original and its duplicate. */
  readonly failuresFirstDelivery: number;
  /** Batch item failures when the failed records are delivered again (as SQS would, after the visibility timeout). */
  readonly failuresOnRedelivery: number;
  /** POST /runs the target saw for the duplicated dispatchId: must be 1. */
  readonly submissionsOfDuplicatedId: number;
}

/** What one reference lifecycle used, plus how it was measured. Assignable to {@link LifecycleUsage}. */
export interface ReferenceLifecycleUsage extends LifecycleUsage {
  readonly lifecycles: number;
  readonly memoryMb: number;
  /** Per step kind, per lifecycle. */
  readonly bySteps: Readonly<Record<string, { readonly calls: number; readonly dynamodbRequests: number; readonly writeUnits: number; readonly readUnits: number; readonly ms: number }>>;
  /** Per DynamoDB operation, per lifecycle. */
  readonly byOperation: Readonly<Record<string, { readonly requests: number; readonly writeUnits: number; readonly readUnits: number; readonly failedConditions: number }>>;
  readonly notes: string[];
}

// --- The target ----------------------------------------------------------------------------------------

/**
 * A minimal CONTRACT §8 target: `POST /runs` → 201 `{ runId: 'r-<dispatchId>-<attempt>', status: 'queued' }`,
 * the same run for the same Idempotency-Key. Counts submissions per dispatchId, to check "exactly once".
 */
class BenchTarget {
  readonly submissions = new Map<string, number>();
  private readonly runs = new Map<string, string>();

  private constructor(
    private readonly server: Server,
    readonly baseUrl: string,
  ) {}

  static async start(): Promise<BenchTarget> {
    let target: BenchTarget | undefined;
    const server = createServer((request, response) => {
      if (!target) throw new Error('target not started');
      target.handle(request, response);
    });
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const { port } = server.address() as AddressInfo;
    target = new BenchTarget(server, `http://127.0.0.1:${port}`);
    return target;
  }

  registration(): TargetRegistration {
    return { name: TARGET_NAME, kind: 'http', baseUrl: this.baseUrl };
  }

  submissionsOf(dispatchId: string): number {
    return this.submissions.get(dispatchId) ?? 0;
  }

  private handle(request: IncomingMessage, response: ServerResponse): void {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.method !== 'POST' || request.url !== TARGET_ROUTES.submit.path) {
        response.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'not found' } }));
        return;
      }
      let body: { dispatchId?: unknown; attempt?: unknown };
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { dispatchId?: unknown; attempt?: unknown };
      } catch {
        response.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'not JSON' } }));
        return;
      }
      const dispatchId = String(body.dispatchId);
      const key = request.headers['idempotency-key'];
      const idempotencyKey = typeof key === 'string' ? key : `${dispatchId}:${String(body.attempt)}`;
      this.submissions.set(dispatchId, this.submissionsOf(dispatchId) + 1);
      let runId = this.runs.get(idempotencyKey);
      if (!runId) {
        runId = `r-${dispatchId}-${String(body.attempt)}`;
        this.runs.set(idempotencyKey, runId);
      }
      response.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ runId, status: 'queued' }));
    });
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

// --- Events and contexts ---------------------------------------------------------------------------------

/** A valid dispatch message body (CONTRACT §1). */
function dispatchBody(dispatchId: string, expectedEvidence: readonly string[] = []): string {
  return JSON.stringify({
    dispatchId,
    origin: ORIGIN,
    target: TARGET_NAME,
    task: { goal: `summarise incident ${dispatchId}`, behavior: 'complete' },
    ...(expectedEvidence.length > 0 ? { expectedEvidence } : {}),
  });
}

/** An SQS record shaped as Lambda delivers it (as `local/runtime/sqs-event-source.ts` builds them). */
function sqsRecord(body: string): SQSRecord {
  const messageId = randomUUID();
  const now = String(Date.now());
  return {
    messageId,
    receiptHandle: `bench-${messageId}`,
    body,
    attributes: { ApproximateReceiveCount: '1', SentTimestamp: now, SenderId: SENDER_ID, ApproximateFirstReceiveTimestamp: now },
    messageAttributes: {},
    md5OfBody: createHash('md5').update(body).digest('hex'),
    eventSource: 'aws:sqs',
    eventSourceARN: QUEUE_ARN,
    awsRegion: LOCAL_REGION,
  };
}

function batchesOf(bodies: readonly string[]): SQSEvent[] {
  const events: SQSEvent[] = [];
  for (let index = 0; index < bodies.length; index += BATCH_SIZE) {
    events.push({ Records: bodies.slice(index, index + BATCH_SIZE).map(sqsRecord) });
  }
  return events;
}

/** A Lambda function URL event (payload format 2.0) carrying a JSON body. */
function functionUrlEvent(method: 'POST', path: string, body: unknown): LambdaFunctionURLEvent {
  const now = new Date();
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: path,
    rawQueryString: '',
    headers: { 'content-type': 'application/json', host: 'bench.lambda-url.local' },
    requestContext: {
      accountId: '000000000000',
      apiId: 'bench',
      domainName: 'bench.lambda-url.local',
      domainPrefix: 'bench',
      http: { method, path, protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 'bench' },
      requestId: randomUUID(),
      routeKey: '$default',
      stage: '$default',
      time: now.toISOString(),
      timeEpoch: now.getTime(),
    },
    body: JSON.stringify(body),
    isBase64Encoded: false,
  };
}

type SqsHandler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;

/** Invokes `handler` once per batch, one at a time; returns the elapsed seconds and the failures reported. */
async function drive(handler: SqsHandler, functionName: string, batches: readonly SQSEvent[], dynamodbPid?: number): Promise<{ seconds: number; failures: number; cpu: { node: number; dynamodbLocal: number | undefined } }> {
  let failures = 0;
  const nodeBefore = process.cpuUsage();
  const engineBefore = dynamodbPid === undefined ? undefined : processCpuSeconds(dynamodbPid);
  const started = performance.now();
  for (const event of batches) {
    const response = await handler(event, lambdaContext(functionName, 30_000, LOCAL_REGION, MEMORY_MB));
    failures += response.batchItemFailures.length;
  }
  const seconds = (performance.now() - started) / 1000;
  const node = process.cpuUsage(nodeBefore);
  const engineAfter = dynamodbPid === undefined ? undefined : processCpuSeconds(dynamodbPid);
  return {
    seconds,
    failures,
    cpu: { node: (node.user + node.system) / 1e6, dynamodbLocal: engineBefore !== undefined && engineAfter !== undefined ? engineAfter - engineBefore : undefined },
  };
}

/** Clock ticks per second of /proc's CPU times (USER_HZ: 100 on Linux builds, where getconf is missing). */
const CLOCK_TICKS = ((): number => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU seconds (user + system) another process has used so far, from /proc (Linux); undefined elsewhere. */
function processCpuSeconds(pid: number): number | undefined {
  try {
    // Fields after the command name (which may hold spaces, in parentheses): utime and stime are the 12th and 13th.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

// --- Ours: the real intake handler ----------------------------------------------------------------------

interface OursSetup {
  readonly handler: SqsHandler;
  readonly tableName: string;
}

let oursSetup: Promise<OursSetup> | undefined;

/**
 * The anchor and the state item ours writes for one dispatch, read back raw: one message through the
 * real handler, outside the measured rounds. `sampleDispatchId` is as long as the rounds' ids.
 */
async function ledgerItemTemplates(handler: SqsHandler, dynamodb: DynamoDBClient, tableName: string, sampleDispatchId: string): Promise<LedgerItemTemplates> {
  const { failures } = await drive(handler, 'dispatch-ledger-intake', batchesOf([dispatchBody(sampleDispatchId)]));
  if (failures > 0) throw new Error(`the sample message for the ledger's items failed (${failures})`);
  return readLedgerItemTemplates(dynamodb, tableName, sampleDispatchId);
}

/**
 * The real `functions/intake/handler.ts`, configured as in AWS through environment variables, before
 * its import (its dependencies are built at import, once per process: the first caller's table wins).
 */
function oursHandler(ctx: BenchContext, dynamodb: DynamoDBClient, s3: S3Client): Promise<OursSetup> {
  oursSetup ??= (async () => {
    const tableName = ctx.uniqueName('intake-ours');
    const bucket = ctx.uniqueName('intake-evidence').toLowerCase();
    await Promise.all([ensureLedgerTable(dynamodb, tableName), ensureBucket(s3, bucket)]);
    Object.assign(process.env, oursEnvironment(ctx.endpoints, tableName, bucket));
    const module = await import('../functions/intake/handler.js');
    return { handler: module.handler, tableName };
  })();
  return oursSetup;
}

// --- Shared plumbing ---------------------------------------------------------------------------------------

function clientsFor(endpoints: LocalEndpoints, options: { cacheMiddleware?: boolean } = {}): { dynamodb: DynamoDBClient; s3: S3Client } {
  const base = { region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS } as const;
  return {
    dynamodb: new DynamoDBClient({ ...base, endpoint: endpoints.dynamodbEndpoint, ...options }),
    s3: new S3Client({ ...base, endpoint: endpoints.s3Endpoint, forcePathStyle: true }),
  };
}

/** Items found for `keys` (strongly consistent), through BatchGet in pages of 100. */
async function getAll(documents: DynamoDBDocumentClient, tableName: string, keys: readonly Record<string, string>[]): Promise<Record<string, unknown>[]> {
  const found: Record<string, unknown>[] = [];
  for (let index = 0; index < keys.length; index += 100) {
    let pending: Record<string, unknown>[] = keys.slice(index, index + 100);
    while (pending.length > 0) {
      const answer: BatchGetCommandOutput = await documents.send(new BatchGetCommand({ RequestItems: { [tableName]: { Keys: pending, ConsistentRead: true } } }));
      found.push(...(answer.Responses?.[tableName] ?? []));
      pending = answer.UnprocessedKeys?.[tableName]?.Keys ?? [];
    }
  }
  return found;
}

/** Small unconditional puts at concurrency 8 for `seconds`; returns the rate of the last half. */
async function warmDynamoDb(dynamodb: DynamoDBClient, tableName: string, seconds: number): Promise<number> {
  await createKeyTable(dynamodb, tableName, 'pk');
  const documents = DynamoDBDocumentClient.from(dynamodb);
  const start = performance.now();
  const end = start + seconds * 1000;
  const half = start + (seconds * 1000) / 2;
  let counted = 0;
  let countedFrom = 0;
  let next = 0;
  const worker = async (): Promise<void> => {
    while (performance.now() < end) {
      const id = next++;
      await documents.send(new PutCommand({ TableName: tableName, Item: { pk: `warm#${id}`, at: new Date().toISOString(), n: id } }));
      const now = performance.now();
      if (now >= half) {
        if (counted === 0) countedFrom = now;
        counted += 1;
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  const span = (performance.now() - countedFrom) / 1000;
  return span > 0 ? Math.round(counted / span) : 0;
}

/** Billed sizes of the state record each pipeline writes for one submitted dispatch. */
function recordSizes(): { ours: number; reference: number } {
  const now = new Date();
  const start = accepted(
    {
      dispatchId: 'o-000000-r0-00000',
      origin: ORIGIN,
      target: TARGET_NAME,
      hop: 0,
      maxHops: 4,
      parentDispatchId: null,
      deliveryMode: 'callback',
      timeouts: { ...DEFAULT_TIMEOUTS },
      writtenAt: now.toISOString(),
    },
    now,
  );
  const state = submitted(start, { kind: 'accepted', runId: 'r-o-000000-r0-00000-1', status: 'queued', requestId: randomUUID() }, DEFAULT_RETRY_POLICY, now);
  const marshalled = (item: Record<string, unknown>): number => itemSizeBytes(marshall(item, { removeUndefinedValues: true }));
  return { ours: marshalled({ ...stateItem(state, { version: 1, changes: state.changes }, 90 * 86_400), [WRITE_ID_ATTRIBUTE]: newWriteId() }), reference: marshalled(referenceRecordItem(state)) };
}

// --- Throughput -------------------------------------------------------------------------------------------

export async function runIntakeThroughput(ctx: BenchContext): Promise<IntakeThroughputResult> {
  const total = ctx.quick ? 1_000 : 10_000;
  const perRound = total / ROUNDS;
  const warmupSeconds = ctx.quick ? 2 : 15;
  const { dynamodb, s3 } = clientsFor(ctx.endpoints);
  const verify = DynamoDBDocumentClient.from(dynamodb);
  const target = await BenchTarget.start();
  const reference: ReferenceTables = { idempotencyTable: ctx.uniqueName('intake-ref-idempotency'), recordTable: ctx.uniqueName('intake-ref-records') };
  const floorTable = ctx.uniqueName('intake-floor');
  // The reference's and the floor's own clients, like the handler's own: nothing meters any of them during the measured rounds.
  const referenceDynamodb = clientsFor(ctx.endpoints).dynamodb;
  const floorDynamodb = clientsFor(ctx.endpoints, { cacheMiddleware: true }).dynamodb;
  const floorLedgerTable = ctx.uniqueName('intake-floor-ledger');
  const floorItemsTable = ctx.uniqueName('intake-floor-items');
  try {
    const [ours] = await Promise.all([
      oursHandler(ctx, dynamodb, s3),
      createReferenceTables(dynamodb, reference),
      createFloorTable(dynamodb, floorTable),
      ensureLedgerTable(dynamodb, floorLedgerTable),
      ensureLedgerTable(dynamodb, floorItemsTable),
    ]);
    // Each stream table's first write right away, before any traffic: on DynamoDB Local a stream table
    // first written after other tables' traffic pays for those records on every write (table-definition.ts).
    // Ours' first write is its target registration.
    await Promise.all([
      new LedgerTable(DynamoDBDocumentClient.from(dynamodb), { tableName: ours.tableName, retentionSeconds: 90 * 86_400 }).putTarget(target.registration()),
      primeTable(dynamodb, floorLedgerTable),
      primeTable(dynamodb, floorItemsTable),
    ]);
    const items = await ledgerItemTemplates(ours.handler, dynamodb, ours.tableName, `s-${randomUUID().slice(0, 8)}-0-0000`);
    const ref = referencePipeline({
      dynamodb: referenceDynamodb,
      s3,
      tables: reference,
      evidenceBucket: 'unused-by-intake',
      target: target.registration(),
      callbackUrl: 'http://127.0.0.1:9/',
      targetTimeoutMs: TARGET_TIMEOUT_MS,
      keyPrefix: `${ctx.uniqueName('ref')}`,
    });
    const floor = floorPipeline({ dynamodb: floorDynamodb, tableName: floorTable, target: target.registration(), callbackUrl: 'http://127.0.0.1:9/', targetTimeoutMs: TARGET_TIMEOUT_MS });
    const floorOnLedger = floorPipeline({ dynamodb: floorDynamodb, tableName: floorLedgerTable, sortKey: true, target: target.registration(), callbackUrl: 'http://127.0.0.1:9/', targetTimeoutMs: TARGET_TIMEOUT_MS });
    const floorWithItems = floorPipeline({ dynamodb: floorDynamodb, tableName: floorItemsTable, sortKey: true, items, target: target.registration(), callbackUrl: 'http://127.0.0.1:9/', targetTimeoutMs: TARGET_TIMEOUT_MS });
    const pipelines: Record<PipelineName, { handler: SqsHandler; functionName: string; prefix: string }> = {
      ours: { handler: ours.handler, functionName: 'dispatch-ledger-intake', prefix: `o-${randomUUID().slice(0, 8)}` },
      reference: { handler: ref.intake, functionName: 'reference-intake', prefix: `r-${randomUUID().slice(0, 8)}` },
      floor: { handler: floor.intake, functionName: 'floor-intake', prefix: `f-${randomUUID().slice(0, 8)}` },
      floorLedgerTable: { handler: floorOnLedger.intake, functionName: 'floor-ledger-intake', prefix: `fl-${randomUUID().slice(0, 8)}` },
      floorLedgerItems: { handler: floorWithItems.intake, functionName: 'floor-items-intake', prefix: `fi-${randomUUID().slice(0, 8)}` },
    };
    /** Where each pipeline keeps its state record, and the key of a dispatch's. */
    const records: Record<PipelineName, { table: string; key: (dispatchId: string) => Record<string, string> }> = {
      ours: { table: ours.tableName, key: STATE_ITEM.key },
      reference: { table: reference.recordTable, key: referenceRecordKey },
      floor: { table: floorTable, key: (id) => floorStateKey(id) },
      floorLedgerTable: { table: floorLedgerTable, key: (id) => floorStateKey(id, true) },
      floorLedgerItems: { table: floorItemsTable, key: STATE_ITEM.key },
    };

    ctx.log(`intake throughput: warming DynamoDB Local for ${warmupSeconds} s`);
    const warmupPutsPerSecond = await warmDynamoDb(dynamodb, ctx.uniqueName('intake-warmup'), warmupSeconds);
    // Then each pipeline once, unmeasured: connections open, code compiled by the JIT.
    const warmMessages = ctx.quick ? 100 : 500;
    for (const name of PIPELINES) {
      const pipeline = pipelines[name];
      const ids = Array.from({ length: warmMessages }, (_, index) => `${pipeline.prefix}-warm-${index}`);
      const { failures } = await drive(pipeline.handler, pipeline.functionName, batchesOf(ids.map((id) => dispatchBody(id))));
      if (failures > 0) throw new Error(`warm-up: ${name} reported ${failures} batch item failures`);
    }

    const rounds: RoundResult[] = [];
    const failures = perPipeline(() => 0);
    const cpu = perPipeline((): { node: number[]; dynamodbLocal: number[] } => ({ node: [], dynamodbLocal: [] }));
    for (let round = 0; round < ROUNDS; round += 1) {
      // Rotated: each pipeline runs in each position in turn, so a drift of the machine hits all alike.
      const order = PIPELINES.map((_, index) => PIPELINES[(index + round) % PIPELINES.length] as PipelineName);
      const rates = perPipeline(() => 0);
      for (const name of order) {
        const pipeline = pipelines[name];
        const ids = Array.from({ length: perRound }, (_, index) => `${pipeline.prefix}-${round}-${index}`);
        const batches = batchesOf(ids.map((id) => dispatchBody(id)));
        const run = await drive(pipeline.handler, pipeline.functionName, batches, ctx.enginePids?.dynamodbLocal);
        rates[name] = perRound / run.seconds;
        failures[name] += run.failures;
        cpu[name].node.push(Math.round((run.cpu.node / perRound) * 1e6));
        if (run.cpu.dynamodbLocal !== undefined) cpu[name].dynamodbLocal.push(Math.round((run.cpu.dynamodbLocal / perRound) * 1e6));

        // Exactly once: one submission per dispatch at the target, one record per dispatch in the table.
        const submittedTwice = ids.filter((id) => target.submissionsOf(id) !== 1);
        const found = await getAll(verify, records[name].table, ids.map((id) => records[name].key(id)));
        const submittedRecords = found.filter((item) => item.phase === 'submitted' && typeof item.runId === 'string').length;
        if (run.failures > 0 || submittedTwice.length > 0 || submittedRecords !== ids.length) {
          throw new Error(
            `round ${round + 1}, ${name}: ${run.failures} batch item failures, ${submittedTwice.length} dispatches not submitted exactly once` +
              ` (e.g. ${submittedTwice[0] ?? '-'}: ${submittedTwice[0] ? target.submissionsOf(submittedTwice[0]) : 0}), ${submittedRecords}/${ids.length} records submitted`,
          );
        }
      }
      rounds.push({
        round: round + 1,
        order,
        messages: perRound,
        oursMessagesPerSecond: Math.round(rates.ours),
        referenceMessagesPerSecond: Math.round(rates.reference),
        floorMessagesPerSecond: Math.round(rates.floor),
        floorLedgerTableMessagesPerSecond: Math.round(rates.floorLedgerTable),
        floorLedgerItemsMessagesPerSecond: Math.round(rates.floorLedgerItems),
        ratioVsPowertools: Number((rates.ours / rates.reference).toFixed(3)),
        ratioVsFloor: Number((rates.ours / rates.floor).toFixed(3)),
        ratioVsFloorLedgerTable: Number((rates.ours / rates.floorLedgerTable).toFixed(3)),
        ratioVsFloorLedgerItems: Number((rates.ours / rates.floorLedgerItems).toFixed(3)),
        ledgerItemsFloorRatioVsFloor: Number((rates.floorLedgerItems / rates.floor).toFixed(3)),
      });
      const cpuOf = (name: PipelineName): string => `${cpu[name].node.at(-1)}+${cpu[name].dynamodbLocal.at(-1) ?? '?'} µs`;
      ctx.log(
        `intake throughput: round ${round + 1}/${ROUNDS}: ours ${Math.round(rates.ours)}/s, reference ${Math.round(rates.reference)}/s, floor ${Math.round(rates.floor)}/s, floor on the ledger's table ${Math.round(rates.floorLedgerTable)}/s, floor writing the ledger's items ${Math.round(rates.floorLedgerItems)}/s` +
          ` (CPU per message, node + DynamoDB Local: ours ${cpuOf('ours')}, reference ${cpuOf('reference')}, floor ${cpuOf('floor')}, floor on the ledger's table ${cpuOf('floorLedgerTable')}, floor writing the ledger's items ${cpuOf('floorLedgerItems')})`,
      );
    }

    const duplicateInSameBatch = {
      ours: await duplicateInBatch(pipelines.ours, target),
      reference: await duplicateInBatch(pipelines.reference, target),
    };
    const sizes = recordSizes();

    return {
      messages: total,
      batchSize: BATCH_SIZE,
      rounds: ROUNDS,
      messagesPerRound: perRound,
      invocationConcurrency: 1,
      warmupSeconds,
      warmupPutsPerSecond,
      oursMessagesPerSecond: spreadOf(rounds.map((round) => round.oursMessagesPerSecond)),
      referenceMessagesPerSecond: spreadOf(rounds.map((round) => round.referenceMessagesPerSecond)),
      floorMessagesPerSecond: spreadOf(rounds.map((round) => round.floorMessagesPerSecond)),
      floorLedgerTableMessagesPerSecond: spreadOf(rounds.map((round) => round.floorLedgerTableMessagesPerSecond)),
      floorLedgerItemsMessagesPerSecond: spreadOf(rounds.map((round) => round.floorLedgerItemsMessagesPerSecond)),
      ratioVsPowertools: spreadOf(rounds.map((round) => round.ratioVsPowertools)),
      ratioVsFloor: spreadOf(rounds.map((round) => round.ratioVsFloor)),
      ratioVsFloorLedgerTable: spreadOf(rounds.map((round) => round.ratioVsFloorLedgerTable)),
      ratioVsFloorLedgerItems: spreadOf(rounds.map((round) => round.ratioVsFloorLedgerItems)),
      ledgerItemsFloorRatioVsFloor: spreadOf(rounds.map((round) => round.ledgerItemsFloorRatioVsFloor)),
      cpuMicrosecondsPerMessage: perPipelineOf((name) => {
        const { node, dynamodbLocal } = cpu[name];
        const measured = dynamodbLocal.length === node.length;
        return { node: spreadOf(node), dynamodbLocal: measured ? spreadOf(dynamodbLocal) : undefined, both: measured ? spreadOf(node.map((value, round) => value + (dynamodbLocal[round] as number))) : undefined };
      }),
      perRound: rounds,
      batchItemFailures: failures,
      recordBytes: sizes,
      duplicateInSameBatch,
      notes: [
        `${total} messages per pipeline in ${ROUNDS} interleaved rounds of ${perRound} (the order of the five pipelines rotated each round), batches of ${BATCH_SIZE}.`,
        'Each handler invoked directly with in-memory SQS events, one invocation at a time (invocation concurrency 1, as in one execution environment); every handler processes the 10 records of a batch concurrently (Powertools BatchProcessor, parallel by default). No SQS receive/delete in the timed path, for any.',
        `Warm-up: ${warmupSeconds} s of small puts on DynamoDB Local at concurrency 8 (REFERENCES advises ~60 s; this is shorter${ctx.quick ? ', --quick' : ''}), then ${warmMessages} unmeasured messages through each pipeline.`,
        'Ours: the real functions/intake/handler.ts (env-configured, PRINCIPAL_MODE=open; the target registration cached for TARGET_CACHE_SECONDS): per message one conditional PutItem (accepted message, the anchor), the submission, one conditional PutItem (state item, with its index entries). test/integration/intake-round-trips.test.ts holds it to those three round trips.',
        'Reference: Powertools makeIdempotent (DynamoDBPersistenceLayer, key dispatchId, payload validation on the whole message) around the same submission and one plain PutItem of the same state (accepted() then submitted()): per message a conditional PutItem INPROGRESS, the submission, the record PutItem, an UpdateItem COMPLETED. Its target is fixed in its configuration (no lookup).',
        'Floor: the same three round trips with no logic (bench/floor-pipeline.ts): a conditional PutItem of a small anchor item, the same submission, a PutItem of a small state item, on a table with no indexes. The same pipeline runs a fourth time on a table made as the ledger table (its key schema, six indexes, stream, TTL), its items entering no index: what that definition alone costs on DynamoDB Local. And a fifth time on another such table writing copies of the anchor and state item ours wrote for one dispatch (ids swapped, index entries and all): the ledger\'s items with no logic, the fastest any intake writing them could go here. Every ledger-definition table takes its first write as soon as it is made (bench/table-definition.ts says why).',
        `Record sizes (billed bytes): ours' state item ${sizes.ours} B (plus its anchor item), the reference's record ${sizes.reference} B (nulls kept as NULL attributes).`,
        'Checked after every round: each dispatchId submitted exactly once at the target, one submitted record per dispatch, 0 batch item failures.',
        `Duplicate inside one batch (outside the rounds): ours ${duplicateInSameBatch.ours.failuresFirstDelivery} failure(s) on first delivery, ${duplicateInSameBatch.ours.failuresOnRedelivery} on redelivery; reference ${duplicateInSameBatch.reference.failuresFirstDelivery} and ${duplicateInSameBatch.reference.failuresOnRedelivery}.`,
      ],
    };
  } finally {
    await target.stop();
    for (const client of [dynamodb, referenceDynamodb, floorDynamodb]) client.destroy();
    s3.destroy();
  }
}

/**
 * A batch of 10 holding a message and, as SQS at-least-once delivery may, a second copy of it (another
 * messageId); the failed records are then delivered again, as SQS would after the visibility timeout.
 */
async function duplicateInBatch(pipeline: { handler: SqsHandler; functionName: string; prefix: string }, target: BenchTarget): Promise<DuplicateOutcome> {
  const ids = Array.from({ length: BATCH_SIZE - 1 }, (_, index) => `${pipeline.prefix}-dup-${index}`);
  const duplicated = ids[0] as string;
  const event: SQSEvent = { Records: [...ids, duplicated].map((id) => sqsRecord(dispatchBody(id))) };
  const first = await pipeline.handler(event, lambdaContext(pipeline.functionName, 30_000, LOCAL_REGION, MEMORY_MB));
  const failed = new Set(first.batchItemFailures.map((failure) => failure.itemIdentifier));
  let failuresOnRedelivery = 0;
  if (failed.size > 0) {
    const again: SQSEvent = { Records: event.Records.filter((record) => failed.has(record.messageId)) };
    failuresOnRedelivery = (await pipeline.handler(again, lambdaContext(pipeline.functionName, 30_000, LOCAL_REGION, MEMORY_MB))).batchItemFailures.length;
  }
  return { failuresFirstDelivery: failed.size, failuresOnRedelivery, submissionsOfDuplicatedId: target.submissionsOf(duplicated) };
}

// --- The reference's lifecycle ------------------------------------------------------------------------------

type StepKind = 'intake' | 'heartbeat' | 'complete' | 'evidenceCheck' | 'operatorReceipt';

/**
 * One dispatch lifecycle through the reference — accept + submit (one intake record, in a batch of 10),
 * 2 heartbeats, completion, evidence check (one HEAD on S3), 1 operator receipt: 7 steps in 6 handler
 * calls — averaged over ~20 lifecycles, after 10 unmeasured ones. DynamoDB from a {@link CapacityMeter} on
 * the reference's only DynamoDB client (the one its Powertools persistence layers use too).
 */
export async function measureReferenceLifecycle(ctx: BenchContext): Promise<ReferenceLifecycleUsage> {
  const lifecycles = ctx.quick ? 10 : 20;
  const { dynamodb: setupDynamodb, s3: setupS3 } = clientsFor(ctx.endpoints);
  const { dynamodb, s3 } = clientsFor(ctx.endpoints);
  const meter = new CapacityMeter();
  meter.attach(dynamodb);
  const s3Calls = new Map<string, number>();
  s3.middlewareStack.add(
    (next, context) => async (args) => {
      const name = (context.commandName ?? 'unknown').replace(/Command$/, '');
      s3Calls.set(name, (s3Calls.get(name) ?? 0) + 1);
      return next(args);
    },
    { step: 'initialize', name: 'benchS3CallCounter' },
  );
  const target = await BenchTarget.start();
  const tables: ReferenceTables = { idempotencyTable: ctx.uniqueName('lifecycle-ref-idempotency'), recordTable: ctx.uniqueName('lifecycle-ref-records') };
  const bucket = ctx.uniqueName('lifecycle-ref-evidence').toLowerCase();
  const verify = DynamoDBDocumentClient.from(setupDynamodb);
  try {
    await Promise.all([createReferenceTables(setupDynamodb, tables), ensureBucket(setupS3, bucket)]);
    const ref = referencePipeline({
      dynamodb,
      s3,
      tables,
      evidenceBucket: bucket,
      target: target.registration(),
      callbackUrl: 'http://127.0.0.1:9/',
      targetTimeoutMs: TARGET_TIMEOUT_MS,
    });

    const prefix = `lc-${randomUUID().slice(0, 8)}`;
    ctx.log('reference lifecycle: 10 unmeasured lifecycles');
    await runLifecycles(ref, setupS3, bucket, `${prefix}-warm`, BATCH_SIZE);

    const meterBefore = meter.snapshot();
    const s3Before = new Map(s3Calls);
    const steps = new Map<StepKind, { calls: number; ms: number; requests: number; writeUnits: number; readUnits: number }>();
    const measured = await runLifecycles(ref, setupS3, bucket, `${prefix}-m`, lifecycles, (kind, ms, spent) => {
      const step = steps.get(kind) ?? { calls: 0, ms: 0, requests: 0, writeUnits: 0, readUnits: 0 };
      step.calls += 1;
      step.ms += ms;
      step.requests += spent.requests;
      step.writeUnits += spent.writeUnits;
      step.readUnits += spent.readUnits;
      steps.set(kind, step);
    }, meter);
    const spent = meter.since(meterBefore);

    // Every lifecycle must have ended where it should: 6 versions, evidence handled, one receipt.
    const records = await getAll(verify, tables.recordTable, measured.map((id) => referenceRecordKey(id)));
    const complete = records.filter((item) => {
      const evidence = item.evidence as { outcome?: unknown } | undefined;
      return item.version === 6 && evidence?.outcome === 'handled' && Array.isArray(item.operatorReceipts) && item.operatorReceipts.length === 1;
    });
    const twice = measured.filter((id) => target.submissionsOf(id) !== 1);
    if (complete.length !== lifecycles || twice.length > 0) {
      throw new Error(`reference lifecycle: ${complete.length}/${lifecycles} records complete, ${twice.length} dispatches not submitted exactly once`);
    }

    const per = (value: number): number => Number((value / lifecycles).toFixed(4));
    const heads = (s3Calls.get('HeadObject') ?? 0) - (s3Before.get('HeadObject') ?? 0);
    const handlerSeconds = [...steps.values()].reduce((sum, step) => sum + step.ms, 0) / 1000;
    const failedConditions = Object.values(spent.byOperation).reduce((sum, operation) => sum + operation.failedConditions, 0);
    const bySteps = Object.fromEntries(
      [...steps.entries()].map(([kind, step]) => [
        kind,
        { calls: per(step.calls), dynamodbRequests: per(step.requests), writeUnits: per(step.writeUnits), readUnits: per(step.readUnits), ms: per(step.ms) },
      ]),
    );
    const byOperation = Object.fromEntries(
      Object.entries(spent.byOperation).map(([operation, totals]) => [
        operation,
        { requests: per(totals.requests), writeUnits: per(totals.writeUnits), readUnits: per(totals.readUnits), failedConditions: per(totals.failedConditions) },
      ]),
    );
    const otherSteps = ['heartbeat', 'complete', 'evidenceCheck', 'operatorReceipt'] as const;
    const directCalls = otherSteps.reduce((sum, kind) => sum + (steps.get(kind)?.calls ?? 0), 0) / lifecycles;
    return {
      dynamodb: { requests: per(spent.requests), readUnits: per(spent.readUnits), writeUnits: per(spent.writeUnits), failedConditions: per(failedConditions) },
      // The dispatch message: 1 SendMessage, and its share of one ReceiveMessage and one DeleteMessageBatch of 10.
      sqsRequests: 1.2,
      lambda: { invocations: Number((0.1 + directCalls).toFixed(4)), gbSeconds: Number(((handlerSeconds / lifecycles) * (MEMORY_MB / 1024)).toFixed(6)) },
      eventBridgeEvents: 0,
      s3: { putRequests: 0, getRequests: per(heads) },
      secretsManagerCalls: 0,
      functionUrlRequests: 4,
      lifecycles,
      memoryMb: MEMORY_MB,
      bySteps,
      byOperation,
      notes: [
        `${lifecycles} lifecycles measured after 10 unmeasured ones; figures are per lifecycle.`,
        'Steps: accept+submit (the intake batch handler, 10 dispatches per invocation: 0.1 invocation each), heartbeat ×2 and completion (run-event handler behind a function URL), evidence check (direct invoke: one HEAD per expected ref on fauxqs S3, 1 ref), 1 operator receipt (function URL): 7 lifecycle steps in 6 handler calls.',
        'Every handler is wrapped by Powertools makeIdempotent on its own DynamoDBPersistenceLayer (same idempotency table, same metered DynamoDB client): a conditional PutItem INPROGRESS and an UpdateItem COMPLETED per call, around one state write (PutItem at intake, UpdateItem after). The reference publishes no events and keeps no history items.',
        `Lambda GB-seconds: measured wall time of each handler call (the intake batch's time ÷ 10) × ${MEMORY_MB} MB (${MEMORY_MB / 1024} GB), on this machine against local engines.`,
        'SQS: modelled (1 send + 0.1 receive + 0.1 delete-batch); the measured events are built in memory. functionUrlRequests: the 4 HTTP calls (2 heartbeats, completion, operator receipt), free beyond their invocations. The target uploading its evidence is not counted (s3 put 0).',
      ],
    };
  } finally {
    await target.stop();
    for (const client of [dynamodb, setupDynamodb]) client.destroy();
    for (const client of [s3, setupS3]) client.destroy();
  }
}

type StepListener = (kind: StepKind, ms: number, spent: { requests: number; writeUnits: number; readUnits: number }) => void;

/** Runs `count` lifecycles (a multiple of 10) through the reference; returns their dispatchIds. */
async function runLifecycles(
  ref: ReferencePipeline,
  setupS3: S3Client,
  bucket: string,
  prefix: string,
  count: number,
  onStep?: StepListener,
  meter?: CapacityMeter,
): Promise<string[]> {
  const timed = async <T>(kind: StepKind, call: () => Promise<T>): Promise<T> => {
    const before = meter?.snapshot();
    const started = performance.now();
    const result = await call();
    const ms = performance.now() - started;
    const spent = meter && before ? meter.since(before) : { requests: 0, writeUnits: 0, readUnits: 0 };
    onStep?.(kind, ms, spent);
    return result;
  };
  const all: string[] = [];
  for (let batch = 0; batch < count / BATCH_SIZE; batch += 1) {
    const ids = Array.from({ length: BATCH_SIZE }, (_, index) => `${prefix}-${batch}-${index}`);
    all.push(...ids);
    // The target's evidence, uploaded out of band (not the reference's usage).
    await Promise.all(ids.map((id) => setupS3.send(new PutObjectCommand({ Bucket: bucket, Key: referenceEvidenceKey(id, 1, EVIDENCE_REF), Body: `report of ${id}\n` }))));
    const event: SQSEvent = { Records: ids.map((id) => sqsRecord(dispatchBody(id, [EVIDENCE_REF]))) };
    // One intake invocation for 10 dispatches: each lifecycle's share is a tenth of it.
    const before = meter?.snapshot();
    const started = performance.now();
    const response = await ref.intake(event, lambdaContext('reference-intake', 30_000, LOCAL_REGION, MEMORY_MB));
    const ms = performance.now() - started;
    if (response.batchItemFailures.length > 0) throw new Error(`reference intake: ${response.batchItemFailures.length} batch item failures`);
    const spent = meter && before ? meter.since(before) : { requests: 0, writeUnits: 0, readUnits: 0 };
    for (let index = 0; index < BATCH_SIZE; index += 1) {
      onStep?.('intake', ms / BATCH_SIZE, { requests: spent.requests / BATCH_SIZE, writeUnits: spent.writeUnits / BATCH_SIZE, readUnits: spent.readUnits / BATCH_SIZE });
    }

    for (const id of ids) {
      const runId = `r-${id}-1`;
      const runEvent = (seq: number, type: 'heartbeat' | 'completed'): LambdaFunctionURLEvent =>
        functionUrlEvent('POST', routePath(ROUTES.postRunEvent, { runId }), {
          dispatchId: id,
          seq,
          type,
          ...(type === 'completed' ? { result: { summary: `done: ${id}` }, evidence: [EVIDENCE_REF] } : {}),
        });
      for (const [seq, type] of [[1, 'heartbeat'], [2, 'heartbeat'], [3, 'completed']] as const) {
        const answer = await timed(type === 'heartbeat' ? 'heartbeat' : 'complete', () => ref.runEvent(runEvent(seq, type), lambdaContext('reference-run-events', 30_000, LOCAL_REGION, MEMORY_MB)));
        if (typeof answer === 'string' || answer.statusCode !== 202) throw new Error(`reference run event ${type} ${seq} for ${id}: ${JSON.stringify(answer)}`);
      }
      const check = await timed('evidenceCheck', () => ref.evidenceCheck({ dispatchId: id, attempt: 1, refs: [EVIDENCE_REF] }, lambdaContext('reference-evidence-check', 30_000, LOCAL_REGION, MEMORY_MB)));
      if (check.outcome !== 'handled') throw new Error(`reference evidence check for ${id}: ${JSON.stringify(check)}`);
      const receipt = await timed('operatorReceipt', () =>
        ref.operatorReceipt(
          functionUrlEvent('POST', routePath(ROUTES.recordReceipt, { dispatchId: id }), { dispatchId: id, receiptId: `rcpt-${id}`, kind: 'delivered', note: 'read by the owner' }),
          lambdaContext('reference-operator-receipts', 30_000, LOCAL_REGION, MEMORY_MB),
        ),
      );
      if (typeof receipt === 'string' || receipt.statusCode !== 201) throw new Error(`reference operator receipt for ${id}: ${JSON.stringify(receipt)}`);
    }
  }
  return all;
}
