import { getNumberFromEnv, getStringFromEnv } from '@aws-lambda-powertools/commons/utils/env';
import { Logger } from '@aws-lambda-powertools/logger';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { inboxShardCount } from '../../shared/adapters/ledger-keys.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { lambdaAdmissionNudge, nudgingAdmission } from '../../shared/adapters/admission-nudge.js';
import { parseStaticRegistry } from '../../shared/adapters/static-registry.js';
import type { LambdaFailureDeps } from '../../shared/usecases/lambda-failure.js';

/** Composition root of the failures function: the ledger table only (it neither calls targets nor reads objects). */
export const logger = new Logger({ serviceName: 'dispatch-ledger', persistentKeys: { function: 'failures' } });

const principalMode = getStringFromEnv({ key: 'PRINCIPAL_MODE', defaultValue: 'enforce' }) === 'open' ? 'open' : 'enforce';
const table = new LedgerTable(DynamoDBDocumentClient.from(new DynamoDBClient({}), { marshallOptions: { removeUndefinedValues: true } }), {
  tableName: getStringFromEnv({ key: 'LEDGER_TABLE_NAME', errorMessage: 'LEDGER_TABLE_NAME is not set' }),
  retentionSeconds: getNumberFromEnv({ key: 'RETENTION_DAYS', defaultValue: 90 }) * 86_400,
  // Deploy-time targets and principals: a record is believed only from the failed function's own role.
  registry: parseStaticRegistry(getStringFromEnv({ key: 'LEDGER_REGISTRY', defaultValue: '' }), principalMode === 'open' ? 'allow-loopback' : 'public-only'),
  // A failure that ends a run makes its result: its inbox entry goes where every other writer puts it.
  inboxShards: inboxShardCount(getNumberFromEnv({ key: 'INBOX_SHARDS', defaultValue: 1 })),
});

// A failure recorded frees its run's slot: the monitor is nudged to admit the next waiting dispatch (CONTRACT §11).
// The Lambda client is built on the first nudge (only a freed slot someone waits for sends one), as wiring.ts does.
const admissionFunction = getStringFromEnv({ key: 'LEDGER_ADMISSION_FUNCTION', defaultValue: '' });
let lambda: LambdaClient | undefined;
const store = admissionFunction
  ? nudgingAdmission(table, (target) => lambdaAdmissionNudge((lambda ??= new LambdaClient({})), admissionFunction)(target), (error) => logger.warn('admission nudge failed; the next tick admits', { error }))
  : table;

export const failureDeps: LambdaFailureDeps = { store, principals: table, principalMode, now: () => new Date() };
