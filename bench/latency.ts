import { ROUTES, routePath, TARGET_ROUTES, type RouteSpec } from '@dispatch-ledger/protocol';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent, createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { CreateTableCommand, DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { localClients, type LocalClients } from '../local/clients.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../local/engines/index.js';
import { LOCAL_FUNCTIONS } from '../local/functions.js';
import { startPlatform, type RunningPlatform } from '../local/platform.js';
import { ensureQueue } from '../local/resources.js';
import { SqsEventSource, type SqsHandler } from '../local/runtime/sqs-event-source.js';
import { InboxTable } from '../shared/adapters/inbox-table.js';
import { LedgerTable } from '../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../shared/adapters/s3-blobs.js';
import { claimResults, pollIntervalMs, type InboxDeps } from '../shared/usecases/inbox.js';
import { CapacityMeter } from './capacity-meter.js';
import { definitionOf, primeTable } from './table-definition.js';
import { percentile, spreadOf, type BenchContext, type Spread } from './types.js';

/**
 * Latency (CONTRACT §18), on the local platform as `npm start` runs it (`startPlatform`: the intake behind
 * the local SQS event source, the API behind its local function URL):
 * - dispatch: from `SendMessage` to the target receiving `POST /runs`, beside a bare forwarder on the same
 *   engines at the same load (an event source on a queue of its own whose handler posts each body to the
 *   same target and nothing else), in alternating rounds;
 * - result: from just before a target's final event to a waiting inject claim returning it, beside the
 *   inbox's poll spacing, with the reads of each claim counted against §10's budget.
 */

/** The load, the same for both pipelines: messages sent one by one with SendMessage at this rate. */
const MESSAGES_PER_SECOND = 10;
const TARGET = 'bench-latency';
const ORIGIN = 'planner';
/** A claim as an agent between turns waits for its injected results (CONTRACT §10). */
const CLAIM = { mode: 'inject', max: 1, leaseSeconds: 60, waitSeconds: 20 } as const;
/** CONTRACT §10: an empty 20 s long poll reads at most this many units. */
const LONG_POLL_READ_BUDGET = 5;
/** Result lanes through the platform's API at once, each an origin of its own (a metered lane runs beside them). */
const API_LANES = 4;
/** The earliest a final event follows its claim: the claim's first pass has found the inbox empty by then. */
const CLAIM_SETTLE_MS = 300;
/** Spreads the final events evenly over the claim's poll cycle (a low-discrepancy sequence, no randomness). */
const GOLDEN = 0.6180339887498949;
const ROUND_TIMEOUT_MS = 30_000;

const sizes = (quick: boolean) => ({ rounds: quick ? 2 : 5, messagesPerRound: quick ? 30 : 100, claimsPerLane: quick ? 3 : 25, meteredClaims: quick ? 4 : 20, pacedPuts: quick ? 30 : 300 });
/** Paced puts not counted at the start of each table's series (the engine's first writes to a new table). */
const PACED_PUT_WARMUP = 20;

/** One pipeline's latency from send to the target, in ms, over every message of every round. */
export interface DispatchLatency {
  readonly messages: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Send → the handler invoked: the event source's polling (its ReceiveMessage long poll on fauxqs). */
  readonly pollP50Ms: number;
  readonly pollP99Ms: number;
  /** The handler invoked → the target receiving the run. */
  readonly handlerP50Ms: number;
  readonly handlerP99Ms: number;
}

export interface LatencyResult {
  readonly load: { readonly messagesPerSecond: number; readonly messagesPerRound: number; readonly rounds: number; readonly batchSize: number };
  readonly ours: DispatchLatency;
  readonly forwarder: DispatchLatency;
  /** ours p99 ÷ the forwarder's p99. */
  readonly p99RatioVsForwarder: number;
  /**
   * What the one write our intake makes before it submits costs on this engine (the accepted message's
   * conditional put; the forwarder writes nothing): a small conditional put's round trip from this
   * process, one at a time, a put to each of two tables per tick at the load's pace (back to back, the
   * order flipped each tick): a bare table, and one with the ledger's keys, six indexes and stream.
   */
  readonly enginePut: { readonly puts: number; readonly bare: Percentiles; readonly ledgerDefinition: Percentiles };
  readonly result: {
    /** Claims through the platform's API, each waiting when its result's final event was posted. */
    readonly claims: number;
    readonly p50Ms: number;
    readonly p99Ms: number;
    readonly maxMs: number;
    /** How far apart an inject claim's passes over the inbox are (shared/usecases/inbox.ts `pollIntervalMs`). */
    readonly pollIntervalMs: number;
    readonly inboxShards: number;
    /** The same claims made by the claim use case on a metered client (the API's code, in this process): their reads. */
    readonly metered: { readonly claims: number; readonly p50Ms: number; readonly readUnitsPerClaim: Spread; readonly inboxReadUnitsPerClaim: Spread; readonly inboxQueriesPerClaim: Spread };
    /** One 20 s inject claim on an empty inbox, in real time. */
    readonly emptyLongPoll: { readonly readUnits: number; readonly requests: number; readonly seconds: number };
  };
  readonly notes: readonly string[];
}

interface Percentiles {
  readonly p50Ms: number;
  readonly p99Ms: number;
}

interface Sent {
  readonly at: number;
  readonly wall: number;
  readonly messageId: string;
}

/** An in-process target: records when each `POST /runs` arrived, by dispatch id, and accepts it. */
async function startLatencyTarget(): Promise<{ url: string; arrivals: Map<string, number>; submissions: Map<string, number>; close: () => void }> {
  const arrivals = new Map<string, number>();
  const submissions = new Map<string, number>();
  const server = createServer((request, response) => {
    const arrived = performance.now();
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const submit = request.method === TARGET_ROUTES.submit.method && request.url === TARGET_ROUTES.submit.path;
      const dispatchId = submit ? dispatchIdOf(Buffer.concat(chunks).toString('utf8')) : undefined;
      if (dispatchId === undefined) {
        response.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'not a submission' } }));
        return;
      }
      if (!arrivals.has(dispatchId)) arrivals.set(dispatchId, arrived);
      submissions.set(dispatchId, (submissions.get(dispatchId) ?? 0) + 1);
      response.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ runId: runIdOf(dispatchId), status: 'running' }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, arrivals, submissions, close: () => server.close() };
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null;

