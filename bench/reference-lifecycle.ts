import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { LambdaFunctionURLEvent, SQSEvent } from 'aws-lambda';
import { ROUTES, routePath } from '@dispatch-ledger/protocol';
import { LOCAL_REGION } from '../local/engines/index.js';
import { ensureBucket } from '../local/resources.js';
import { lambdaContext } from '../local/runtime/context.js';
import { CapacityMeter } from './capacity-meter.js';
import { BATCH_SIZE, BenchTarget, clientsFor, dispatchBody, functionUrlEvent, getAll, MEMORY_MB, sqsRecord } from './intake-harness.js';
import { INTAKE_TARGET_TIMEOUT_MS } from './ours-environment.js';
import { countCommands } from './command-watch.js';
import { createReferenceTables, referenceEvidenceKey, referencePipeline, referenceRecordKey, type ReferencePipeline, type ReferenceTables } from './reference-pipeline.js';
import type { BenchContext, LifecycleUsage } from './types.js';

/**
 * The Powertools reference's usage per dispatch lifecycle (bench/reference-pipeline.ts), priced by
 * bench/prices.ts next to ours (bench/lifecycle-cost.ts).
 */

const EVIDENCE_REF = 'out/report.md';

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
  const s3Calls = countCommands(s3);
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
      targetTimeoutMs: INTAKE_TARGET_TIMEOUT_MS,
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
