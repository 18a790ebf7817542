import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { DynamoDBPersistenceLayer } from '@aws-lambda-powertools/idempotency/dynamodb';
import {
  CreateTableCommand,
  ResourceInUseException,
  UpdateTimeToLiveCommand,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { HeadObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { DynamoDBDocumentClient, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { Context, LambdaFunctionURLEvent, LambdaFunctionURLResult, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { httpTarget } from '../shared/adapters/http-target.js';
import { readDispatchMessage, type DispatchMessage } from '../shared/dispatch/message.js';
import { DEFAULT_RETRY_POLICY } from '../shared/dispatch/retry.js';
import { stateOnly, type NextState } from '../shared/dispatch/state.js';
import { accepted, submitted } from '../shared/dispatch/transitions/lifecycle.js';
import type { TargetRegistration } from '../shared/targets/port.js';

/**
 * The reference pipeline: what a careful team builds with the Powertools for AWS Lambda (TypeScript)
 * idempotency and batch utilities, doing the same work per dispatch as Dispatch Ledger — the same target
 * submission (`httpTarget(...).submit`), the same validation (`readDispatchMessage`), the same state
 * record (`accepted()` then `submitted()`) — with its idempotency from Powertools instead of ours:
 *
 * - every handler is wrapped by `makeIdempotent` on a `DynamoDBPersistenceLayer` (one conditional PutItem
 *   "INPROGRESS" before the work, one UpdateItem "COMPLETED" after it, a DeleteItem if the work throws);
 * - each lifecycle step does exactly one state write on the reference's own record table (a PutItem at
 *   intake, an UpdateItem after that), unconditional: Powertools offers no fencing, and the reference
 *   adds none;
 * - intake is an SQS `BatchProcessor` + `processPartialResponse` handler, as the Powertools docs show
 *   for idempotent batch processing.
 *
 * Not reentrant, like a Lambda execution environment: each handler is invoked by one caller at a time
 * (the `BatchProcessor` and the `IdempotencyConfig` hold per-invocation state).
 */

/** Tables of the reference, created on the same DynamoDB (Local) as the ledger's, separate from it. */
export interface ReferenceTables {
  /** Powertools' idempotency table: partition key `id` (string), TTL on `expiration` (Powertools docs). */
  readonly idempotencyTable: string;
  /** The reference's dispatch records: partition key `pk` (string), no indexes. */
  readonly recordTable: string;
}

/** A table keyed by one string attribute `key`, optionally with TTL on `ttl`; left as is when it exists. */
export async function createKeyTable(dynamodb: DynamoDBClient, name: string, key: string, ttl?: string): Promise<void> {
  try {
    await dynamodb.send(
      new CreateTableCommand({
        TableName: name,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [{ AttributeName: key, AttributeType: 'S' }],
        KeySchema: [{ AttributeName: key, KeyType: 'HASH' }],
      }),
    );
    if (ttl) await dynamodb.send(new UpdateTimeToLiveCommand({ TableName: name, TimeToLiveSpecification: { Enabled: true, AttributeName: ttl } }));
  } catch (error) {
    if (!(error instanceof ResourceInUseException)) throw error;
  }
}

export async function createReferenceTables(dynamodb: DynamoDBClient, tables: ReferenceTables): Promise<void> {
  await Promise.all([createKeyTable(dynamodb, tables.idempotencyTable, 'id', 'expiration'), createKeyTable(dynamodb, tables.recordTable, 'pk')]);
}

export interface ReferencePipelineOptions {
  /** The one DynamoDB client of the reference: the Powertools persistence layers and the record writes use it. */
  readonly dynamodb: DynamoDBClient;
  /** For the evidence check (one HEAD per expected ref). */
  readonly s3: S3Client;
  readonly tables: ReferenceTables;
  readonly evidenceBucket: string;
  /** Fixed in the reference's configuration: an idiomatic single-purpose worker does not look its target up. */
  readonly target: TargetRegistration;
  readonly callbackUrl: string;
  readonly targetTimeoutMs: number;
  /** Distinguishes the idempotency keys of two pipelines sharing a table. @default 'reference' */
  readonly keyPrefix?: string;
}

/** Body of a run event (CONTRACT §2 `POST /runs/{runId}/events`), as the reference accepts it. */
export interface ReferenceRunEvent {
  readonly dispatchId: string;
  readonly seq: number;
  readonly type: 'heartbeat' | 'completed';
  readonly result?: { readonly summary?: string };
  readonly evidence?: readonly string[];
}

/** The evidence check: invoked by the reference's own scheduler (not over HTTP) after a completion. */
export interface ReferenceEvidenceCheckEvent {
  readonly dispatchId: string;
  readonly attempt: number;
  readonly refs: readonly string[];
}

/** Body of an operator receipt (`POST /dispatches/{dispatchId}/receipts`). */
export interface ReferenceOperatorReceipt {
  readonly dispatchId: string;
  readonly receiptId: string;
  readonly kind: string;
  readonly note: string;
}

export interface ReferencePipeline {
  /** SQS intake: per record, validate, submit to the target, write one record. */
  readonly intake: (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;
  /** Function URL: a run event (heartbeat or completion), one UpdateItem. */
  readonly runEvent: (event: LambdaFunctionURLEvent, context: Context) => Promise<LambdaFunctionURLResult>;
  /** Direct invoke: HEAD each expected evidence object, one UpdateItem with the outcome and a receipt. */
  readonly evidenceCheck: (event: ReferenceEvidenceCheckEvent, context: Context) => Promise<{ outcome: 'handled' | 'orphaned'; missing: number }>;
  /** Function URL: an operator receipt, appended to the record with one UpdateItem. */
  readonly operatorReceipt: (event: LambdaFunctionURLEvent, context: Context) => Promise<LambdaFunctionURLResult>;
}

/** The reference's record key: the same partition key the ledger uses for a dispatch. */
export const referenceRecordKey = (dispatchId: string): { pk: string } => ({ pk: `D#${dispatchId}` });

/** Where the reference expects a dispatch's evidence: `evidence/{dispatchId}/{attempt}/{ref}`. */
export const referenceEvidenceKey = (dispatchId: string, attempt: number, ref: string): string => `evidence/${dispatchId}/${attempt}/${ref}`;

/**
 * The item the reference writes at intake: the state `submitted()` returns, under its key, as its first
 * version (its later updates add one) with what that write changed.
 */
export function referenceRecordItem(state: NextState): Record<string, unknown> {
  return { ...referenceRecordKey(state.dispatchId), ...stateOnly(state), version: 1, changes: state.changes };
}

function jsonResponse(statusCode: number, body: unknown): LambdaFunctionURLResult {
  return { statusCode, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
}

function bodyOf<T>(event: LambdaFunctionURLEvent): T {
  const text = event.isBase64Encoded && event.body ? Buffer.from(event.body, 'base64').toString('utf8') : (event.body ?? '');
  return JSON.parse(text) as T;
}

export function referencePipeline(options: ReferencePipelineOptions): ReferencePipeline {
  const { dynamodb, s3, tables } = options;
  const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
  const prefix = options.keyPrefix ?? 'reference';
  const target = httpTarget(options.target, { timeoutMs: options.targetTimeoutMs });
  // One persistence layer per idempotent function: a layer is configured once, by its first caller.
  const persistence = (): DynamoDBPersistenceLayer => new DynamoDBPersistenceLayer({ tableName: tables.idempotencyTable, awsSdkV3Client: dynamodb });

  // --- Intake -------------------------------------------------------------------------------------
  // Keyed on the dispatchId; the whole validated message is the payload hash (same id, other content:
  // IdempotencyValidationError, a batch item failure, where the ledger records a `conflict` rejection).
  const intakeConfig = new IdempotencyConfig({ eventKeyJmesPath: 'dispatchId', payloadValidationJmesPath: '@' });
  const acceptAndSubmit = makeIdempotent(
    async (message: DispatchMessage): Promise<{ dispatchId: string; runId: string | null; phase: string }> => {
      const now = new Date();
      const start = accepted(
        {
          dispatchId: message.dispatchId,
          origin: message.origin,
          target: message.target,
          hop: 0,
          maxHops: message.maxHops,
          parentDispatchId: message.parentDispatchId ?? null,
          deliveryMode: message.delivery.mode,
          timeouts: message.timeouts,
          writtenAt: now.toISOString(),
          expectedCount: message.expectedEvidence.length,
        },
        now,
      );
      const outcome = await target.submit({
        dispatchId: message.dispatchId,
        attempt: start.attempt,
        origin: message.origin,
        task: message.task,
        expectedEvidence: message.expectedEvidence,
        callbackUrl: options.callbackUrl,
      });
      // Idiomatic for this design: an unreachable target fails the record (Powertools deletes its
      // in-progress record) and SQS redelivers it; a refusal is recorded as blocked.
      if (outcome.kind === 'unavailable') throw new Error(`target unavailable: ${outcome.reason}`);
      const state = submitted(start, outcome, DEFAULT_RETRY_POLICY, new Date());
      await documents.send(new PutCommand({ TableName: tables.recordTable, Item: referenceRecordItem(state) }));
      return { dispatchId: state.dispatchId, runId: state.runId, phase: state.phase };
    },
    { persistenceStore: persistence(), config: intakeConfig, keyPrefix: `${prefix}-intake` },
  );
  const processor = new BatchProcessor(EventType.SQS);
  const recordHandler = async (record: SQSRecord): Promise<void> => {
    const read = readDispatchMessage(record.body);
    // The reference has no blocked/rejection records: what it cannot process goes back to SQS (then the DLQ).
    if (read.kind !== 'valid') throw new Error(`message ${record.messageId} is ${read.kind}`);
    await acceptAndSubmit(read.message);
  };
  const intake = async (event: SQSEvent, context: Context): Promise<SQSBatchResponse> => {
    intakeConfig.registerLambdaContext(context);
    return processPartialResponse(event, recordHandler, processor, { context });
  };

  // --- Run events (heartbeat, completion) -----------------------------------------------------------
  const runEvent = makeIdempotent(
    async (event: LambdaFunctionURLEvent, _context: Context): Promise<LambdaFunctionURLResult> => {
      const body = bodyOf<ReferenceRunEvent>(event);
      const at = new Date().toISOString();
      const values: Record<string, unknown> = { ':at': at, ':seq': body.seq, ':one': 1 };
      const sets = ['execution.lastActivityAt = :at', 'lastSeq = :seq', 'updatedAt = :at', 'version = version + :one'];
      if (body.type === 'heartbeat') {
        sets.push('execution.#status = :running', 'execution.nativeStatus = :running');
        values[':running'] = 'running';
      } else {
        sets.push('execution.#status = :completed', 'execution.nativeStatus = :completed', 'execution.completedAt = :at', 'execution.#result = :result');
        sets.push('evidence.deadline = :deadline');
        values[':completed'] = 'completed';
        values[':result'] = body.result ?? null;
        values[':deadline'] = new Date(Date.now() + 300_000).toISOString();
      }
      // One unconditional state update per event: Powertools has no fencing and the reference adds none.
      await documents.send(
        new UpdateCommand({
          TableName: tables.recordTable,
          Key: referenceRecordKey(body.dispatchId),
          UpdateExpression: `SET ${sets.join(', ')}`,
          ExpressionAttributeNames: { '#status': 'status', ...(body.type === 'completed' ? { '#result': 'result' } : {}) },
          ExpressionAttributeValues: values,
        }),
      );
      return jsonResponse(202, { applied: true });
    },
    {
      persistenceStore: persistence(),
      config: new IdempotencyConfig({ eventKeyJmesPath: 'powertools_json(body).[dispatchId, seq]', payloadValidationJmesPath: 'powertools_json(body)' }),
      keyPrefix: `${prefix}-run-event`,
    },
  );

  // --- Evidence check ------------------------------------------------------------------------------
  const evidenceCheck = makeIdempotent(
    async (event: ReferenceEvidenceCheckEvent, _context: Context): Promise<{ outcome: 'handled' | 'orphaned'; missing: number }> => {
      const present = await Promise.all(
        event.refs.map(async (ref) => {
          try {
            await s3.send(new HeadObjectCommand({ Bucket: options.evidenceBucket, Key: referenceEvidenceKey(event.dispatchId, event.attempt, ref) }));
            return true;
          } catch (error) {
            if (error instanceof Error && (error.name === 'NotFound' || error.name === 'NoSuchKey')) return false;
            throw error;
          }
        }),
      );
      const missing = present.filter((found) => !found).length;
      const outcome = missing === 0 ? 'handled' : 'orphaned';
      const at = new Date().toISOString();
      const receipt = missing === 0 ? [{ event: 'dispatch_completed', at, attempt: event.attempt, evidenceCount: event.refs.length }] : [];
      await documents.send(
        new UpdateCommand({
          TableName: tables.recordTable,
          Key: referenceRecordKey(event.dispatchId),
          UpdateExpression: 'SET evidence.outcome = :outcome, receipts = list_append(receipts, :receipt), updatedAt = :at, version = version + :one',
          ExpressionAttributeValues: { ':outcome': outcome, ':receipt': receipt, ':at': at, ':one': 1 },
        }),
      );
      return { outcome, missing };
    },
    {
      persistenceStore: persistence(),
      config: new IdempotencyConfig({ eventKeyJmesPath: '[dispatchId, attempt]' }),
      keyPrefix: `${prefix}-evidence-check`,
    },
  );

  // --- Operator receipt -----------------------------------------------------------------------------
  const operatorReceipt = makeIdempotent(
    async (event: LambdaFunctionURLEvent, _context: Context): Promise<LambdaFunctionURLResult> => {
      const body = bodyOf<ReferenceOperatorReceipt>(event);
      const recordedAt = new Date().toISOString();
      await documents.send(
        new UpdateCommand({
          TableName: tables.recordTable,
          Key: referenceRecordKey(body.dispatchId),
          UpdateExpression: 'SET operatorReceipts = list_append(if_not_exists(operatorReceipts, :none), :receipt), updatedAt = :at, version = version + :one',
          ExpressionAttributeValues: {
            ':none': [],
            ':receipt': [{ receiptId: body.receiptId, kind: body.kind, note: body.note, recordedAt }],
            ':at': recordedAt,
            ':one': 1,
          },
        }),
      );
      return jsonResponse(201, { receiptId: body.receiptId, recordedAt });
    },
    {
      persistenceStore: persistence(),
      config: new IdempotencyConfig({ eventKeyJmesPath: 'powertools_json(body).[dispatchId, receiptId]', payloadValidationJmesPath: 'powertools_json(body)' }),
      keyPrefix: `${prefix}-operator-receipt`,
    },
  );

  return { intake, runEvent, evidenceCheck, operatorReceipt };
}
