import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { Session } from 'node:inspector/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { localClients } from '../local/clients.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION, startEngines } from '../local/engines/index.js';
import { ensureBucket, ensureLedgerTable } from '../local/resources.js';
import { lambdaContext } from '../local/runtime/context.js';
import { LedgerTable } from '../shared/adapters/ledger-writes.js';
import { selfTimes } from './cpu-profile.js';
import { floorPipeline, readLedgerItemTemplates } from './floor-pipeline.js';
import { INTAKE_TARGET_TIMEOUT_MS, oursEnvironment } from './ours-environment.js';
import { primeTable } from './table-definition.js';

/**
 * `npm run bench:profile-intake`: where the intake's node CPU per message goes. The real intake handler
 * (functions/intake/handler.ts, configured as the throughput bench configures it) takes batches of 10
 * in-memory SQS records, one invocation at a time, against DynamoDB Local and an in-process target, under
 * V8's sampling profiler. Prints the CPU per message and its self time per message by area (our code,
 * zod, the AWS SDK, node's HTTP and streams, the socket writes, GC), and our code's hottest functions.
 * A diagnosis for the intake throughput target (docs/performance.md), not a figure of `npm run bench`:
 * the profiler itself costs CPU, so its per-message total reads above the bench's.
 *
 *   PIPELINE=ours (default) profiles the real handler; PIPELINE=own-items profiles the target's other
 *   side, the no-logic pipeline writing the ledger's own items (bench/floor-pipeline.ts, as the throughput
 *   bench builds it: copies of the two items the real handler wrote for one sample message).
 *   BATCHES=N (default 400) batches of 10 profiled, after 100 not profiled; PROFILE_OUT=FILE keeps the
 *   .cpuprofile (open it in Chrome's DevTools).
 */

const WARM_BATCHES = 100;
const BATCHES = Number(process.env.BATCHES ?? 400);
if (!Number.isSafeInteger(BATCHES) || BATCHES < 1 || BATCHES > 100_000) throw new RangeError(`BATCHES must be a whole number from 1 to 100,000, got ${JSON.stringify(process.env.BATCHES)}`);
const TARGET = 'profile-agent';
const PIPELINES = ['ours', 'own-items'] as const;
const PIPELINE = process.env.PIPELINE ?? 'ours';
if (!(PIPELINES as readonly string[]).includes(PIPELINE)) throw new RangeError(`PIPELINE must be one of ${PIPELINES.join(', ')}, got ${JSON.stringify(PIPELINE)}`);

function sqsRecord(index: number): SQSRecord {
  // Ids of one length, and the goal names the id (as the throughput bench's does): the own-items pipeline's
  // copies of the sample's items, ids swapped, are then the size ours writes for each message.
  const dispatchId = `p-${String(index).padStart(7, '0')}-${randomUUID()}`;
  const body = JSON.stringify({ dispatchId, origin: 'planner', target: TARGET, task: { goal: `summarise incident ${dispatchId}`, behavior: 'complete' } });
  const now = String(Date.now());
  const messageId = randomUUID();
  return {
    messageId,
    receiptHandle: `profile-${messageId}`,
    body,
    attributes: { ApproximateReceiveCount: '1', SentTimestamp: now, SenderId: 'AROAPLANNERROLE:planner-1', ApproximateFirstReceiveTimestamp: now },
    messageAttributes: {},
    md5OfBody: createHash('md5').update(body).digest('hex'),
    eventSource: 'aws:sqs',
    eventSourceARN: `arn:aws:sqs:${LOCAL_REGION}:000000000000:profile-dispatch`,
    awsRegion: LOCAL_REGION,
  };
}

