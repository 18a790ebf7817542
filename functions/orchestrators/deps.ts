import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { S3Client } from '@aws-sdk/client-s3';
import type { SFNClient } from '@aws-sdk/client-sfn';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { functionLogger } from '../../shared/adapters/powertools.js';
import type { LedgerConfig, ReadConfigOptions } from '../../shared/adapters/config.js';
import { parseStaticRegistry } from '../../shared/adapters/static-registry.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import { lookUpExecution, sfnClientFor } from '../../shared/adapters/stepfunctions-target.js';
import { lambdaAdmissionNudge, nudgingAdmission } from '../../shared/adapters/admission-nudge.js';
import type { TargetPort } from '../../shared/targets/port.js';
import type { OrchestratorDeps } from '../../shared/usecases/orchestrators.js';

/**
 * Composition root of the orchestrators function: the ledger table, the bucket (an output above the
 * inline bound is kept there as the result's body) and the state machine targets alone — it looks a
 * status change up before recording it, and never calls any other kind of target.
 */
export const logger = functionLogger('orchestrators');

export const CONFIG: ReadConfigOptions = { requireApiBaseUrl: false, parseRegistry: parseStaticRegistry };

/**
 * A target as this function sees it: a state machine's executions can be looked up, and nothing else is
 * asked of any target here (it submits, cancels and decides nothing; only state machines report on its queue).
 */
const lookupsOnly = (lookup: TargetPort['lookup']): TargetPort => ({
  submit: async () => ({ kind: 'unavailable', reason: 'the orchestrators function submits nothing' }),
  lookup,
  decideApproval: async () => ({ kind: 'unavailable', reason: 'the orchestrators function decides no approval' }),
  cancel: async () => ({ kind: 'unavailable', reason: 'the orchestrators function cancels nothing' }),
});
const NOT_A_STATE_MACHINE = lookupsOnly(async () => ({ kind: 'unavailable', reason: 'not a state machine target' }));

export function orchestratorDeps(config: LedgerConfig): OrchestratorDeps {
  const documents = DynamoDBDocumentClient.from(new DynamoDBClient({}), { marshallOptions: { removeUndefinedValues: true } });
  const table = new LedgerTable(documents, { tableName: config.tableName, retentionSeconds: config.retentionSeconds, registry: config.registry, targetCacheMs: config.targetCacheMs, inboxShards: config.inboxShards });
  let s3: S3Client | undefined;
  const blobs = new S3Blobs(() => (s3 ??= new S3Client({ forcePathStyle: true })), config.bucketName);
  // Bounded like every call to a target: a hung lookup must not hold the function.
  let sfn: SFNClient | undefined;
  const executions = lookupsOnly((runId) => lookUpExecution((sfn ??= sfnClientFor(config.targetTimeoutMs)), runId));
  const targetFor = (registration: Parameters<OrchestratorDeps['targetFor']>[0]): TargetPort => (registration.kind === 'stepfunctions' ? executions : NOT_A_STATE_MACHINE);
  // An end recorded frees its run's slot: the monitor is nudged to admit the next waiting dispatch (CONTRACT §11).
  let lambda: LambdaClient | undefined;
  const store = config.admissionFunction
    ? nudgingAdmission(table, (target) => lambdaAdmissionNudge((lambda ??= new LambdaClient({})), config.admissionFunction)(target), (error) => logger.warn('admission nudge failed; the next tick admits', { error }))
    : table;
  // The registry tells an operator's redrive from the DLQ (its first sender carried) from anyone else's claim.
  return { store, blobs, targetFor, principalMode: config.principalMode, principals: table, now: () => new Date() };
}
