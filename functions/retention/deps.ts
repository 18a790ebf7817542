import { getStringFromEnv } from '@aws-lambda-powertools/commons/utils/env';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { S3Client } from '@aws-sdk/client-s3';
import { S3ObjectSweeper } from '../../shared/adapters/s3-retention.js';
import type { ObjectSweeper } from '../../shared/retention/retention.js';

/** Composition root of the retention function: config and the S3 client built once per execution environment. */
export const logger = new Logger({ serviceName: 'dispatch-ledger', persistentKeys: { function: 'retention' } });
export const metrics = new Metrics({ namespace: 'DispatchLedger', serviceName: 'dispatch-ledger' });

const bucket = getStringFromEnv({ key: 'EVIDENCE_BUCKET', errorMessage: 'EVIDENCE_BUCKET is not set' });

export const objects: ObjectSweeper = new S3ObjectSweeper(new S3Client({}), bucket);
