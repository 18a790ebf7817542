import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { type S3Client } from '@aws-sdk/client-s3';
import { DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { SQSEvent } from 'aws-lambda';
import { LOCAL_REGION } from '../local/engines/index.js';
import { ensureBucket, ensureLedgerTable } from '../local/resources.js';
import { lambdaContext } from '../local/runtime/context.js';
import { STATE_ITEM } from '../shared/adapters/item-kinds.js';
import { newWriteId, WRITE_ID_ATTRIBUTE } from '../shared/adapters/ledger-keys.js';
import { LedgerTable } from '../shared/adapters/ledger-writes.js';
import { stateItem } from '../shared/adapters/state-item.js';
import { DEFAULT_TIMEOUTS } from '../shared/dispatch/message.js';
import { DEFAULT_RETRY_POLICY } from '../shared/dispatch/retry.js';
import { accepted, submitted } from '../shared/dispatch/transitions/lifecycle.js';
import { itemSizeBytes } from './capacity-units.js';
import { createFloorTable, floorPipeline, floorStateKey, readLedgerItemTemplates, type LedgerItemTemplates } from './floor-pipeline.js';
import { BATCH_SIZE, BenchTarget, batchesOf, clientsFor, dispatchBody, drive, getAll, MEMORY_MB, ORIGIN, sqsRecord, TARGET_NAME, type SqsHandler } from './intake-harness.js';
import { INTAKE_TARGET_TIMEOUT_MS, oursEnvironment } from './ours-environment.js';
import { createKeyTable, createReferenceTables, referencePipeline, referenceRecordItem, referenceRecordKey, type ReferenceTables } from './reference-pipeline.js';
import { primeTable } from './table-definition.js';
import { spreadOf, type BenchContext, type Spread } from './types.js';

/**
 * Intake throughput, ours against the Powertools reference (`bench/reference-pipeline.ts`) and against
 * the bare floor (`bench/floor-pipeline.ts`: the same three round trips with no logic). The reference's
 * usage per dispatch lifecycle is measured apart, in `bench/reference-lifecycle.ts`.
 *
 * The pipelines run in this process, on the same engines (DynamoDB Local, fauxqs S3), against the
 * same in-process HTTP target, with SQS events built in memory as Lambda delivers them
 * (`bench/intake-harness.ts`), each handler invoked directly: one invocation at a time (as one Lambda
 * execution environment runs them), 10 records per batch, which every handler's `BatchProcessor`
 * processes concurrently (Powertools' default).
 */

/** A multiple of the five pipelines: each runs in each position of the rotation equally often. */
const ROUNDS = 10;
const TARGET_TIMEOUT_MS = INTAKE_TARGET_TIMEOUT_MS;

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
