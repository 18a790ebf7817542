import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { LambdaClient } from '@aws-sdk/client-lambda';
import { S3Client } from '@aws-sdk/client-s3';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { dynamoDbFault, dynamoDbUnavailable } from '../faults.js';
import { parseLambdaRunId, type TargetPort, type TargetRegistration } from '../targets/port.js';
import type { LedgerConfig } from './config.js';
import type { DispatchWorkDeps } from '../ledger/port.js';
import { httpTarget } from './http-target.js';
import type { SFNClient } from '@aws-sdk/client-sfn';
import { approvalTokens } from './approval-tokens.js';
import { sfnClientFor, stepFunctionsTarget } from './stepfunctions-target.js';
import { durableTarget } from './durable-target.js';
import { lambdaClientFor, lambdaTarget, type LambdaFailure } from './lambda-target.js';
import { lambdaAdmissionNudge } from './admission-nudge.js';
import type { LedgerTableCore, LedgerTableOptions } from './ledger-table.js';
import { S3Blobs } from './s3-blobs.js';
import { SecretCache, type SecretScope } from './secrets.js';

/** The adapters every ledger function uses, built once per execution environment. */
export interface LedgerAdapters<T extends LedgerTableCore = LedgerTableCore> {
  /** The nudge to the monitor after a write that freed a slot (CONTRACT §11), when one is configured. */
  readonly admissionNudge: ((target: string) => Promise<void>) | undefined;
  readonly dynamodb: DynamoDBClient;
  readonly documents: DynamoDBDocumentClient;
  readonly table: T;
  readonly blobs: S3Blobs;
  readonly targetFor: (registration: TargetRegistration) => TargetPort;
}

// Replaced by `true` in the deployed bundles (esbuild `define`); undeclared (typeof "undefined") elsewhere.
declare const DISPATCH_LEDGER_DEPLOYED_BUNDLE: boolean | undefined;

/**
 * The census's DynamoDB faults on `client` (inert unless installed; absent from the deployed bundles,
 * where `client` comes back as it was). The deserialize step runs once per attempt, inside the SDK's
 * retries: a throttle is refused before the request is sent, a timeout is thrown after it was applied.
 */
export function withDynamoDbFaults(client: DynamoDBClient): DynamoDBClient {
  // Spelled here, not imported: only a `typeof` of the defined name itself folds in the deployed bundle
  // (an imported constant stayed a variable there, and kept this middleware in every function).
  if (typeof DISPATCH_LEDGER_DEPLOYED_BUNDLE !== 'undefined') return client;
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const command = context.commandName ?? 'unknown';
      const refused = dynamoDbFault('before_send', command) ?? dynamoDbUnavailable(command, () => partitionKeysOf(args.input));
      if (refused) throw refused;
      const output = await next(args);
      const lost = dynamoDbFault('after_apply', command);
      if (lost) throw lost;
      return output;
    },
    { step: 'deserialize', name: 'dispatchLedgerFaults' },
  );
  return client;
}

