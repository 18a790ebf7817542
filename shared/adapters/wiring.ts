import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { TargetPort, TargetRegistration } from '../targets/port.js';
import type { LedgerConfig } from './config.js';
import { httpTarget } from './http-target.js';
import { LedgerTable } from './ledger-table.js';
import { S3Blobs } from './s3-blobs.js';
import { SecretCache } from './secrets.js';

/** The adapters every ledger function uses, built once per execution environment. */
export interface LedgerAdapters {
  readonly dynamodb: DynamoDBClient;
  readonly documents: DynamoDBDocumentClient;
  readonly table: LedgerTable;
  readonly blobs: S3Blobs;
  readonly targetFor: (registration: TargetRegistration) => TargetPort;
}

export function buildLedgerAdapters(config: LedgerConfig): LedgerAdapters {
  const dynamodb = new DynamoDBClient({});
  const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
  // Path-style addressing works with every S3 endpoint, the local one included.
  const s3 = new S3Client({ forcePathStyle: true });
  let secrets: SecretCache | undefined;
  const targets = new Map<string, TargetPort>();
  return {
    dynamodb,
    documents,
    table: new LedgerTable(documents, { tableName: config.tableName, retentionSeconds: config.retentionSeconds, registry: config.registry, targetCacheMs: config.targetCacheMs }),
    blobs: new S3Blobs(s3, config.bucketName),
    targetFor: (registration) => {
      const cacheKey = `${registration.name}|${registration.baseUrl}|${registration.secretRef ?? ''}`;
      let target = targets.get(cacheKey);
      if (!target) {
        const { secretRef } = registration;
        const authHeader = secretRef
          ? () => {
              secrets ??= new SecretCache(new SecretsManagerClient({}));
              return secrets.get(secretRef);
            }
          : undefined;
        target = httpTarget(registration, { timeoutMs: config.targetTimeoutMs, ...(authHeader ? { authHeader } : {}) });
        targets.set(cacheKey, target);
      }
      return target;
    },
  };
}