function dispatchIdOf(body: string): string | undefined {
  try {
    const parsed: unknown = JSON.parse(body);
    return isRecord(parsed) && typeof parsed.dispatchId === 'string' ? parsed.dispatchId : undefined;
  } catch {
    return undefined;
  }
}

const runIdOf = (dispatchId: string): string => `run-${dispatchId}`;

async function until(what: string, done: () => boolean | Promise<boolean>, everyMs = 5): Promise<void> {
  const deadline = performance.now() + ROUND_TIMEOUT_MS;
  while (!(await done())) {
    if (performance.now() > deadline) throw new Error(`latency: timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Sends `bodies` one by one at MESSAGES_PER_SECOND, each send time taken just before its SendMessage. */
async function sendPaced(sqs: SQSClient, queueUrl: string, bodies: ReadonlyArray<{ readonly dispatchId: string; readonly body: string }>): Promise<Map<string, Sent>> {
  const sent = new Map<string, Sent>();
  const start = performance.now();
  for (const [index, { dispatchId, body }] of bodies.entries()) {
    const wait = start + (index * 1000) / MESSAGES_PER_SECOND - performance.now();
    if (wait > 0) await sleep(wait);
    const at = performance.now();
    const wall = Date.now();
    const answer = await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: body }));
    sent.set(dispatchId, { at, wall, messageId: answer.MessageId ?? '' });
  }
  return sent;
}

/** When the platform's intake was invoked with each message (its invocation log; wall-clock ms). */
function intakeInvocations(file: string, functionName: string): Map<string, number> {
  const invoked = new Map<string, number>();
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const report: unknown = JSON.parse(line);
    if (!isRecord(report) || report.function !== functionName || typeof report.at !== 'string' || !Array.isArray(report.items)) continue;
    for (const item of report.items) if (typeof item === 'string' && !invoked.has(item)) invoked.set(item, Date.parse(report.at));
  }
  return invoked;
}

/** The bare forwarder's handler: each record's body posted to the target's `POST /runs`, and nothing else. */
function forwarderHandler(targetUrl: string, invoked: Map<string, number>): SqsHandler {
  const agent = new Agent({ keepAlive: true });
  const post = (body: string): Promise<number> =>
    new Promise((resolve, reject) => {
      const request = httpRequest(`${targetUrl}${TARGET_ROUTES.submit.path}`, { method: TARGET_ROUTES.submit.method, agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode ?? 0));
      });
      request.on('error', reject);
      request.end(body);
    });
  return async (event) => {
    const at = Date.now();
    for (const record of event.Records) invoked.set(record.messageId, at);
    const statuses = await Promise.all(event.Records.map((record) => post(record.body).catch(() => 0)));
    return { batchItemFailures: event.Records.filter((_, index) => statuses[index] !== 201).map((record) => ({ itemIdentifier: record.messageId })) };
  };
}

/**
 * One small conditional put at a time, MESSAGES_PER_SECOND ticks a second, each tick a put to a bare table
 * and one to a table with the ledger's keys, indexes and stream (back to back, the order flipped each
 * tick; each table primed as soon as it is made, see table-definition.ts): the round trip from this
 * process of the single write our intake makes before it submits, at the same load.
 */
async function pacedPuts(ctx: BenchContext, count: number): Promise<LatencyResult['enginePut']> {
  const dynamodb = new DynamoDBClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS, endpoint: ctx.endpoints.dynamodbEndpoint, cacheMiddleware: true });
  try {
    const tables = { bare: ctx.uniqueName('lat-put-bare'), ledgerDefinition: ctx.uniqueName('lat-put-ledger') };
    await dynamodb.send(new CreateTableCommand({ TableName: tables.bare, ...definitionOf('bare') }));
    await primeTable(dynamodb, tables.bare);
    await dynamodb.send(new CreateTableCommand({ TableName: tables.ledgerDefinition, ...definitionOf('streamAndIndexes') }));
    await primeTable(dynamodb, tables.ledgerDefinition);
    const samples = { bare: [] as number[], ledgerDefinition: [] as number[] };
    const start = performance.now();
    for (let index = 0; index < count + PACED_PUT_WARMUP; index += 1) {
      const wait = start + (index * 1000) / MESSAGES_PER_SECOND - performance.now();
      if (wait > 0) await sleep(wait);
      // The order flips each time, so neither table always takes the engine's first write after the pause.
      for (const name of index % 2 === 0 ? (['bare', 'ledgerDefinition'] as const) : (['ledgerDefinition', 'bare'] as const)) {
        const at = performance.now();
        await dynamodb.send(new PutItemCommand({ TableName: tables[name], Item: { pk: { S: `A#${index}` }, sk: { S: 'A' }, at: { S: new Date().toISOString() } }, ConditionExpression: 'attribute_not_exists(pk)' }));
        if (index >= PACED_PUT_WARMUP) samples[name].push(performance.now() - at);
      }
    }
    const r = (value: number): number => Math.round(value * 10) / 10;
    const of = (values: number[]): Percentiles => ({ p50Ms: r(percentile(values, 50)), p99Ms: r(percentile(values, 99)) });
    return { puts: count, bare: of(samples.bare), ledgerDefinition: of(samples.ledgerDefinition) };
  } finally {
    dynamodb.destroy();
  }
}

