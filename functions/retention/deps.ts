import { functionLogger, functionMetrics } from '../../shared/adapters/powertools.js';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { readLedgerConfig } from '../../shared/adapters/config.js';
import { LiveDispatchesTable } from '../../shared/adapters/live-dispatches.js';
import { S3ObjectSweeper } from '../../shared/adapters/s3-retention.js';
import type { LiveDispatches, ObjectSweeper } from '../../shared/usecases/retention.js';

/** Composition root of the retention function: config and the S3 client built once per execution environment. */
export const logger = functionLogger('retention');
export const metrics = functionMetrics();

const config = readLedgerConfig({ requireApiBaseUrl: false });

export const objects: ObjectSweeper = new S3ObjectSweeper(new S3Client({}), config.bucketName);

const retentionSeconds = config.retentionSeconds;
export const live: LiveDispatches = new LiveDispatchesTable(DynamoDBDocumentClient.from(new DynamoDBClient({}), { marshallOptions: { removeUndefinedValues: true } }), {
  tableName: config.tableName,
  retentionSeconds,
});
/** An anchor put back lives another twice the retention (as a fresh one does). */
export const anchorSeconds = 2 * retentionSeconds;
