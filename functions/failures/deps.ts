import { getNumberFromEnv, getStringFromEnv } from '@aws-lambda-powertools/commons/utils/env';
import { Logger } from '@aws-lambda-powertools/logger';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { LedgerTable } from '../../shared/adapters/ledger-table.js';

/** Composition root of the failures function: the ledger table only (it neither calls targets nor reads objects). */
export const logger = new Logger({ serviceName: 'dispatch-ledger', persistentKeys: { function: 'failures' } });

export const failureDeps = {
  store: new LedgerTable(DynamoDBDocumentClient.from(new DynamoDBClient({}), { marshallOptions: { removeUndefinedValues: true } }), {
    tableName: getStringFromEnv({ key: 'LEDGER_TABLE_NAME', errorMessage: 'LEDGER_TABLE_NAME is not set' }),
    retentionSeconds: getNumberFromEnv({ key: 'RETENTION_DAYS', defaultValue: 90 }) * 86_400,
  }),
  now: () => new Date(),
};