function summarize(samples: { endToEnd: number[]; poll: number[]; handler: number[] }): DispatchLatency {
  const r = (value: number): number => Math.round(value * 10) / 10;
  return {
    messages: samples.endToEnd.length,
    p50Ms: r(percentile(samples.endToEnd, 50)),
    p99Ms: r(percentile(samples.endToEnd, 99)),
    maxMs: r(Math.max(...samples.endToEnd)),
    pollP50Ms: r(percentile(samples.poll, 50)),
    pollP99Ms: r(percentile(samples.poll, 99)),
    handlerP50Ms: r(percentile(samples.handler, 50)),
    handlerP99Ms: r(percentile(samples.handler, 99)),
  };
}

type Claimed = { readonly claimToken: string | null; readonly results: ReadonlyArray<{ readonly resultId: string; readonly dispatchId: string }> };
type Claim = (origin: string) => Promise<Claimed>;

function claimedOf(body: unknown): Claimed {
  if (!isRecord(body) || !Array.isArray(body.results)) throw new Error(`latency: a claim answered ${JSON.stringify(body)}`);
  const results = body.results.flatMap((result: unknown) => (isRecord(result) && typeof result.resultId === 'string' && typeof result.dispatchId === 'string' ? [{ resultId: result.resultId, dispatchId: result.dispatchId }] : []));
  return { claimToken: typeof body.claimToken === 'string' ? body.claimToken : null, results };
}