/** The `pk` values a DynamoDB request names (an item, a key, a transaction's items), marshalled or not. */
function partitionKeysOf(input: unknown): string[] {
  const pkOf = (item: unknown): string[] => {
    const pk = isRecord(item) ? item['pk'] : undefined;
    const value = isRecord(pk) ? pk['S'] : pk;
    return typeof value === 'string' ? [value] : [];
  };
  if (!isRecord(input)) return [];
  const transaction = Array.isArray(input['TransactItems']) ? input['TransactItems'] : [];
  const parts = transaction.flatMap((entry: unknown) => (isRecord(entry) ? Object.values(entry) : []));
  return [input, ...parts].flatMap((part) => (isRecord(part) ? [...pkOf(part['Item']), ...pkOf(part['Key'])] : []));
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null;

/**
 * `Table`: the table adapter's class — `LedgerTable` for a function that writes what only it writes
 * (intake, monitor), `LedgerTableCore` for the API, whose bundle then carries none of those writes.
 */
export function buildLedgerAdapters<T extends LedgerTableCore>(config: LedgerConfig, Table: new (db: DynamoDBDocumentClient, options: LedgerTableOptions) => T): LedgerAdapters<T> {
  const dynamodb = withDynamoDbFaults(new DynamoDBClient({}));
  const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
  // Path-style addressing works with every S3 endpoint, the local one included. Built on the first
  // object read or written, as the Lambda and Secrets Manager clients are: most invocations touch none.
  let s3: S3Client | undefined;
  const s3Client = () => (s3 ??= new S3Client({ forcePathStyle: true }));
  let secrets: SecretCache | undefined;
  // In AWS a target may only name a secret under the stack's prefix, or the deploy-time target's own.
  const scope: SecretScope | undefined =
    config.principalMode === 'open'
      ? undefined
      : { prefix: config.targetSecretPrefix, exact: new Set([...config.registry.targets.values()].flatMap((target) => (target.kind === 'http' && target.secretRef ? [target.secretRef] : []))) };
  const targets = new Map<string, TargetPort>();
  const table = new Table(documents, { tableName: config.tableName, retentionSeconds: config.retentionSeconds, registry: config.registry, targetCacheMs: config.targetCacheMs, inboxShards: config.inboxShards });
  let lambda: LambdaClient | undefined;
  let sfn: SFNClient | undefined;
  // Bounded like every call to a target: a hung call must not hold the function.
  const sfnClient = () => (sfn ??= sfnClientFor(config.targetTimeoutMs));
  const lambdaClient = () => (lambda ??= lambdaClientFor(config.targetTimeoutMs));
  return {
    admissionNudge: config.admissionFunction ? (target) => lambdaAdmissionNudge(lambdaClient(), config.admissionFunction)(target) : undefined,
    dynamodb,
    documents,
    table,
    blobs: new S3Blobs(s3Client, config.bucketName),
    targetFor: (registration) => {
      // A person works a manual target (CONTRACT §13): submission never asks for its port; were it asked, nothing is reached.
      if (registration.kind === 'manual') return refusedTarget('manual target');
      /** One adapter per registration as written (a changed registration gets a new one). */
      const cached = (cacheKey: string, make: () => TargetPort): TargetPort => {
        const found = targets.get(cacheKey);
        if (found) return found;
        const made = make();
        targets.set(cacheKey, made);
        return made;
      };
      // Bounded like an http target's calls: a hung Invoke must not hold the function.
      if (registration.kind === 'lambda') {
        return cached(`lambda|${registration.name}|${registration.functionArn}|${registration.stateTable ?? ''}|${registration.timeoutSeconds}`, () =>
          lambdaTarget(registration, { lambda: lambdaClient(), documents, failureOf: failuresIn(table), now: () => new Date() }),
        );
      }
      if (registration.kind === 'stepfunctions') {
        return cached(`stepfunctions|${registration.name}|${registration.stateMachineArn}`, () => stepFunctionsTarget(registration, { sfn: sfnClient(), approvalTokens: approvalTokens(documents, config.tableName), now: () => new Date() }));
      }
      if (registration.kind === 'durable') {
        return cached(`durable|${registration.name}|${registration.functionArn}`, () => durableTarget(registration, { lambda: lambdaClient(), approvalTokens: approvalTokens(documents, config.tableName), now: () => new Date() }));
      }
      const cacheKey = `${registration.name}|${registration.baseUrl}|${registration.secretRef ?? ''}`;
      let target = targets.get(cacheKey);
      if (!target) {
        const { secretRef } = registration;
        const authHeader = secretRef
          ? () => {
              secrets ??= new SecretCache(new SecretsManagerClient({}), config.secretCacheMs, undefined, scope);
              return secrets.get(secretRef);
            }
          : undefined;
        try {
          target = httpTarget(registration, { timeoutMs: config.targetTimeoutMs, addressPolicy: config.targetAddressPolicy, ...(authHeader ? { authHeader } : {}) });
        } catch (error) {
          // A registration the policy refuses (say, a table entry written before it): every call is
          // unavailable, with the reason, rather than failing the whole invocation that met it.
          if (!(error instanceof TypeError)) throw error;
          target = refusedTarget(error.message);
        }
        targets.set(cacheKey, target);
      }
      return target;
    },
  };
}

/** The failures Lambda's on-failure destination delivered, kept in the ledger table per attempt. */
function failuresIn(table: LedgerTableCore): (runId: string) => Promise<LambdaFailure | undefined> {
  return async (runId) => {
    const named = parseLambdaRunId(runId);
    return named ? table.getLambdaFailure(named.dispatchId, named.attempt) : undefined;
  };
}

/** A target no call may reach: every outcome `unavailable`, with why. */
function refusedTarget(reason: string): TargetPort {
  const refuse = async () => ({ kind: 'unavailable', reason }) as const;
  return { submit: refuse, lookup: refuse, decideApproval: refuse, cancel: refuse };
}

/**
 * What every function that writes a dispatch and talks to its target is given besides its store (the
 * intake, the monitor, the API): the same fields from the same config, in one place.
 */
export function dispatchWorkDeps(config: LedgerConfig, adapters: Pick<LedgerAdapters, 'blobs' | 'targetFor'>): Omit<DispatchWorkDeps, 'store'> {
  return {
    blobs: adapters.blobs,
    targetFor: adapters.targetFor,
    callbackUrl: config.apiBaseUrl,
    retryPolicy: config.retryPolicy,
    now: () => new Date(),
    claimSeconds: config.claimSeconds,
    parentWaitSeconds: config.parentWaitSeconds,
  };
}
