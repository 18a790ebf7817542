import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { DynamoDBRecord } from 'aws-lambda';
import type { DetailType } from '../events/catalog.js';
import { publishStreamBatch, type PublishEvents } from '../events/derive.js';
import { streamChangeOf } from './stream-records.js';

/** Marker objects: `replayed/<failure record key>`, written once its events are on the bus. */
export const REPLAYED_PREFIX = 'replayed/';

export interface ReplayReport {
  /** Failure records in the bucket (markers aside). */
  readonly found: number;
  /** Replayed by this run. */
  readonly replayed: number;
  /** Already replayed by an earlier run. */
  readonly alreadyReplayed: number;
  /** Events put on the bus by this run. */
  readonly events: number;
}

export class UnreadableFailureRecordError extends Error {
  override readonly name = 'UnreadableFailureRecordError';
  constructor(
    readonly key: string,
    reason: string,
  ) {
    super(`s3 failure record ${key}: ${reason}`);
  }
}

/**
 * The stream records of one Lambda on-failure record (S3 destination): Lambda keeps the whole
 * invocation under `payload` — an object, or the same JSON as a string.
 */
export function recordsOfFailure(key: string, text: string): DynamoDBRecord[] {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    throw new UnreadableFailureRecordError(key, 'not JSON');
  }
  let payload = (document as { payload?: unknown }).payload;
  if (typeof payload === 'string') {
    try {
      payload = JSON.parse(payload);
    } catch {
      throw new UnreadableFailureRecordError(key, 'payload is not JSON');
    }
  }
  const records = (payload as { Records?: unknown } | undefined)?.Records;
  if (!Array.isArray(records)) throw new UnreadableFailureRecordError(key, 'no payload.Records (is this a DynamoDB stream on-failure record?)');
  return records as DynamoDBRecord[];
}

/**
 * `ledger stream replay`: publishes the events of stream batches the publisher gave up on (the
 * stream forgets after 24 hours; the failure bucket does not), oldest first.
 *
 * Idempotent: a record is marked once all its events are on the bus and skipped afterwards; a crash
 * before the mark republishes events with the same `eventId`s, which consumers already deduplicate.
 */
export async function replayStreamFailures(deps: { readonly s3: S3Client; readonly bucket: string; readonly publish: PublishEvents; readonly published?: ReadonlySet<DetailType> }): Promise<ReplayReport> {
  const keys: string[] = [];
  const markers = new Set<string>();
  let token: string | undefined;
  do {
    const page = await deps.s3.send(new ListObjectsV2Command({ Bucket: deps.bucket, ContinuationToken: token }));
    for (const { Key: key } of page.Contents ?? []) {
      if (!key) continue;
      if (key.startsWith(REPLAYED_PREFIX)) markers.add(key.slice(REPLAYED_PREFIX.length));
      else keys.push(key);
    }
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);

  let replayed = 0;
  let events = 0;
  // Lambda's keys start with a timestamp: sorted keys replay the oldest failure first.
  for (const key of keys.sort()) {
    if (markers.has(key)) continue;
    const object = await deps.s3.send(new GetObjectCommand({ Bucket: deps.bucket, Key: key }));
    const records = recordsOfFailure(key, (await object.Body?.transformToString('utf8')) ?? '');
    const report = await publishStreamBatch(records.map(streamChangeOf), { publish: deps.publish, ...(deps.published ? { published: deps.published } : {}) });
    if (report.failure) {
      const cause = report.failure.error instanceof Error ? report.failure.error.message : String(report.failure.error);
      throw new Error(`replay of ${key} stopped at stream record ${report.failure.sequenceNumber}: ${cause}`, { cause: report.failure.error });
    }
    await deps.s3.send(
      new PutObjectCommand({
        Bucket: deps.bucket,
        Key: `${REPLAYED_PREFIX}${key}`,
        Body: JSON.stringify({ replayedAt: new Date().toISOString(), events: report.published.length }),
        ContentType: 'application/json',
      }),
    );
    replayed += 1;
    events += report.published.length;
  }
  return { found: keys.length, replayed, alreadyReplayed: keys.length - replayed, events };
}