/** The claim use case the API runs (`claimResults`), in this process on a metered client: what one claim reads. */
function meteredClaims(ctx: BenchContext, platform: RunningPlatform, clients: LocalClients, inboxShards: number): { claim: Claim; reads: Array<{ readUnits: number; inboxReadUnits: number; inboxQueries: number; requests: number }>; destroy: () => void } {
  const dynamodb = new DynamoDBClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS, endpoint: ctx.endpoints.dynamodbEndpoint });
  const meter = new CapacityMeter();
  meter.attach(dynamodb);
  const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
  const tableName = platform.resources.ledgerTable;
  const options = { tableName, retentionSeconds: 90 * 86_400, inboxShards };
  const deps: InboxDeps = { store: new LedgerTable(documents, options), inbox: new InboxTable(documents, options), blobs: new S3Blobs(clients.s3, platform.resources.evidenceBucket), now: () => new Date(), inboxShards };
  const reads: Array<{ readUnits: number; inboxReadUnits: number; inboxQueries: number; requests: number }> = [];
  const claim: Claim = async (origin) => {
    const before = meter.snapshot();
    const outcome = await claimResults(deps, origin, CLAIM);
    const spent = meter.since(before);
    // The inbox passes are its queries: the §10 budget is theirs (taking a result found adds its own reads).
    const inbox = spent.byOperation.Query;
    reads.push({ readUnits: spent.readUnits, inboxReadUnits: inbox?.readUnits ?? 0, inboxQueries: inbox?.requests ?? 0, requests: spent.requests });
    if ((inbox?.readUnits ?? 0) > LONG_POLL_READ_BUDGET) throw new Error(`latency: a ${CLAIM.waitSeconds} s claim read its inbox for ${inbox?.readUnits} units, over CONTRACT §10's ${LONG_POLL_READ_BUDGET}`);
    if (outcome.kind !== 'claimed') throw new Error(`latency: the metered claim answered ${outcome.kind}`);
    return { claimToken: outcome.claimToken, results: outcome.results };
  };
  return { claim, reads, destroy: () => dynamodb.destroy() };
}

/**
 * Runs the latency part on `ctx`'s engines: a local platform of its own (unique prefix), its intake and
 * the bare forwarder in alternating rounds, then result claims in lanes of their own.
 */
