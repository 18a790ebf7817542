import {
  DescribeStreamCommand,
  ExpiredIteratorException,
  GetRecordsCommand,
  GetShardIteratorCommand,
  TrimmedDataAccessException,
  type GetRecordsCommandOutput,
  type DynamoDBStreamsClient,
  type _Record as StreamRecord,
  type AttributeValue,
} from '@aws-sdk/client-dynamodb-streams';
import type { Context, DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { describeError, lambdaContext, TimedOut, withinTimeout, type InvocationListener } from './context.js';
import { PollLoop } from './poll-loop.js';

export type StreamHandler = (
  event: DynamoDBStreamEvent,
  context: Context,
) => Promise<DynamoDBBatchResponse | void | undefined>;

export interface StreamEventSourceOptions {
  readonly functionName: string;
  readonly handler: StreamHandler;
  readonly streams: DynamoDBStreamsClient;
  readonly streamArn: string;
  readonly region: string;
  /** Default 100. */
  readonly batchSize?: number;
  /**
   * The mapping's filter criteria: a record it refuses is dropped before batching and never reaches
   * the handler (Lambda counts it as processed). Default: every record.
   */
  readonly filter?: (record: DynamoDBRecord) => boolean;
  /** Retries of a failing batch before it is handed to `onDiscard` and skipped (Lambda's MaximumRetryAttempts). Default 3. */
  readonly maxRetryAttempts?: number;
  /** Lambda's on-failure destination: receives what is skipped after the retries. */
  readonly onDiscard?: (discarded: { readonly records: readonly DynamoDBRecord[]; readonly error: string }) => void;
  /** Pause between polls of an idle shard. Default 250 ms. */
  readonly idleMs?: number;
  /**
   * How often the stream's shards are listed again (`DescribeStream`) while the ones known stay open; a
   * shard that closes has them listed on the next poll. Default 10 s: as Lambda's mapping, which does
   * not describe the stream on every poll. On DynamoDB Local a description costs more the more stream
   * records the engine holds, and it ran four times a second per mapping (docs/performance.md).
   */
  readonly shardDiscoveryMs?: number;
  readonly timeoutMs?: number;
  readonly onInvocation?: InvocationListener;
  readonly onError?: (error: unknown) => void;
  /**
   * Asked after each batch the handler took: true loses the checkpoint, so the same batch is delivered
   * again (what Lambda does when it cannot record its progress). The census's fault; default never.
   */
  readonly redeliverBatch?: () => boolean;
}

interface ShardCursor {
  iterator: string | undefined;
  /** The sequence number of the last record read (filtered out or not): an expired iterator is renewed after it. */
  lastRead?: string;
  /** Records read but not yet handled successfully (kept across retries). */
  pending: DynamoDBRecord[];
  attempts: number;
  /**
   * An invocation that outran its timeout and still runs (in-process it cannot be killed, as Lambda kills
   * it): the shard waits for it, so its records are never handled by two invocations at once, nor out of
   * order (a review of a94970a: the retry started at once, beside the run still publishing).
   */
  late?: Promise<void>;
}

/**
 * The local event source mapping for a DynamoDB stream (starting position TRIM_HORIZON), with Lambda's
 * semantics: records of a shard in order; a thrown handler retries the same batch; with
 * ReportBatchItemFailures the batch is retried from the first reported sequence number; after
 * `maxRetryAttempts` the batch goes to the on-failure destination and the shard moves on; records the
 * filter refuses are skipped. Each source keeps its own shard iterators, so several functions on one
 * stream each read every record, as separate mappings do.
 */
export class StreamEventSource {
  private readonly loop: PollLoop;
  private readonly shards = new Map<string, ShardCursor>();
  private readonly closed = new Set<string>();
  /** When the shards were last listed; undefined: list them on the next poll (none known, or one closed). */
  private discoveredAt: number | undefined;

  constructor(private readonly options: StreamEventSourceOptions) {
    this.loop = new PollLoop(() => this.pollOnce(), {
      idleMs: options.idleMs ?? 250,
      errorBackoffMs: 1_000,
      onError: options.onError,
    });
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One pass over every open shard; returns how many records were handled. */
  async pollOnce(): Promise<number> {
    const now = Date.now();
    if (this.discoveredAt === undefined || this.shards.size === 0 || now - this.discoveredAt >= (this.options.shardDiscoveryMs ?? 10_000)) {
      await this.discoverShards();
      this.discoveredAt = now;
    }
    let handled = 0;
    // A shard that fails is said once the others were polled: one shard's trouble stops no other.
    let failed: { readonly error: unknown } | undefined;
    for (const [shardId, cursor] of this.shards) {
      try {
        handled += await this.pollShard(shardId, cursor);
      } catch (error) {
        failed ??= { error };
      }
    }
    if (failed) throw failed.error;
    return handled;
  }

  private async discoverShards(): Promise<void> {
    const { streams, streamArn } = this.options;
    let exclusiveStartShardId: string | undefined;
    do {
      const described = await streams.send(
        new DescribeStreamCommand({ StreamArn: streamArn, ExclusiveStartShardId: exclusiveStartShardId }),
      );
      for (const shard of described.StreamDescription?.Shards ?? []) {
        const shardId = shard.ShardId;
        if (!shardId || this.shards.has(shardId) || this.closed.has(shardId)) continue;
        const { ShardIterator } = await streams.send(
          new GetShardIteratorCommand({ StreamArn: streamArn, ShardId: shardId, ShardIteratorType: 'TRIM_HORIZON' }),
        );
        this.shards.set(shardId, { iterator: ShardIterator, pending: [], attempts: 0 });
      }
      exclusiveStartShardId = described.StreamDescription?.LastEvaluatedShardId;
    } while (exclusiveStartShardId);
  }

  private async pollShard(shardId: string, cursor: ShardCursor): Promise<number> {
    if (cursor.late) return 0;
    const batchSize = this.options.batchSize ?? 100;
    if (cursor.pending.length < batchSize && cursor.iterator) {
      const page = await this.readRecords(shardId, cursor, batchSize - cursor.pending.length);
      cursor.iterator = page.NextShardIterator;
      cursor.lastRead = page.Records?.at(-1)?.dynamodb?.SequenceNumber ?? cursor.lastRead;
      const records = (page.Records ?? []).map((record) => toLambdaRecord(record, this.options));
      const { filter } = this.options;
      cursor.pending.push(...(filter ? records.filter(filter) : records));
    }
    if (cursor.pending.length === 0) {
      if (!cursor.iterator) {
        this.shards.delete(shardId);
        this.closed.add(shardId);
        // Its children are open now: list them on the next poll.
        this.discoveredAt = undefined;
      }
      return 0;
    }
    const batch = cursor.pending.slice(0, batchSize);
    const failedFrom = await this.invoke(batch, (late) => {
      // Waited for ten timeouts at most, then said, and the shard goes on: a run that never ends must not
      // silence the stream for good (a review of the first version).
      const bound = 10 * (this.options.timeoutMs ?? 30_000);
      let timer: NodeJS.Timeout | undefined;
      const given = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          this.options.onError?.(new Error(`${this.options.functionName}: an invocation is still running ${bound} ms after its timeout; the shard goes on without waiting for it`));
          resolve();
        }, bound);
      });
      cursor.late = Promise.race([late.then(() => undefined, () => undefined), given]).finally(() => {
        clearTimeout(timer);
        delete cursor.late;
      });
    });
    if (failedFrom === undefined) {
      cursor.attempts = 0;
      if (this.options.redeliverBatch?.()) return batch.length;
      cursor.pending.splice(0, batch.length);
      return batch.length;
    }
    // Checkpoint everything before the first failure; retry from there. Retries are counted per checkpoint,
    // as Lambda counts them per batch: one that moved starts the count again.
    cursor.pending.splice(0, failedFrom.index);
    if (failedFrom.index > 0) cursor.attempts = 0;
    cursor.attempts += 1;
    if (cursor.attempts > (this.options.maxRetryAttempts ?? 3)) {
      const discarded = cursor.pending.splice(0, batch.length - failedFrom.index);
      this.options.onDiscard?.({ records: discarded, error: failedFrom.error });
      cursor.attempts = 0;
    }
    return failedFrom.index;
  }

  /**
   * One GetRecords on the shard. An iterator that expired (15 minutes unused, as after a machine's sleep)
   * is renewed after the last record read and the read made again (regression: it failed for good, and the
   * stream was read no more until a restart); one whose records were trimmed (24 h) starts again at the
   * oldest kept, and says what was lost.
   */
  private async readRecords(shardId: string, cursor: ShardCursor, limit: number): Promise<GetRecordsCommandOutput> {
    const { streams, streamArn } = this.options;
    const read = (iterator: string | undefined) => streams.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: limit }));
    try {
      return await read(cursor.iterator);
    } catch (error) {
      const trimmed = error instanceof TrimmedDataAccessException;
      if (!(error instanceof ExpiredIteratorException) && !trimmed) throw error;
      if (trimmed) this.options.onError?.(new Error(`${this.options.functionName}: records of shard ${shardId} after ${cursor.lastRead ?? 'its start'} were trimmed before they were read; reading on from the oldest kept`));
      const after = !trimmed && cursor.lastRead !== undefined;
      const renewed = await streams.send(
        new GetShardIteratorCommand({ StreamArn: streamArn, ShardId: shardId, ...(after ? { ShardIteratorType: 'AFTER_SEQUENCE_NUMBER', SequenceNumber: cursor.lastRead } : { ShardIteratorType: 'TRIM_HORIZON' }) }),
      );
      cursor.iterator = renewed.ShardIterator;
      return read(cursor.iterator);
    }
  }

  /** Undefined when the batch succeeded; else the index of the first record to retry from. */
  private async invoke(batch: DynamoDBRecord[], outran: (late: Promise<unknown>) => void): Promise<{ index: number; error: string } | undefined> {
    const { functionName, handler, region } = this.options;
    const context = lambdaContext(functionName, this.options.timeoutMs ?? 30_000, region);
    const started = Date.now();
    const items = batch.map((record) => record.dynamodb?.SequenceNumber ?? '');
    let result: { index: number; error: string } | undefined;
    try {
      const run = handler({ Records: batch }, context);
      const response = await withinTimeout(run, this.options.timeoutMs ?? 30_000).catch((error: unknown) => {
        if (error instanceof TimedOut) outran(run);
        throw error;
      });
      const failures = response?.batchItemFailures ?? [];
      if (failures.length > 0) {
        const indexes = failures.map((failure) => items.indexOf(failure.itemIdentifier ?? ''));
        // An identifier that is not in the batch makes the whole batch fail, as in Lambda.
        const index = indexes.some((value) => value < 0) ? 0 : Math.min(...indexes);
        result = { index, error: 'batch item failure reported' };
      }
    } catch (thrown) {
      result = { index: 0, error: describeError(thrown) };
    }
    this.options.onInvocation?.({
      at: new Date(started).toISOString(),
      function: functionName,
      requestId: context.awsRequestId,
      trigger: 'stream',
      durationMs: Date.now() - started,
      outcome: result === undefined ? 'ok' : result.index > 0 ? 'partial' : 'error',
      items,
      failedItems: result === undefined ? [] : items.slice(result.index),
      ...(result ? { error: result.error } : {}),
    });
    return result;
  }
}

