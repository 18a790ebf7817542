import { functionLogger } from '../../shared/adapters/powertools.js';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import type { LedgerConfig, ReadConfigOptions } from '../../shared/adapters/config.js';
import { parseStaticRegistry } from '../../shared/adapters/static-registry.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { lambdaAdmissionNudge, nudgingAdmission } from '../../shared/adapters/admission-nudge.js';
import type { LambdaFailureDeps } from '../../shared/usecases/lambda-failure.js';

/** Composition root of the failures function: the ledger table only (it neither calls targets nor reads objects). */
export const logger = functionLogger('failures');

export const CONFIG: ReadConfigOptions = { requireApiBaseUrl: false, requireBucket: false, parseRegistry: parseStaticRegistry };

export function failureDeps(config: LedgerConfig): LambdaFailureDeps {
  const table = new LedgerTable(DynamoDBDocumentClient.from(new DynamoDBClient({}), { marshallOptions: { removeUndefinedValues: true } }), {
    tableName: config.tableName,
    retentionSeconds: config.retentionSeconds,
    // Deploy-time targets and principals: a record is believed only from the failed function's own role.
    registry: config.registry,
    // A failure that ends a run makes its result: its inbox entry goes where every other writer puts it.
    inboxShards: config.inboxShards,
  });
  // A failure recorded frees its run's slot: the monitor is nudged to admit the next waiting dispatch (CONTRACT §11).
  // The Lambda client is built on the first nudge (only a freed slot someone waits for sends one), as wiring.ts does.
  let lambda: LambdaClient | undefined;
  const store = config.admissionFunction
    ? nudgingAdmission(table, (target) => lambdaAdmissionNudge((lambda ??= new LambdaClient({})), config.admissionFunction)(target), (error) => logger.warn('admission nudge failed; the next tick admits', { error }))
    : table;
  return { store, principals: table, principalMode: config.principalMode, now: () => new Date() };
}
