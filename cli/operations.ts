import { readFileSync } from 'node:fs';
import { ArgumentsError as UsageError, parseCommandArgs } from './args.js';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { redriveDeadLetters } from '../shared/adapters/dlq-redrive.js';
import { publish } from '../shared/adapters/event-bus.js';
import { LedgerTable } from '../shared/adapters/ledger-writes.js';
import { parseStaticRegistry } from '../shared/adapters/static-registry.js';
import { replayStreamFailures } from '../shared/adapters/stream-replay.js';
import type { DetailType } from '../shared/events/catalog.js';
import { profileFromEnv, publishedDetailTypes } from '../shared/events/profile.js';
import { ORIGIN, TARGET_NAME } from '../shared/dispatch/ids.js';
import { MAX_ORIGIN_SETTINGS } from '../shared/dispatch/records.js';
import type { Principal } from '../shared/principals/principals.js';
import { MAX_CONCURRENT_RUNS_LIMIT } from '../shared/targets/port.js';
import { baseUrlProblem } from '../shared/adapters/target-address.js';
import { CONNECTION_OPTIONS, connect, LedgerConnectionError, localInfo, localQueueClient, remoteQueueClient, resolveConnection } from './connect.js';
import { shown } from './table.js';

/**
 * Operations commands. Against AWS they use the SDK's usual configuration (profile, region, and the
 * `AWS_ENDPOINT_URL_*` variables) and the stack's outputs passed as flags; `dlq redrive` without
 * queue URLs works on the running local platform.
 */

type Print = (line: string) => void;


const DLQ_USAGE =
  'usage: ledger dlq redrive [--stack NAME | --dlq-url URL --queue-url URL [--table LedgerTableName]] [--registry FILE] [--region R] [--limit N] [--json]\n' +
  '  --stack reads the three from the stack\'s outputs (DeadLetterQueueUrl, DispatchQueueUrl, LedgerTableName).\n' +
  '  Each message carries its DLQ copy\'s own SenderId as its first sender (LedgerRedrivenFor), unless that\n' +
  '  sender is a registered operator (an earlier redrive): --table (and --registry, the functions\' LEDGER_REGISTRY\n' +
  '  as JSON, for operators registered at deploy time) says who is one. Without them no sender is taken for one.';

