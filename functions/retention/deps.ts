import { functionLogger, functionMetrics } from '../../shared/adapters/powertools.js';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import type { LedgerConfig, ReadConfigOptions } from '../../shared/adapters/config.js';
import { LiveDispatchesTable } from '../../shared/adapters/live-dispatches.js';
import { S3ObjectSweeper } from '../../shared/adapters/s3-retention.js';
import type { LiveDispatches, ObjectSweeper } from '../../shared/usecases/retention.js';

/** Composition root of the retention function: the S3 and table clients built once per execution environment. */
export const logger = functionLogger('retention');
export const metrics = functionMetrics();

export const CONFIG: ReadConfigOptions = { requireApiBaseUrl: false };

export interface RetentionDeps {
  readonly objects: ObjectSweeper;
  readonly live: LiveDispatches;
  /** An anchor put back lives another twice the retention (as a fresh one does). */
  readonly anchorSeconds: number;
}

export function retentionDeps(config: LedgerConfig): RetentionDeps {
  const retentionSeconds = config.retentionSeconds;
  return {
    objects: new S3ObjectSweeper(new S3Client({}), config.bucketName),
    live: new LiveDispatchesTable(DynamoDBDocumentClient.from(new DynamoDBClient({}), { marshallOptions: { removeUndefinedValues: true } }), { tableName: config.tableName, retentionSeconds }),
    anchorSeconds: 2 * retentionSeconds,
  };
}
