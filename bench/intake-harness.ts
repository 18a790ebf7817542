import { createHash, randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { BatchGetCommand, type BatchGetCommandOutput, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { Context, LambdaFunctionURLEvent, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { TARGET_ROUTES } from '@dispatch-ledger/protocol';
import { type LocalEndpoints } from '../local/clients.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../local/engines/index.js';
import { lambdaContext } from '../local/runtime/context.js';
import type { TargetRegistration } from '../shared/targets/port.js';

/**
 * What the intake benches drive their handlers with (intake-throughput.ts, reference-lifecycle.ts): the
 * in-process target, SQS and function URL events built in memory as Lambda delivers them, the driver
 * that invokes a handler batch by batch and reads the CPU it and DynamoDB Local spent, and the clients.
 */

export const BATCH_SIZE = 10;
export const TARGET_NAME = 'bench-target';
export const ORIGIN = 'planner';
/** Lambda memory the lifecycle's GB-seconds are computed for. */
export const MEMORY_MB = 512;
const SENDER_ID = 'AIDABENCHSENDER0000001';
const QUEUE_ARN = `arn:aws:sqs:${LOCAL_REGION}:000000000000:bench-dispatch`;

// --- The target ----------------------------------------------------------------------------------------

/**
 * A minimal CONTRACT §8 target: `POST /runs` → 201 `{ runId: 'r-<dispatchId>-<attempt>', status: 'queued' }`,
 * the same run for the same Idempotency-Key. Counts submissions per dispatchId, to check "exactly once".
 */
export class BenchTarget {
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
export function dispatchBody(dispatchId: string, expectedEvidence: readonly string[] = []): string {
  return JSON.stringify({
    dispatchId,
    origin: ORIGIN,
    target: TARGET_NAME,
    task: { goal: `summarise incident ${dispatchId}`, behavior: 'complete' },
    ...(expectedEvidence.length > 0 ? { expectedEvidence } : {}),
  });
}

/** An SQS record shaped as Lambda delivers it (as `local/runtime/sqs-event-source.ts` builds them). */
export function sqsRecord(body: string): SQSRecord {
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

export function batchesOf(bodies: readonly string[]): SQSEvent[] {
  const events: SQSEvent[] = [];
  for (let index = 0; index < bodies.length; index += BATCH_SIZE) {
    events.push({ Records: bodies.slice(index, index + BATCH_SIZE).map(sqsRecord) });
  }
  return events;
}

/** A Lambda function URL event (payload format 2.0) carrying a JSON body. */
export function functionUrlEvent(method: 'POST', path: string, body: unknown): LambdaFunctionURLEvent {
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

export type SqsHandler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;

/** Invokes `handler` once per batch, one at a time; returns the elapsed seconds and the failures reported. */
export async function drive(handler: SqsHandler, functionName: string, batches: readonly SQSEvent[], dynamodbPid?: number): Promise<{ seconds: number; failures: number; cpu: { node: number; dynamodbLocal: number | undefined } }> {
  let failures = 0;
  // The engine's first (it asks getconf once, on first use: not the handler's CPU).
  const engineBefore = dynamodbPid === undefined ? undefined : processCpuSeconds(dynamodbPid);
  const nodeBefore = process.cpuUsage();
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

/**
 * Clock ticks per second of /proc's CPU times (USER_HZ: 100 on Linux builds, where getconf is missing),
 * asked of getconf on first use, so that importing this module runs nothing.
 */
let clockTicks: number | undefined;
function clockTicksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** CPU seconds (user + system) another process has used so far, from /proc (Linux); undefined elsewhere. */
function processCpuSeconds(pid: number): number | undefined {
  try {
    // Fields after the command name (which may hold spaces, in parentheses): utime and stime are the 12th and 13th.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / clockTicksPerSecond();
  } catch {
    return undefined;
  }
}

// --- Clients -----------------------------------------------------------------------------------------------

export function clientsFor(endpoints: LocalEndpoints, options: { cacheMiddleware?: boolean } = {}): { dynamodb: DynamoDBClient; s3: S3Client } {
  const base = { region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS } as const;
  return {
    dynamodb: new DynamoDBClient({ ...base, endpoint: endpoints.dynamodbEndpoint, ...options }),
    s3: new S3Client({ ...base, endpoint: endpoints.s3Endpoint, forcePathStyle: true }),
  };
}

/** Items found for `keys` (strongly consistent), through BatchGet in pages of 100. */
export async function getAll(documents: DynamoDBDocumentClient, tableName: string, keys: readonly Record<string, string>[]): Promise<Record<string, unknown>[]> {
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