/** `ledger dlq redrive [--stack S | --dlq-url U --queue-url U [--table T]] [--registry FILE] [--region R] [--limit N] [--json]` */
export async function dlq(args: string[], print: Print): Promise<number> {
  const [command, ...rest] = args;
  if (command !== 'redrive') throw new UsageError(DLQ_USAGE);
  const { values } = parseCommandArgs({
    args: rest,
    options: {
      ...CONNECTION_OPTIONS,
      'dlq-url': { type: 'string' },
      table: { type: 'string' },
      registry: { type: 'string' },
      limit: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  const limit = values.limit === undefined ? undefined : Number(values.limit);
  if (limit !== undefined && (!Number.isInteger(limit) || limit < 1)) throw new UsageError(`--limit must be a whole number ≥ 1, got "${values.limit}"`);
  if (values['api-url'] !== undefined) throw new UsageError(`dlq redrive works on the queues, not the API: give --stack NAME, or --dlq-url and --queue-url\n${DLQ_USAGE}`);
  let sqs: SQSClient;
  let urls: { deadLetterQueueUrl: string; queueUrl: string };
  let tableName = values.table;
  let region = values.region;
  if (values.stack !== undefined) {
    if (values['dlq-url'] || values['queue-url'] || values.table) throw new UsageError(`--stack gives the queues and the table: leave out --dlq-url, --queue-url and --table\n${DLQ_USAGE}`);
    const connection = resolveConnection({ stack: values.stack, region: values.region });
    if (connection.kind !== 'stack') throw new LedgerConnectionError('--stack did not resolve to a stack');
    const { stack } = await (await connect({ stack: values.stack, region: connection.region })).endpoints();
    const output = (key: string): string => {
      const value = stack?.outputs[key];
      if (value === undefined) throw new LedgerConnectionError(shown`stack "${connection.stack}" (${stack?.status ?? 'unknown'}) has no output ${key}; it has: ${Object.keys(stack?.outputs ?? {}).join(', ') || 'none'}`);
      return value;
    };
    urls = { deadLetterQueueUrl: output('DeadLetterQueueUrl'), queueUrl: output('DispatchQueueUrl') };
    tableName = output('LedgerTableName');
    region = connection.region;
    sqs = remoteQueueClient(region);
  } else if (values['dlq-url'] || values['queue-url']) {
    if (!values['dlq-url'] || !values['queue-url']) throw new UsageError('give both --dlq-url and --queue-url (the stack outputs DeadLetterQueueUrl and DispatchQueueUrl), or --stack NAME');
    // The region, when not given, is the SDK's own (AWS_REGION, the profile's).
    sqs = remoteQueueClient(region);
    urls = { deadLetterQueueUrl: values['dlq-url'], queueUrl: values['queue-url'] };
  } else {
    if (region !== undefined) throw new UsageError(`--region goes with --stack or the queue URLs\n${DLQ_USAGE}`);
    const info = localInfo();
    sqs = localQueueClient(info);
    urls = { deadLetterQueueUrl: info.dlqUrl, queueUrl: info.dispatchQueueUrl };
  }
  if (values.registry !== undefined && tableName === undefined) {
    sqs.destroy();
    throw new UsageError(`--registry needs --table (or --stack)\n${DLQ_USAGE}`);
  }
  // Who is a registered operator: the table's principals, and the deploy-time ones if given.
  const dynamodb = tableName === undefined ? undefined : new DynamoDBClient(region === undefined ? {} : { region });
  try {
    const principals =
      dynamodb && tableName
        ? new LedgerTable(DynamoDBDocumentClient.from(dynamodb), {
            tableName,
            retentionSeconds: 0,
            ...(values.registry === undefined ? {} : { registry: parseStaticRegistry(readFileSync(values.registry, 'utf8')) }),
          })
        : undefined;
    const report = await redriveDeadLetters(sqs, { ...urls, ...(limit === undefined ? {} : { limit }), ...(principals ? { principals } : {}) });
    if (values.json) print(JSON.stringify(report));
    else {
      print(`moved ${report.moved} message(s) from the DLQ back to its queue`);
      for (const { messageId, reason } of report.failed) print(shown`  not moved: ${messageId}: ${reason}`);
    }
    return report.failed.length === 0 ? 0 : 1;
  } finally {
    sqs.destroy();
    dynamodb?.destroy();
  }
}

/** `ledger stream replay --bucket B [--bus NAME] [--events all|attention|TYPE,TYPE] [--json]` */
export async function stream(args: string[], print: Print): Promise<number> {
  const [command, ...rest] = args;
  const usage = 'usage: ledger stream replay --bucket STREAM_FAILURE_BUCKET [--bus dispatch-ledger] [--events all|attention|TYPE,TYPE] [--json]';
  if (command !== 'replay') throw new UsageError(usage);
  const { values } = parseCommandArgs({ args: rest, options: { bucket: { type: 'string' }, bus: { type: 'string', default: 'dispatch-ledger' }, events: { type: 'string', default: 'all' }, json: { type: 'boolean', default: false } } });
  if (!values.bucket) throw new UsageError(usage);
  // The stack's events profile (its `events` prop): a replay publishes what the publisher would have.
  let published: ReadonlySet<DetailType>;
  try {
    published = publishedDetailTypes(profileFromEnv(values.events));
  } catch (error) {
    throw new UsageError(`${error instanceof Error ? error.message : String(error)}\n${usage}`);
  }
  const s3 = new S3Client({ forcePathStyle: true });
  const eventBridge = new EventBridgeClient({});
  try {
    const busName = values.bus;
    const report = await replayStreamFailures({ s3, bucket: values.bucket, published, publish: (events) => publish(events, { client: eventBridge, busName }) });
    if (values.json) print(JSON.stringify(report));
    else print(`replayed ${report.replayed} failed batch(es), ${report.events} event(s); ${report.alreadyReplayed} already replayed earlier`);
    return 0;
  } finally {
    s3.destroy();
    eventBridge.destroy();
  }
}

/** `--max-concurrent-runs`: a whole number from 1 to 10,000 (CONTRACT §11), or absent (unlimited). */
export function maxConcurrentRunsOf(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const limit = /^\d{1,6}$/.test(value.trim()) ? Number(value.trim()) : Number.NaN;
  if (!(limit >= 1 && limit <= MAX_CONCURRENT_RUNS_LIMIT)) throw new UsageError(shown`--max-concurrent-runs must be a whole number from 1 to 10,000, got "${value}"`);
  return limit;
}

/**
 * `ledger registry target put --table T --name N --base-url U [--secret-id dispatch-ledger/{stackName}/targets/…] [--max-concurrent-runs N]`
 * `ledger registry principal put --table T --id AROA… (--origin O | --target N | --operator)`
 */
export async function registry(args: string[], print: Print): Promise<number> {
  const [kind, command, ...rest] = args;
  const usage =
    'usage: ledger registry target put --table T --name N --base-url https://… [--secret-id dispatch-ledger/STACK_NAME/targets/NAME] [--max-concurrent-runs N]\n' +
    '       ledger registry target put --table T --name N --kind manual   (work a person does: never submitted; attested with ledger manual)\n' +
    '       (the functions read only target secrets under their own stack\'s prefix dispatch-ledger/STACK_NAME/targets/;\n' +
    '        the base URL must be https, and not a loopback, link-local or metadata address;\n' +
    '        --max-concurrent-runs: at most N (1 to 10,000) of its runs at once, the rest wait; without it, unlimited)\n' +
    '       ledger registry principal put --table T --id ROLE_OR_USER_ID (--origin O | --target N | --operator)\n' +
    '       ledger registry origin put --table T --origin O [--max-delivery-attempts N] [--result-ttl-hours H]';
  if (command !== 'put' || (kind !== 'target' && kind !== 'principal' && kind !== 'origin')) throw new UsageError(usage);
  const { values } = parseCommandArgs({
    args: rest,
    options: {
      table: { type: 'string' },
      name: { type: 'string' },
      'base-url': { type: 'string' },
      'secret-id': { type: 'string' },
      id: { type: 'string' },
      origin: { type: 'string' },
      target: { type: 'string' },
      operator: { type: 'boolean', default: false },
      'max-delivery-attempts': { type: 'string' },
      'result-ttl-hours': { type: 'string' },
      'max-concurrent-runs': { type: 'string' },
      kind: { type: 'string', default: 'http' },
    },
  });
  if (!values.table) throw new UsageError(`--table is required (the stack output LedgerTableName)\n${usage}`);
  if (values['max-concurrent-runs'] !== undefined && kind !== 'target') throw new UsageError(`--max-concurrent-runs is a target's setting\n${usage}`);
  const maxConcurrentRuns = maxConcurrentRunsOf(values['max-concurrent-runs']);
  // CONTRACT §13: a manual target has nothing to call — no base URL, no secret — and so nothing to limit.
  const manual = kind === 'target' && values.kind === 'manual';
  if (kind === 'target' && values.kind !== 'http' && !manual) throw new UsageError(shown`--kind must be http or manual, not ${values.kind} (lambda, stepfunctions and durable targets are registered through the CDK construct, which grants their calls)\n${usage}`);
  if (manual && (values['base-url'] !== undefined || values['secret-id'] !== undefined || maxConcurrentRuns !== undefined)) {
    throw new UsageError('a manual target takes no --base-url, --secret-id or --max-concurrent-runs: nothing is ever submitted to it');
  }
  if (kind === 'target' && !manual) {
    // The functions in AWS would refuse it at every call (CONTRACT §8 v2): refuse it here, before writing.
    const problem = values['base-url'] === undefined ? 'is required' : baseUrlProblem(values['base-url'], 'public-only');
    if (problem) throw new UsageError(shown`--base-url ${problem}`);
  }
  const dynamodb = new DynamoDBClient({});
  const table = new LedgerTable(DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } }), { tableName: values.table, retentionSeconds: 0 });
  try {
    if (kind === 'target') {
      const { name, 'base-url': baseUrl, 'secret-id': secretRef } = values;
      if (!name || !TARGET_NAME.test(name)) throw new UsageError(`--name must match ${TARGET_NAME}`);
      if (manual) {
        await table.putTarget({ name, kind: 'manual' });
        print(shown`target ${name}: manual — dispatches to it are recorded and wait for a person (ledger manual <dispatchId> --kind … --note …)`);
        return 0;
      }
      if (!baseUrl) throw new UsageError('--base-url is required');
      // The limit is written with its slot counters' caps (what the slot write is conditioned on); a
      // target put again without it is unlimited again.
      await table.putTarget({ name, kind: 'http', baseUrl, ...(secretRef ? { secretRef } : {}), ...(maxConcurrentRuns === undefined ? {} : { maxConcurrentRuns }) });
      print(
        shown`target ${name} → ${baseUrl}` +
          (secretRef ? shown` (auth header from ${secretRef})` : '') +
          (maxConcurrentRuns === undefined ? ', no limit on concurrent runs' : shown`, at most ${maxConcurrentRuns} run(s) at once`),
      );
      return 0;
    }
    if (kind === 'origin') {
      // CONTRACT §10: how this origin's results inbox treats it (the deploy-time registry takes precedence).
      if (!values.origin || !ORIGIN.test(values.origin)) throw new UsageError(`--origin must match ${ORIGIN}\n${usage}`);
      const attempts = values['max-delivery-attempts'] === undefined ? undefined : Number(values['max-delivery-attempts']);
      const hours = values['result-ttl-hours'] === undefined ? undefined : Number(values['result-ttl-hours']);
      if (attempts !== undefined && !(Number.isInteger(attempts) && attempts >= 1 && attempts <= MAX_ORIGIN_SETTINGS.maxDeliveryAttempts)) throw new UsageError(`--max-delivery-attempts must be an integer from 1 to ${MAX_ORIGIN_SETTINGS.maxDeliveryAttempts}`);
      if (hours !== undefined && !(hours > 0 && hours <= MAX_ORIGIN_SETTINGS.resultTtlHours)) throw new UsageError(`--result-ttl-hours must be above 0 and at most ${MAX_ORIGIN_SETTINGS.resultTtlHours}`);
      await table.putOriginSettings(values.origin, { ...(attempts === undefined ? {} : { maxDeliveryAttempts: attempts }), ...(hours === undefined ? {} : { resultTtlHours: hours }) });
      print(shown`origin ${values.origin}: results dropped after ${String(attempts ?? 5)} delivery attempts or ${String(hours ?? 48)} hours pending`);
      return 0;
    }
    const chosen = [values.origin !== undefined, values.target !== undefined, values.operator].filter(Boolean).length;
    if (!values.id || chosen !== 1) throw new UsageError(usage);
    let principal: Principal;
    if (values.origin !== undefined) {
      if (!ORIGIN.test(values.origin)) throw new UsageError(`--origin must match ${ORIGIN}`);
      principal = { role: 'origin', origin: values.origin };
    } else if (values.target !== undefined) {
      if (!TARGET_NAME.test(values.target)) throw new UsageError(`--target must match ${TARGET_NAME}`);
      principal = { role: 'target', target: values.target };
    } else principal = { role: 'operator' };
    await table.putPrincipal(values.id, principal);
    print(shown`principal ${values.id} → ${principal.role}${'origin' in principal ? ` ${principal.origin}` : 'target' in principal ? ` ${principal.target}` : ''}`);
    return 0;
  } finally {
    dynamodb.destroy();
  }
}

export { UsageError };