async function main(): Promise<void> {
  const logDir = mkdtempSync(path.join(tmpdir(), 'profile-intake-'));
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => response.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ runId: `run-${randomUUID()}`, status: 'running' })));
  });
  let engines: Awaited<ReturnType<typeof startEngines>> | undefined;
  let clients: ReturnType<typeof localClients> | undefined;
  let floorClient: DynamoDBClient | undefined;
  try {
    engines = await startEngines({ logDir });
    clients = localClients(engines);
    const tableName = 'profile-intake-ledger';
    const itemsTable = 'profile-intake-own-items';
    const bucket = 'profile-intake-evidence';
    await Promise.all([ensureLedgerTable(clients.dynamodb, tableName), ensureLedgerTable(clients.dynamodb, itemsTable), ensureBucket(clients.s3, bucket)]);
    // Each stream table's first write before any other traffic, as the throughput bench does (table-definition.ts).
    await primeTable(clients.dynamodb, itemsTable);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const target = { name: TARGET, kind: 'http', baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` } as const;
    const setup = new LedgerTable(DynamoDBDocumentClient.from(clients.dynamodb), { tableName, retentionSeconds: 86_400 });
    await setup.putTarget(target);
    Object.assign(process.env, oursEnvironment(engines, tableName, bucket));
    const realHandler = (await import('../functions/intake/handler.js')).handler;
    let next = 0;
    const batch = (): SQSEvent => ({ Records: Array.from({ length: 10 }, () => sqsRecord(next++)) });
    const context = lambdaContext('profile-intake', 30_000, LOCAL_REGION, 1024);
    let handler: (event: SQSEvent) => Promise<SQSBatchResponse> = (event) => realHandler(event, context);
    if (PIPELINE === 'own-items') {
      const sample = sqsRecord(next++);
      const sampled = await realHandler({ Records: [sample] }, context);
      if (sampled.batchItemFailures.length > 0) throw new Error('profile-intake: the sample message for the own items failed');
      const items = await readLedgerItemTemplates(clients.dynamodb, tableName, (JSON.parse(sample.body) as { dispatchId: string }).dispatchId);
      // Its own client, with cacheMiddleware as the intake's hot-path client and the throughput bench's floor have it.
      floorClient = new DynamoDBClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS, endpoint: engines.dynamodbEndpoint, cacheMiddleware: true });
      const floor = floorPipeline({ dynamodb: floorClient, tableName: itemsTable, sortKey: true, items, target, callbackUrl: 'http://127.0.0.1:9/', targetTimeoutMs: INTAKE_TARGET_TIMEOUT_MS });
      handler = (event) => floor.intake(event, context);
    }
    const drive = async (batches: number): Promise<void> => {
      for (let index = 0; index < batches; index += 1) {
        const answer = await handler(batch());
        if (answer.batchItemFailures.length > 0) throw new Error(`profile-intake: ${answer.batchItemFailures.length} records failed`);
      }
    };
    await drive(WARM_BATCHES);
    const session = new Session();
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 250 });
    await session.post('Profiler.start');
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    await drive(BATCHES);
    const cpu = process.cpuUsage(cpuBefore);
    const seconds = (performance.now() - started) / 1000;
    const { profile } = await session.post('Profiler.stop');
    session.disconnect();
    if (process.env.PROFILE_OUT) writeFileSync(process.env.PROFILE_OUT, JSON.stringify(profile));

    const messages = BATCHES * 10;
    const perMessage = (micros: number): string => `${Math.round(micros / messages)} µs`;
    const { total, areas, ours } = selfTimes(profile);
    const lines = [
      `${PIPELINE}: ${messages} messages in batches of 10, ${Math.round(messages / seconds)} messages/s under the profiler; node CPU ${perMessage(cpu.user + cpu.system)} per message (process.cpuUsage), ${perMessage(total)} in the profile's samples`,
      '',
      'self time per message, by area:',
      ...[...areas].sort((a, b) => b[1] - a[1]).map(([area, micros]) => `  ${perMessage(micros).padStart(8)}  ${((micros / total) * 100).toFixed(1).padStart(5)} %  ${area}`),
      '',
      'our code, hottest functions (self time per message):',
      ...[...ours].sort((a, b) => b[1] - a[1]).slice(0, 15).map(([where, micros]) => `  ${perMessage(micros).padStart(8)}  ${where}`),
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    server.close();
    clients?.destroy();
    floorClient?.destroy();
    await engines?.stop();
    rmSync(logDir, { recursive: true, force: true });
  }
}

await main();