export async function runLatency(ctx: BenchContext): Promise<LatencyResult> {
  const size = sizes(ctx.quick);
  const intake = LOCAL_FUNCTIONS.find((fn) => fn.trigger.kind === 'sqs' && fn.trigger.queue === 'dispatch');
  if (!intake || intake.trigger.kind !== 'sqs') throw new Error('no local function takes the dispatch queue');
  const stateDir = mkdtempSync(path.join(tmpdir(), 'bench-latency-'));
  // The platform sets the functions' environment in this process (as Lambda's runtime would): put it back after.
  const environment = { ...process.env };
  const target = await startLatencyTarget();
  const clients = localClients(ctx.endpoints);
  const forwarderInvoked = new Map<string, number>();
  let forwarder: SqsEventSource | undefined;
  let platform: RunningPlatform | undefined;
  const stops: Array<() => unknown> = [];
  try {
    const running = (platform = await startPlatform({
      stateDir,
      tickSeconds: 60,
      engines: ctx.endpoints,
      prefix: ctx.uniqueName('lat'),
      log: (line) => {
        if (line.level === 'warn' || line.level === 'error') ctx.log(`latency: platform ${JSON.stringify(line)}`);
      },
      // The stack's target cache (npm start reads the registry each time, so a target added while it runs is seen at once);
      // the functions' INFO lines and metrics would go to this process's stdout, where --only prints its JSON.
      environment: { TARGET_CACHE_SECONDS: '30', POWERTOOLS_LOG_LEVEL: 'ERROR', POWERTOOLS_METRICS_DISABLED: 'true' },
    }));
    const inboxShards = Number(running.settings.INBOX_SHARDS ?? '1');
    const ledger = new LedgerTable(DynamoDBDocumentClient.from(clients.dynamodb), { tableName: running.resources.ledgerTable, retentionSeconds: 90 * 86_400 });
    await ledger.putTarget({ name: TARGET, kind: 'http', baseUrl: target.url });
    const queue = await ensureQueue(clients.sqs, ctx.uniqueName('lat-forwarder'), { VisibilityTimeout: '180' });
    // The same event source and options as the platform's intake mapping: its batch size, its long-poll wait.
    forwarder = new SqsEventSource({ functionName: 'bench-forwarder', handler: forwarderHandler(target.url, forwarderInvoked), sqs: clients.sqs, queueUrl: queue.url, queueArn: queue.arn, region: LOCAL_REGION, batchSize: intake.trigger.batchSize, reportBatchItemFailures: true });
    forwarder.start();
    const pipelines = {
      ours: { queueUrl: running.info.dispatchQueueUrl, prefix: 'lat' },
      forwarder: { queueUrl: queue.url, prefix: 'fwd' },
    } as const;
    const detached = (dispatchId: string): string => JSON.stringify({ dispatchId, origin: ORIGIN, target: TARGET, task: { goal: 'latency' }, delivery: { mode: 'detached' } });
    const round = async (name: keyof typeof pipelines, label: string): Promise<{ ids: string[]; sent: Map<string, Sent> }> => {
      const ids = Array.from({ length: size.messagesPerRound }, (_, index) => `${pipelines[name].prefix}-${label}-${index}-${ctx.uniqueName('d')}`);
      const sent = await sendPaced(clients.sqs, pipelines[name].queueUrl, ids.map((dispatchId) => ({ dispatchId, body: detached(dispatchId) })));
      await until(`${name} round ${label}: every run at the target`, () => ids.every((id) => target.arrivals.has(id)));
      return { ids, sent };
    };
    ctx.log('latency: warm-up, a round through each pipeline');
    await round('ours', 'warm');
    await round('forwarder', 'warm');
    const measured = { ours: [] as Array<{ ids: string[]; sent: Map<string, Sent> }>, forwarder: [] as Array<{ ids: string[]; sent: Map<string, Sent> }> };
    for (let index = 0; index < size.rounds; index += 1) {
      // Alternating, never at once; the order flips each round so a drift of the machine hits both alike.
      for (const name of index % 2 === 0 ? (['ours', 'forwarder'] as const) : (['forwarder', 'ours'] as const)) measured[name].push(await round(name, String(index)));
      ctx.log(`latency: round ${index + 1}/${size.rounds} done`);
    }
    // An invocation is logged once it ends, after the target has the run: wait for the last ones.
    const messageIds = measured.ours.flatMap(({ sent }) => [...sent.values()].map((send) => send.messageId));
    const logged = (): Map<string, number> => intakeInvocations(running.invocationLog, intake.name);
    await until('the intake invocation log', () => {
      const invoked = logged();
      return messageIds.every((id) => invoked.has(id));
    }, 50);
    const oursInvoked = logged();
    const samplesOf = (name: keyof typeof pipelines, invoked: Map<string, number>): { endToEnd: number[]; poll: number[]; handler: number[] } => {
      const samples = { endToEnd: [] as number[], poll: [] as number[], handler: [] as number[] };
      for (const { ids, sent } of measured[name]) {
        for (const id of ids) {
          const send = sent.get(id);
          const arrived = target.arrivals.get(id);
          const at = send ? invoked.get(send.messageId) : undefined;
          if (!send || arrived === undefined || at === undefined) throw new Error(`latency: ${name} lost track of ${id}`);
          if (target.submissions.get(id) !== 1) throw new Error(`latency: ${id} reached the target ${target.submissions.get(id)} times`);
          const endToEnd = arrived - send.at;
          samples.endToEnd.push(endToEnd);
          samples.poll.push(at - send.wall);
          samples.handler.push(endToEnd - (at - send.wall));
        }
      }
      return samples;
    };
    const ours = summarize(samplesOf('ours', oursInvoked));
    const bare = summarize(samplesOf('forwarder', forwarderInvoked));
    await forwarder.stop();
    forwarder = undefined;
    ctx.log(`latency: send → POST /runs p50 ${ours.p50Ms} ms, p99 ${ours.p99Ms} ms; the bare forwarder p50 ${bare.p50Ms} ms, p99 ${bare.p99Ms} ms`);
    // With the platform still running, as during the rounds: what one write costs on this engine at this pace.
    const enginePut = await pacedPuts(ctx, size.pacedPuts);
    ctx.log(`latency: one conditional put at ${MESSAGES_PER_SECOND}/s: bare table p50 ${enginePut.bare.p50Ms} ms, p99 ${enginePut.bare.p99Ms} ms; the ledger's definition p50 ${enginePut.ledgerDefinition.p50Ms} ms, p99 ${enginePut.ledgerDefinition.p99Ms} ms`);

    // Results: each lane an origin of its own, one result at a time, a claim waiting before the final event.
    const interval = pollIntervalMs(CLAIM, inboxShards);
    const api = running.info.apiUrl;
    const call = async (route: Pick<RouteSpec, 'method' | 'path'>, params: Record<string, string>, body: unknown, origin?: string): Promise<unknown> => {
      const response = await fetch(`${api}${routePath(route, params)}`, { method: route.method, headers: { 'content-type': 'application/json', ...(origin ? { 'x-ledger-origin': origin } : {}) }, body: JSON.stringify(body) });
      const answer: unknown = await response.json();
      if (!response.ok) throw new Error(`latency: ${route.method} ${route.path} → ${response.status}: ${JSON.stringify(answer)}`);
      return answer;
    };
    const apiClaim: Claim = async (origin) => claimedOf(await call(ROUTES.inboxClaim, { origin }, CLAIM, origin));
    const metered = meteredClaims(ctx, running, clients, inboxShards);
    const empty = meteredClaims(ctx, running, clients, inboxShards);
    stops.push(metered.destroy, empty.destroy);
    let sequence = 0;
    const lane = async (origin: string, claims: number, claim: Claim): Promise<number[]> => {
      const latencies: number[] = [];
      for (let index = 0; index < claims; index += 1) {
        const phase = (sequence++ * GOLDEN) % 1;
        const dispatchId = `res-${origin}-${index}`;
        const body = JSON.stringify({ dispatchId, origin, target: TARGET, task: { goal: 'result latency' }, delivery: { mode: 'callback' }, resultDelivery: 'inject' });
        await clients.sqs.send(new SendMessageCommand({ QueueUrl: running.info.dispatchQueueUrl, MessageBody: body }));
        await until(`${dispatchId} submitted`, async () => (await ledger.getState(dispatchId))?.runId === runIdOf(dispatchId), 20);
        const claiming = claim(origin).then((claimed) => ({ claimed, at: performance.now() }));
        await sleep(CLAIM_SETTLE_MS + phase * interval);
        const posted = performance.now();
        await call(ROUTES.postRunEvent, { runId: runIdOf(dispatchId) }, { dispatchId, seq: 1, type: 'completed', result: { summary: 'done' } });
        const { claimed, at } = await claiming;
        const result = claimed.results[0];
        if (!claimed.claimToken || result?.dispatchId !== dispatchId) throw new Error(`latency: the claim for ${dispatchId} returned ${JSON.stringify(claimed)}`);
        latencies.push(at - posted);
        await call(ROUTES.inboxAck, { origin, resultId: result.resultId }, { claimToken: claimed.claimToken }, origin);
      }
      return latencies;
    };
    ctx.log(`latency: result claims (${API_LANES} lanes through the API, one metered, an empty ${CLAIM.waitSeconds} s poll beside them)`);
    const emptyStarted = performance.now();
    const [apiLanes, meteredLane, emptyPoll] = await Promise.all([
      Promise.all(Array.from({ length: API_LANES }, (_, index) => lane(ctx.uniqueName(`lat-o${index}`), size.claimsPerLane, apiClaim))),
      lane(ctx.uniqueName('lat-metered'), size.meteredClaims, metered.claim),
      empty.claim(ctx.uniqueName('lat-nobody')).then((claimed) => ({ claimed, seconds: (performance.now() - emptyStarted) / 1000 })),
    ]);
    const emptyReads = empty.reads[0];
    if (emptyPoll.claimed.results.length > 0 || !emptyReads) throw new Error('latency: the empty long poll found a result');
    if (emptyReads.readUnits > LONG_POLL_READ_BUDGET) throw new Error(`latency: an empty ${CLAIM.waitSeconds} s long poll read ${emptyReads.readUnits} units, over CONTRACT §10's ${LONG_POLL_READ_BUDGET}`);
    const results = apiLanes.flat();
    const r = (value: number): number => Math.round(value);
    return {
      load: { messagesPerSecond: MESSAGES_PER_SECOND, messagesPerRound: size.messagesPerRound, rounds: size.rounds, batchSize: intake.trigger.batchSize },
      ours,
      forwarder: bare,
      p99RatioVsForwarder: Math.round((ours.p99Ms / bare.p99Ms) * 1000) / 1000,
      enginePut,
      result: {
        claims: results.length,
        p50Ms: r(percentile(results, 50)),
        p99Ms: r(percentile(results, 99)),
        maxMs: r(Math.max(...results)),
        pollIntervalMs: interval,
        inboxShards,
        metered: {
          claims: meteredLane.length,
          p50Ms: r(percentile(meteredLane, 50)),
          readUnitsPerClaim: spreadOf(metered.reads.map((read) => read.readUnits)),
          inboxReadUnitsPerClaim: spreadOf(metered.reads.map((read) => read.inboxReadUnits)),
          inboxQueriesPerClaim: spreadOf(metered.reads.map((read) => read.inboxQueries)),
        },
        emptyLongPoll: { readUnits: emptyReads.readUnits, requests: emptyReads.requests, seconds: Math.round(emptyPoll.seconds * 10) / 10 },
      },
      notes: [
        `The local platform (startPlatform) on the bench's engines with a prefix of its own; its intake behind the local SQS event source (batch size ${intake.trigger.batchSize}, the event source's own long-poll wait), TARGET_CACHE_SECONDS 30 as the stack sets it, the functions' logs at ERROR.`,
        `Load: ${size.messagesPerRound} messages per round at ${MESSAGES_PER_SECOND} per second, each its own SendMessage, the send time taken just before it; ${size.rounds} rounds per pipeline after a warm-up round each, ours and the bare forwarder alternating (never at once), the order flipped each round.`,
        'The bare forwarder: a queue of its own on the same fauxqs, the same event source with the same options, a handler that posts each record\'s body to the same in-process target (POST /runs, a kept-alive connection) and nothing else.',
        'Polling: send → the handler invoked (the platform\'s invocation log for ours, the handler\'s own clock for the forwarder; both wall-clock ms); handler: the rest, to the target receiving POST /runs.',
        `The engine's own put: ${size.pacedPuts} small conditional puts per table after ${PACED_PUT_WARMUP} not counted, one at a time at ${MESSAGES_PER_SECOND} per second, alternating between a bare table and one made as the ledger's (six indexes, a stream), sent from this process on a client with cached middleware as the intake's hot path, with the platform still running.`,
        `Results: ${API_LANES} origins at once through the platform's API, one dispatch (callback, resultDelivery inject) at a time each; once it is submitted, a claim (inject, waitSeconds ${CLAIM.waitSeconds}, max 1) starts, and its final event is posted ${CLAIM_SETTLE_MS} ms plus a share of the poll spacing later, the shares spread evenly over the cycle; measured from just before that POST to the claim returning the result.`,
        `Reads: a fifth lane makes the same claims through the claim use case on a metered client in this process, and one ${CLAIM.waitSeconds} s claim waits on an empty inbox; each claim's inbox queries must stay within CONTRACT §10's ${LONG_POLL_READ_BUDGET} read units (the run stops if one does not).`,
      ],
    };
  } finally {
    await forwarder?.stop();
    for (const stop of stops) stop();
    await platform?.stop();
    target.close();
    clients.destroy();
    for (const key of Object.keys(process.env)) if (!(key in environment)) delete process.env[key];
    Object.assign(process.env, environment);
    rmSync(stateDir, { recursive: true, force: true });
  }
}