type LambdaImage = NonNullable<NonNullable<DynamoDBRecord['dynamodb']>['NewImage']>;
type LambdaValue = LambdaImage[string];

/** The SDK gives binary attributes as bytes; Lambda delivers them base64-encoded. Everything else is the same JSON. */
function toLambdaValue(value: AttributeValue): LambdaValue {
  if (value.B !== undefined) return { B: Buffer.from(value.B).toString('base64') };
  if (value.BS !== undefined) return { BS: value.BS.map((item) => Buffer.from(item).toString('base64')) };
  if (value.L !== undefined) return { L: value.L.map(toLambdaValue) };
  if (value.M !== undefined) return { M: toLambdaImage(value.M) };
  return value as LambdaValue;
}

function toLambdaImage(image: Record<string, AttributeValue> | undefined): LambdaImage {
  const out: LambdaImage = {};
  for (const [name, value] of Object.entries(image ?? {})) out[name] = toLambdaValue(value);
  return out;
}

function toLambdaRecord(record: StreamRecord, options: StreamEventSourceOptions): DynamoDBRecord {
  const data = record.dynamodb;
  const created = data?.ApproximateCreationDateTime;
  return {
    eventID: record.eventID,
    eventName: record.eventName,
    eventVersion: record.eventVersion ?? '1.1',
    eventSource: 'aws:dynamodb',
    awsRegion: options.region,
    eventSourceARN: options.streamArn,
    // Who made the change, when it was DynamoDB itself (TTL): Lambda spells the fields in camel case.
    ...(record.userIdentity ? { userIdentity: { type: record.userIdentity.Type, principalId: record.userIdentity.PrincipalId } } : {}),
    dynamodb: {
      ...(created ? { ApproximateCreationDateTime: Math.floor(created.getTime() / 1000) } : {}),
      Keys: toLambdaImage(data?.Keys),
      ...(data?.NewImage ? { NewImage: toLambdaImage(data.NewImage) } : {}),
      ...(data?.OldImage ? { OldImage: toLambdaImage(data.OldImage) } : {}),
      SequenceNumber: data?.SequenceNumber,
      SizeBytes: data?.SizeBytes,
      StreamViewType: data?.StreamViewType,
    },
  };
}