/** The dispatch latency target (CONTRACT §18): ours p99 at most 1.3× the bare forwarder's. */
const P99_RATIO_TARGET = 1.3;
export const latencyTargets = (latency: LatencyResult) => ({
  dispatchLatencyP99RatioVsForwarder: { target: `≤ ${P99_RATIO_TARGET}×`, measured: latency.p99RatioVsForwarder, met: latency.p99RatioVsForwarder <= P99_RATIO_TARGET },
});

/** The latency block of docs/performance.md. */
export function latencyText(latency: LatencyResult, table: (header: readonly string[], rows: ReadonlyArray<readonly (string | number)[]>) => string): string {
  const { ours, forwarder, result, load, enginePut } = latency;
  const row = (name: string, d: DispatchLatency): (string | number)[] => [name, d.messages, d.p50Ms, d.p99Ms, d.maxMs, `${d.pollP50Ms} (${d.pollP99Ms})`, `${d.handlerP50Ms} (${d.handlerP99Ms})`];
  const share = (d: DispatchLatency): string => `${Math.round((d.pollP50Ms / d.p50Ms) * 100)} %`;
  const { metered, emptyLongPoll } = result;
  return [
    `Load: ${load.messagesPerRound} messages a round at ${load.messagesPerSecond} per second, one SendMessage each; ${load.rounds} rounds per pipeline, ours and the bare forwarder alternating; the event source takes batches of up to ${load.batchSize}.`,
    '',
    table(['send → target receives POST /runs (ms)', 'messages', 'p50', 'p99', 'max', 'polling: send → handler invoked, p50 (p99)', 'handler invoked → target, p50 (p99)'], [row('Dispatch Ledger intake', ours), row('bare forwarder (posts the body, nothing else)', forwarder)]),
    '',
    `p99 ÷ the forwarder's p99: ${latency.p99RatioVsForwarder}. Polling is ${ours.pollP50Ms} ms of ours' p50 of ${ours.p50Ms} ms (${share(ours)}), ${forwarder.pollP50Ms} ms of the forwarder's ${forwarder.p50Ms} ms (${share(forwarder)}).`,
    '',
    `The one write ours makes before it submits, on this engine at this pace (${enginePut.puts} small conditional puts a table, one at a time): p50 ${enginePut.bare.p50Ms} ms, p99 ${enginePut.bare.p99Ms} ms on a bare table; p50 ${enginePut.ledgerDefinition.p50Ms} ms, p99 ${enginePut.ledgerDefinition.p99Ms} ms on a table made as the ledger's. ${P99_RATIO_TARGET}× the forwarder's p99 leaves ${Math.round(forwarder.p99Ms * (P99_RATIO_TARGET - 1) * 10) / 10} ms for everything ours adds.`,
    '',
    table(
      ['final event → a waiting inject claim returns it (ms)', 'claims', 'p50', 'p99', 'max', "the inbox's poll spacing"],
      [['through the API, `waitSeconds` 20', result.claims, result.p50Ms, result.p99Ms, result.maxMs, `${result.pollIntervalMs.toLocaleString('en-US')} ms (INBOX_SHARDS ${result.inboxShards})`]],
    ),
    '',
    `Reads per claim (the same claims through the claim use case on a metered client, ${metered.claims} of them): ${metered.readUnitsPerClaim.median} read units (min ${metered.readUnitsPerClaim.min}, max ${metered.readUnitsPerClaim.max}), of which the inbox's queries ${metered.inboxReadUnitsPerClaim.median} in ${metered.inboxQueriesPerClaim.median} passes; the rest reads and takes the result it found. An empty ${CLAIM.waitSeconds} s inject claim read ${emptyLongPoll.readUnits} units in ${emptyLongPoll.requests} requests over ${emptyLongPoll.seconds} s (CONTRACT §10: at most ${LONG_POLL_READ_BUDGET}).`,
  ].join('\n');
}
