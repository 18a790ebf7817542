import { INBOX_SHARDS_MAX } from '../../shared/adapters/ledger-keys.js';
import { profileToEnv } from '../../shared/events/profile.js';
import { ArnFormat, Duration, Lazy, Names, RemovalPolicy, Stack, Token } from 'aws-cdk-lib';
import { AttributeType, BillingMode, Table, TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import { Effect, Grant, PolicyStatement, Role, type IGrantable } from 'aws-cdk-lib/aws-iam';
import { EventInvokeConfig, Function as LambdaFunction, type IAlias, type IFunction, type IVersion } from 'aws-cdk-lib/aws-lambda';
import { SqsDestination } from 'aws-cdk-lib/aws-lambda-destinations';
import { RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { Queue } from 'aws-cdk-lib/aws-sqs';
import type { IStateMachine } from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { INDEX } from '../../shared/adapters/ledger-keys.js';
import { COUNTS_KEY_PATTERN, PRINCIPAL_ITEM } from '../../shared/adapters/item-kinds.js';
import { ORIGIN, TARGET_NAME } from '../../shared/dispatch/ids.js';
import type { Principal } from '../../shared/principals/principals.js';
import { MAX_ORIGIN_SETTINGS } from '../../shared/dispatch/records.js';
import { baseUrlProblem } from '../../shared/adapters/target-address.js';
import { MAX_CONCURRENT_RUNS_LIMIT } from '../../shared/targets/port.js';
import { DispatchIntake } from './dispatch-intake.js';
import { DurableFunctionTargets, type LedgerDurableFunctionTargetOptions } from './durable-function-targets.js';
import { EventPublisher } from './event-publisher.js';
import { LedgerAlarms } from './ledger-alarms.js';
import { LedgerApi } from './ledger-api.js';
import { LedgerFunction } from './ledger-function.js';
import {
  targetSecretPrefix,
  type DispatchLedgerProps,
  type LedgerIdentity,
  type LedgerLambdaTargetOptions,
  type LedgerManualTargetProps,
  type LedgerTargetProps,
} from './ledger-props.js';
import { checkEnvironmentSizes } from './environment-size.js';
import { LambdaFailureIntake } from './lambda-failure-intake.js';
import { LedgerStorage } from './ledger-storage.js';
import { acknowledgeNagFindings } from './nag.js';
import { ObjectRetention } from './object-retention.js';
import { LEDGER_FUNCTION_SPECS, type LedgerFunctionName } from './function-names.js';
import { RunMonitor } from './run-monitor.js';
import { StateMachineTargets, type LedgerStateMachineTargetOptions } from './state-machine-targets.js';

/** A registration's `maxConcurrentRuns`, refused at synth time unless a whole number from 1 to 10,000. */
function concurrencyLimit(target: string, value: number | undefined): { readonly maxConcurrentRuns?: number } {
  if (value === undefined) return {};
  if (Token.isUnresolved(value) || !Number.isInteger(value) || value < 1 || value > MAX_CONCURRENT_RUNS_LIMIT) {
    throw new RangeError(`target "${target}": maxConcurrentRuns must be a whole number from 1 to ${MAX_CONCURRENT_RUNS_LIMIT.toLocaleString('en-US')}, got ${String(value)}`);
  }
  return { maxConcurrentRuns: value };
}

/**
 * Dispatch Ledger in one construct: the dispatch queue and intake, the ledger table and evidence
 * bucket, the IAM-authorized API, the monitor schedule, the event publisher, the retention of expired
 * records' objects and the alarms.
 *
 * @example
 * const ledger = new DispatchLedger(stack, 'Ledger', {
 *   targets: [{ name: 'research-agent', baseUrl: 'https://agents.example.com', authSecret, maxConcurrentRuns: 5 }],
 * });
 * ledger.addLambdaTarget('summarizer', summarizerFn, { maxConcurrentRuns: 2 }); // at most 2 runs at once
 * ledger.addOrigin(plannerRole, 'planner');            // may send dispatches and read its own
 * ledger.addTargetCaller(agentRole, 'research-agent'); // may post run events and evidence
 * ledger.addOperator(onCallRole);                      // rejections, attention, redrive
 */
/** A principal as a person reads it: `origin planner`, `target review`, `operator`. */
function describePrincipal(principal: Principal): string {
  if (principal.role === 'origin') return `origin ${principal.origin}`;
  if (principal.role === 'target') return `target ${principal.target}`;
  return principal.role;
}

export class DispatchLedger extends Construct {
  readonly storage: LedgerStorage;
  readonly intake: DispatchIntake;
  readonly api: LedgerApi;
  readonly monitor: RunMonitor;
  readonly publisher: EventPublisher;
  readonly retention: ObjectRetention;
  /** Lambda's on-failure destination of the lambda targets (`addLambdaTarget`). */
  readonly lambdaFailures: LambdaFailureIntake;
  readonly alarms: LedgerAlarms;
  /** The state machine targets (CONTRACT §17) and their orchestrator queue. */
  readonly stateMachineTargets: StateMachineTargets;
  /** The durable function targets (CONTRACT §17). */
  readonly durableFunctionTargets: DurableFunctionTargets;
  readonly functions: Readonly<Record<LedgerFunctionName, LedgerFunction>>;
  /** `dispatch-ledger/{stackName}/targets/`: where secrets of targets registered at run time live. */
  readonly targetSecretPrefix: string;

  private readonly principals: Array<{ readonly id: string; readonly principal: Principal }> = [];
  private readonly targets: Array<
    | { readonly name: string; readonly kind: 'http'; readonly baseUrl: string; readonly secretRef?: string; readonly maxConcurrentRuns?: number }
    | { readonly name: string; readonly kind: 'lambda'; readonly functionArn: string; readonly timeoutSeconds: number; readonly stateTable: string; readonly maxConcurrentRuns?: number }
    | { readonly name: string; readonly kind: 'stepfunctions'; readonly stateMachineArn: string; readonly roleId?: string; readonly maxConcurrentRuns?: number }
    | { readonly name: string; readonly kind: 'durable'; readonly functionArn: string; readonly maxConcurrentRuns?: number }
    | { readonly name: string; readonly kind: 'manual' }
  > = [];
  private readonly origins: Array<{ readonly origin: string; readonly maxDeliveryAttempts?: number; readonly resultTtlHours?: number }> = [];
  /** Roles let in by a permission on the API function (resource-based), once each: its policy holds 20 KB. */
  private readonly apiRoles = new Set<string>();
  /** What `cdk destroy` does to every table and bucket the ledger holds state in, lambda targets' run tables too. */
  private readonly stateful: { readonly removalPolicy: RemovalPolicy; readonly deletionProtection: boolean };

  constructor(scope: Construct, id: string, props: DispatchLedgerProps = {}) {
    super(scope, id);
    const retentionDays = props.retentionDays ?? 90;
    if (!Number.isInteger(retentionDays) || retentionDays < 1) throw new RangeError(`retentionDays must be a whole number ≥ 1, got ${retentionDays}`);
    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;
    const targetTimeout = props.targetTimeout ?? Duration.seconds(10);
    if (targetTimeout.toSeconds() < 1 || targetTimeout.toSeconds() > 20) throw new RangeError('targetTimeout must be between 1 and 20 seconds');
    const logRetention = props.logRetention ?? RetentionDays.ONE_MONTH;
    const inboxShards = props.inboxShards ?? 1;
    if (!Number.isInteger(inboxShards) || inboxShards < 1 || inboxShards > INBOX_SHARDS_MAX) throw new RangeError(`inboxShards must be a whole number from 1 to ${INBOX_SHARDS_MAX}, got ${inboxShards}`);

    this.targetSecretPrefix = targetSecretPrefix(Stack.of(this).stackName);
    this.stateful = { removalPolicy, deletionProtection: props.deletionProtection ?? true };
    this.storage = new LedgerStorage(this, 'Storage', { retentionDays, ...this.stateful });
    const { table, evidenceBucket } = this.storage;

    const common = {
      LEDGER_TABLE_NAME: table.tableName,
      EVIDENCE_BUCKET: evidenceBucket.bucketName,
      PRINCIPAL_MODE: 'enforce',
      RETENTION_DAYS: String(retentionDays),
      TARGET_TIMEOUT_MS: String(targetTimeout.toMilliseconds()),
      // The secrets adapter refuses a secretRef outside it (deploy-time targets' own secrets excepted).
      TARGET_SECRET_PREFIX: this.targetSecretPrefix,
      LEDGER_REGISTRY: Lazy.string({ produce: () => Stack.of(this).toJsonString({ principals: this.principals, targets: this.targets, origins: this.origins }) }),
      // Every function that writes a dispatch's state puts its inbox entry on the same shards.
      INBOX_SHARDS: String(inboxShards),
    };
    // Each function's timeout and memory come from the one list of functions (function-names.ts), which the local platform runs too.
    const fn = (name: LedgerFunctionName, environment: Record<string, string>, functionName?: string) =>
      new LedgerFunction(this, `${name[0]!.toUpperCase()}${name.slice(1)}Handler`, {
        name,
        timeout: Duration.seconds(LEDGER_FUNCTION_SPECS[name].timeoutSeconds),
        environment,
        memorySize: LEDGER_FUNCTION_SPECS[name].memoryMb,
        logRetention,
        removalPolicy,
        ...(functionName ? { functionName } : {}),
      });
    // A write that frees a slot (the API's, the failures function's) nudges the monitor to admit the next
    // waiting dispatch at once (CONTRACT §11). They name the monitor before it exists: the monitor depends
    // on the API through its callback URL, so a reference from the API back to it would be a cycle
    // CloudFormation refuses. The name is this construct's own (stack name and path, hashed).
    const monitorName = `${Names.uniqueResourceName(this, { maxLength: 64 - '-monitor'.length, separator: '-' })}-monitor`;
    const admission = { LEDGER_ADMISSION_FUNCTION: monitorName };

    const api = fn('api', { ...common, ...admission });
    this.api = new LedgerApi(this, 'Api', { api });
    const callback = { ...common, API_BASE_URL: this.api.url.url };
    const intake = fn('intake', callback);
    const monitor = fn('monitor', callback, monitorName);
    // A profile naming an unknown detail-type fails the synth, not the publisher's cold start.
    const publishedEvents = profileToEnv(props.events ?? 'all');
    const publisher = fn('publisher', { EVENT_BUS_NAME: props.eventBusName ?? 'dispatch-ledger', LEDGER_TABLE_NAME: table.tableName, PUBLISHED_EVENTS: publishedEvents });
    const retention = fn('retention', { EVIDENCE_BUCKET: evidenceBucket.bucketName, LEDGER_TABLE_NAME: table.tableName, RETENTION_DAYS: String(retentionDays) });
    // Lambda's on-failure destination of every lambda target (CONTRACT §12), taken in as the runs' failures.
    const failures = fn('failures', { LEDGER_TABLE_NAME: table.tableName, RETENTION_DAYS: String(retentionDays), PRINCIPAL_MODE: 'enforce', LEDGER_REGISTRY: common.LEDGER_REGISTRY, INBOX_SHARDS: common.INBOX_SHARDS, ...admission });
    // State machines' approval requests and status changes (CONTRACT §17), from the orchestrator queue.
    const orchestrators = fn('orchestrators', { LEDGER_TABLE_NAME: table.tableName, EVIDENCE_BUCKET: evidenceBucket.bucketName, RETENTION_DAYS: String(retentionDays), PRINCIPAL_MODE: 'enforce', LEDGER_REGISTRY: common.LEDGER_REGISTRY, INBOX_SHARDS: common.INBOX_SHARDS, TARGET_TIMEOUT_MS: common.TARGET_TIMEOUT_MS, ...admission });
    this.functions = { intake, api, monitor, publisher, retention, failures, orchestrators };
    this.lambdaFailures = new LambdaFailureIntake(this, 'LambdaFailures', { failures });

    this.intake = new DispatchIntake(this, 'Intake', { intake, ...(props.maxReceiveCount === undefined ? {} : { maxReceiveCount: props.maxReceiveCount }) });
    this.monitor = new RunMonitor(this, 'Monitor', { monitor, ...(props.monitorPeriod ? { period: props.monitorPeriod } : {}) });
    this.publisher = new EventPublisher(this, 'Publisher', {
      publisher,
      table,
      ...(props.eventBusName ? { eventBusName: props.eventBusName } : {}),
      failureRetentionDays: retentionDays,
      removalPolicy,
    });
    this.retention = new ObjectRetention(this, 'Retention', { retention, table, evidenceBucket, failureBucket: this.publisher.failureBucket });

    // Least privilege: each function gets the item-level actions it uses, on the indexes it reads.
    // No function may delete items, scan, or change the table; only the API, the monitor and the
    // orchestrators function query, and intake and the failures function the wait index alone. Only retention may delete objects (ObjectRetention grants it).
    // Flow control (CONTRACT §11): whoever submits reads a limited target's slot counters in one batch
    // (BatchGetItem), takes a slot only when nobody waits (the wait index) and commits the counter's
    // update with the dispatch; a failure taken in gives its run's slot back the same way (UpdateItem).
    const tableArn = table.tableArn;
    const indexArn = (index: string) => `${tableArn}/index/${index}`;
    this.allow(intake, ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:BatchGetItem'], [tableArn]);
    this.allow(intake, ['dynamodb:Query'], [indexArn(INDEX.waiting)]);
    this.allow(failures, ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'], [tableArn]);
    // Its admission nudge first counts who waits for the freed slot's target (admission-nudge.ts).
    this.allow(failures, ['dynamodb:Query'], [indexArn(INDEX.waiting)]);
    // The orchestrators function reads a dispatch, records a run's end or an approval request and its token.
    this.allow(orchestrators, ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'], [tableArn]);
    // Which run an approval request names reads the attempt records (an earlier run); an end it records
    // frees a slot, and its nudge counts who waits first (the wait index), as the failures function's does.
    this.allow(orchestrators, ['dynamodb:Query'], [tableArn, indexArn(INDEX.waiting)]);
    this.allow(monitor, ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:BatchGetItem'], [tableArn]);
    this.allow(monitor, ['dynamodb:Query'], [tableArn, indexArn(INDEX.due), indexArn(INDEX.waiting)]);
    this.allow(api, ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:BatchGetItem'], [tableArn]);
    this.allow(api, ['dynamodb:Query'], [tableArn, indexArn(INDEX.byOrigin), indexArn(INDEX.feed), indexArn(INDEX.inbox), indexArn(INDEX.waiting), indexArn(INDEX.recent)]);
    // The publisher's one table write: ADD to the counter items of `GET /counts` (CONTRACT §2 v2), and
    // no other item — the condition names their partition keys (`COUNTS#{n}`).
    publisher.function.addToRolePolicy(
      new PolicyStatement({
        effect: Effect.ALLOW,
        actions: ['dynamodb:UpdateItem'],
        resources: [tableArn],
        conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [COUNTS_KEY_PATTERN] } },
      }),
    );
    // The nudge: exactly the monitor function (not its versions or aliases), by the ARN its name makes.
    const monitorArn = Stack.of(this).formatArn({ service: 'lambda', resource: 'function', resourceName: monitorName, arnFormat: ArnFormat.COLON_RESOURCE_NAME });
    for (const nudger of [api, failures, orchestrators]) this.allow(nudger, ['lambda:InvokeFunction'], [monitorArn]);
    // Evidence and spilled bodies: intake spills and reads tasks back; the API stores evidence (each
    // upload once, immutable under its hash) and reads tasks for a redispatch; evidence checks read each
    // file (which needs ListBucket to tell "missing" (404) from "forbidden" (403), or every missing file
    // reads as an unrunnable check). A seal is the hash the check records; evidence arrives only through
    // the API's PUT route. The monitor writes one object only for a file uploaded before uploads were
    // content-addressed: it stores it under its hash (legacy-evidence.ts), once, for dispatches in flight
    // across that upgrade.
    const objects = evidenceBucket.arnForObjects('*');
    this.allow(intake, ['s3:PutObject', 's3:GetObject'], [objects]);
    this.allow(api, ['s3:PutObject', 's3:GetObject'], [objects]);
    this.allow(monitor, ['s3:PutObject', 's3:GetObject'], [objects]);
    // A state machine's output above the inline bound is kept as its result's body (CONTRACT §10, §17).
    this.allow(orchestrators, ['s3:PutObject'], [objects]);
    // The monitor and the API (which settles evidence as a completion arrives) check files exist.
    for (const checker of [monitor, api]) this.allow(checker, ['s3:ListBucket'], [evidenceBucket.bucketArn]);
    // Target auth headers: the deploy-time targets' secrets, and those registered later under the prefix.
    const runtimeSecrets = Stack.of(this).formatArn({ service: 'secretsmanager', resource: 'secret', resourceName: `${this.targetSecretPrefix}*`, arnFormat: ArnFormat.COLON_RESOURCE_NAME });
    for (const caller of [intake, api, monitor]) this.allow(caller, ['secretsmanager:GetSecretValue'], [runtimeSecrets]);
    for (const target of props.targets ?? []) this.addTarget(target);

    this.alarms = new LedgerAlarms(this, 'Alarms', {
      ...(props.alarmTopic ? { alarmTopic: props.alarmTopic } : {}),
      dispatchQueue: this.intake.queue,
      deadLetterQueue: this.intake.deadLetterQueue,
      failuresDeadLetterQueue: this.lambdaFailures.deadLetterQueue,
      failuresQueue: this.lambdaFailures.queue,
      ledgerTableName: table.tableName,
      functions: { Intake: intake.function, Api: api.function, Monitor: monitor.function, Publisher: publisher.function, Retention: retention.function, Failures: failures.function, Orchestrators: orchestrators.function },
      publisher: publisher.function,
      retention: retention.function,
    });
    this.stateMachineTargets = new StateMachineTargets(this, 'Orchestrators', { orchestrators, submitters: [intake, api, monitor], alarmTopic: this.alarms.topic, ledgerTableName: table.tableName });
    this.durableFunctionTargets = new DurableFunctionTargets([intake, api, monitor]);
    acknowledgeNagFindings(this);
    // At synth, once every target, origin and principal is in: each function's environment fits Lambda's 4 KB.
    this.node.addValidation({ validate: () => checkEnvironmentSizes(this, this.functions, () => `${this.principals.length} principals, ${this.targets.length} targets, ${this.origins.length} origins' settings`) });
  }

  /**
   * A Lambda worker as a target (CONTRACT §12): the ledger invokes `fn` asynchronously, Lambda's
   * on-failure destination (after its own two retries) is the ledger's failures queue, and the worker
   * kit keeps its run state in a table of its own that the ledger reads for lookups. Grants exactly
   * that: invoke to the functions that submit and resume runs, the destination to the worker, the run
   * state to both, and the worker the right to report as the target (function URL, principal registry).
   * Returns the run-state table (the kit's `KIT_RUN_TABLE`).
   *
   * @example
   * const runs = ledger.addLambdaTarget('summarizer', fn, { maxConcurrentRuns: 2 });
   * fn.addEnvironment('KIT_RUN_TABLE', runs.tableName);
   */
  addLambdaTarget(name: string, fn: IFunction, options: LedgerLambdaTargetOptions = {}): Table {
    this.checkNewTarget(name);
    const limit = concurrencyLimit(name, options.maxConcurrentRuns);
    // The function's own timeout when it can be read: the ledger judges a silent run by it.
    const own = fn instanceof LambdaFunction ? fn.timeout : undefined;
    if (own && options.timeout && own.toSeconds() !== options.timeout.toSeconds()) throw new RangeError(`target "${name}": timeout ${options.timeout.toSeconds()} s differs from the function's own ${own.toSeconds()} s`);
    const timeout = own ?? options.timeout;
    if (!timeout) throw new RangeError(`target "${name}": give the function's timeout (it cannot be read from an imported function)`);
    if (timeout.toSeconds() < 1 || timeout.toSeconds() > 900) throw new RangeError(`target "${name}": timeout must be 1 s to 15 minutes (Lambda's own limit)`);
    const runs = new Table(this, `${name}Runs`, {
      partitionKey: { name: 'runId', type: AttributeType.STRING },
      billingMode: BillingMode.PAY_PER_REQUEST,
      encryption: TableEncryption.DEFAULT,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      timeToLiveAttribute: 'expiresAt',
      // The kit's record of runs in flight, which the ledger looks runs up in: kept as the ledger's own
      // table is (regression: always destroyed, so a cdk destroy or a renamed target lost the state of
      // runs in flight, and their lookups came back not_found).
      removalPolicy: this.stateful.removalPolicy,
      deletionProtection: this.stateful.deletionProtection,
    });
    // The ledger reads a run's state by key; the worker reads and writes its own runs.
    // Exactly the function (not its versions or aliases: the registry names the function's own ARN).
    for (const caller of [this.functions.intake, this.functions.api, this.functions.monitor]) this.allow(caller, ['lambda:InvokeFunction'], [fn.functionArn]);
    for (const caller of [this.functions.intake, this.functions.api, this.functions.monitor]) this.allow(caller, ['dynamodb:GetItem'], [runs.tableArn]);
    runs.grant(fn, 'dynamodb:GetItem', 'dynamodb:PutItem');
    // Lambda holds an event no longer than its three tries take: past that it reports EventAgeExceeded
    // on the destination, so the ledger's window of "still queued" (lambda-target.ts) is never outlived.
    const maxEventAge = Duration.seconds(Math.min(6 * 3600, Math.max(60, timeout.toSeconds() * 3 + 180)));
    new EventInvokeConfig(this, `${name}AsyncInvoke`, { function: fn, retryAttempts: 2, maxEventAge, onFailure: new SqsDestination(this.lambdaFailures.queue) });
    // The worker reports through the API as the target: its role's unique id in the principal registry,
    // and a permission on the API function (resource-based: the API's own grant on the worker would
    // otherwise wait on the worker's policy, and that on the API).
    if (!(fn.role instanceof Role)) throw new Error(`target "${name}": the function's role must be a Role of this app (its unique id registers it as the target's caller)`);
    this.register(fn.role, { role: 'target', target: name });
    this.allowOnApi(fn.role, `${name}WorkerReports`);
    this.targets.push({ name, kind: 'lambda', functionArn: fn.functionArn, timeoutSeconds: timeout.toSeconds(), stateTable: runs.tableName, ...limit });
    return runs;
  }

  /**
   * A Standard Step Functions state machine as a target (CONTRACT §17), with exactly the grants its calls
   * need (through its own grant methods) and its role's unique id registered (approval requests are taken
   * from it alone). Express is refused here; an imported state machine cannot be checked and is taken as
   * Standard, without a role: its approval requests are refused.
   *
   * @example
   * ledger.addStateMachineTarget('review-flow', flow, { maxConcurrentRuns: 5 }); // flow's approval task sends to ledger.orchestratorQueue
   */
  addStateMachineTarget(name: string, stateMachine: IStateMachine, options: LedgerStateMachineTargetOptions = {}): void {
    this.checkNewTarget(name);
    const limit = concurrencyLimit(name, options.maxConcurrentRuns);
    this.targets.push({ name, kind: 'stepfunctions', ...this.stateMachineTargets.add(name, stateMachine), ...limit });
  }

  /**
   * A Lambda durable function as a target (CONTRACT §17), by a version or an alias (its qualified ARN is
   * what the ledger invokes), with exactly the grants its calls need: invoke through its own grant
   * method, the durable-execution calls on its versions. An unqualified function or `$LATEST` is refused
   * here, and so is a function of this app without `durableConfig`. Its helper in the worker kit reports
   * callback ids through the API: register its role with `addTargetCaller(fn.role, name)`.
   *
   * @example
   * const live = new Alias(stack, 'Live', { aliasName: 'live', version: reviewFn.currentVersion });
   * ledger.addDurableFunctionTarget('review-durable', live, { maxConcurrentRuns: 5 });
   * ledger.addTargetCaller(reviewFn.role as Role, 'review-durable');
   */
  addDurableFunctionTarget(name: string, fn: IVersion | IAlias, options: LedgerDurableFunctionTargetOptions = {}): void {
    this.checkNewTarget(name);
    const limit = concurrencyLimit(name, options.maxConcurrentRuns);
    this.targets.push({ name, kind: 'durable', ...this.durableFunctionTargets.add(name, fn), ...limit });
  }

  /** Where state machines send approval requests with `.waitForTaskToken` (CONTRACT §17). */
  get orchestratorQueue(): Queue {
    return this.stateMachineTargets.queue;
  }

  /**
   * Registers a target at deploy time (before the functions read their registry at cold start). A
   * manual one (CONTRACT §13) is recorded alone: nothing calls it, so nothing is granted for it.
   *
   * @example
   * ledger.addTarget({ name: 'desk', kind: 'manual' }); // dispatches to "desk" wait for a person
   */
  addTarget(target: LedgerTargetProps | LedgerManualTargetProps): void {
    this.checkNewTarget(target.name);
    if (target.kind === 'manual') {
      this.targets.push({ name: target.name, kind: 'manual' });
      return;
    }
    const problem = Token.isUnresolved(target.baseUrl) ? undefined : baseUrlProblem(target.baseUrl, 'public-only');
    if (problem) throw new RangeError(`target "${target.name}": baseUrl ${problem}`);
    const limit = concurrencyLimit(target.name, target.maxConcurrentRuns);
    this.targets.push({ name: target.name, kind: 'http', baseUrl: target.baseUrl, ...(target.authSecret ? { secretRef: target.authSecret.secretArn } : {}), ...limit });
    for (const caller of [this.functions.intake, this.functions.api, this.functions.monitor]) target.authSecret?.grantRead(caller.function);
  }

  /**
   * The identity may send dispatches for `origin` and read and act on that origin's dispatches.
   * `results` sets how its results inbox treats it (CONTRACT §10; defaults 5 attempts, 48 hours).
   */
  addOrigin(identity: LedgerIdentity, origin: string, results: { readonly maxDeliveryAttempts?: number; readonly resultTtlHours?: number } = {}): void {
    if (!ORIGIN.test(origin)) throw new RangeError(`origin "${origin}" must match ${ORIGIN}`);
    if (results.maxDeliveryAttempts !== undefined && !(Number.isInteger(results.maxDeliveryAttempts) && results.maxDeliveryAttempts >= 1 && results.maxDeliveryAttempts <= MAX_ORIGIN_SETTINGS.maxDeliveryAttempts)) {
      throw new RangeError(`origin "${origin}": maxDeliveryAttempts must be an integer from 1 to ${MAX_ORIGIN_SETTINGS.maxDeliveryAttempts}`);
    }
    if (results.resultTtlHours !== undefined && !(results.resultTtlHours > 0 && results.resultTtlHours <= MAX_ORIGIN_SETTINGS.resultTtlHours)) throw new RangeError(`origin "${origin}": resultTtlHours must be above 0 and at most ${MAX_ORIGIN_SETTINGS.resultTtlHours}`);
    if (results.maxDeliveryAttempts !== undefined || results.resultTtlHours !== undefined) {
      if (this.origins.some((existing) => existing.origin === origin)) throw new Error(`origin "${origin}" has its result settings given twice`);
      this.origins.push({ origin, ...results });
    }
    this.register(identity, { role: 'origin', origin });
    const grantable = this.grantableOf(identity);
    if (grantable) {
      this.intake.queue.grantSendMessages(grantable);
      this.api.grantInvoke(grantable);
    }
  }

  /**
   * What an origin's `@dispatch-ledger/client` needs (docs/protocol.md §15): `addOrigin` (registered as
   * `origin`, may send dispatches and call the API), and DescribeStacks on this stack alone, so
   * `createLedgerClient({ stack })` reads the API and queue URLs from its outputs.
   *
   * @example
   * ledger.grantOrigin(plannerRole, 'planner');
   */
  grantOrigin(identity: LedgerIdentity, origin: string, results: { readonly maxDeliveryAttempts?: number; readonly resultTtlHours?: number } = {}): void {
    this.addOrigin(identity, origin, results);
    const grantable = this.grantableOf(identity);
    if (grantable) Grant.addToPrincipal({ grantee: grantable, actions: ['cloudformation:DescribeStacks'], resourceArns: [Stack.of(this).stackId] });
  }

  /**
   * The identity may report runs and upload evidence for dispatches sent to `target`. For a lambda,
   * durable or state-machine target (add it first), a role is let in by a permission on the API function
   * (resource-based, once per role), as a lambda target's worker is: its role is one the API's registry
   * depends on (API → alias or state machine → function → its role's policy), and an identity grant
   * naming the API closed that into a cycle CloudFormation refuses. Any other caller gets an identity
   * grant (the API function's resource policy holds 20 KB: it is kept for the roles that need it).
   */
  addTargetCaller(identity: LedgerIdentity, target: string): void {
    if (!TARGET_NAME.test(target)) throw new RangeError(`target name "${target}" must match ${TARGET_NAME}`);
    this.register(identity, { role: 'target', target });
    const kind = this.targets.find((existing) => existing.name === target)?.kind;
    // A caller of a target known to be http (or manual) cannot be a role the API's registry depends on:
    // an identity grant, which costs the API's policy nothing. Any other role (a lambda, durable or flow
    // target's, or one of a target added later), the permission on the API, which closes no cycle.
    if (identity instanceof Role && kind !== 'http' && kind !== 'manual') {
      this.allowOnApi(identity, `${target}Caller${Names.uniqueId(identity)}`);
      return;
    }
    const grantable = this.grantableOf(identity);
    if (grantable) this.api.grantInvoke(grantable);
  }

  /** A role let in by a permission on the API function, once (a lambda target's worker and its caller registration share it). */
  private allowOnApi(role: Role, id: string): void {
    const key = Names.uniqueId(role);
    if (this.apiRoles.has(key)) return;
    this.apiRoles.add(key);
    this.api.allowRole(id, role.roleArn, this.functions.api);
  }

  /**
   * The identity may read rejections and attention across origins, redrive the DLQ and replay parked
   * stream batches. (Its policy names the failure bucket's objects with a wildcard: acknowledge
   * `AwsSolutions-IAM5` on your role if you run cdk-nag.)
   */
  addOperator(identity: LedgerIdentity): void {
    this.register(identity, { role: 'operator' });
    // `ledger stream replay` republishes ledger events: past the bus policy that refuses them from
    // anyone but the publisher (an identity given by id may be granted PutEvents outside this stack).
    this.publisher.allowLedgerPublisher('principalId' in identity ? { principalId: identity.principalId } : { roleArn: identity.roleArn });
    const grantable = this.grantableOf(identity);
    if (!grantable) return;
    this.api.grantInvoke(grantable);
    // `ledger dlq redrive`: every DLQ the ledger alarms on, back to the queue it feeds (each function
    // believes what an operator moved back as its first sender's, `LedgerRedrivenFor`).
    for (const { deadLetterQueue, queue } of [this.intake, this.lambdaFailures, { deadLetterQueue: this.stateMachineTargets.deadLetterQueue, queue: this.stateMachineTargets.queue }]) {
      deadLetterQueue?.grantConsumeMessages(grantable);
      queue.grantSendMessages(grantable);
    }
    // The redrive reads who is a registered operator in the table (`LedgerTable.resolve`): the principal
    // items alone (their partition keys, `P#{principalId}`), no other item.
    grantable.grantPrincipal.addToPrincipalPolicy(
      new PolicyStatement({ effect: Effect.ALLOW, actions: ['dynamodb:GetItem'], resources: [this.storage.table.tableArn], conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [`${PRINCIPAL_ITEM.pk}*`] } } }),
    );
    // `ledger stream replay`: list and read the failure records, mark each replayed, publish its events.
    const failures = this.publisher.failureBucket;
    grantable.grantPrincipal.addToPrincipalPolicy(new PolicyStatement({ effect: Effect.ALLOW, actions: ['s3:ListBucket'], resources: [failures.bucketArn] }));
    grantable.grantPrincipal.addToPrincipalPolicy(new PolicyStatement({ effect: Effect.ALLOW, actions: ['s3:GetObject', 's3:PutObject'], resources: [failures.arnForObjects('*')] }));
    this.publisher.bus.grantPutEventsTo(grantable);
  }

  /** Refuses a target name that is malformed or already registered. */
  private checkNewTarget(name: string): void {
    if (!TARGET_NAME.test(name)) throw new RangeError(`target name "${name}" must match ${TARGET_NAME}`);
    if (this.targets.some((existing) => existing.name === name)) throw new Error(`target "${name}" is registered twice`);
  }


  /**
   * One principal per identity: the functions refuse a registry naming an id twice (static-registry.ts),
   * at cold start. Refused here at synth instead, naming both uses (regression: a role added as the
   * caller of two targets, or as a lambda target's worker and again as its caller, deployed and then
   * every ledger function failed to start).
   */
  private register(identity: LedgerIdentity, principal: Principal): void {
    const id = 'principalId' in identity ? identity.principalId : identity.roleId;
    const known = this.principals.find((entry) => entry.id === id);
    if (known) throw new Error(`${'principalId' in identity ? `principal ${id}` : `role ${identity.node.path}`} is registered twice (${describePrincipal(known.principal)}, then ${describePrincipal(principal)}): one identity speaks as one principal`);
    this.principals.push({ id, principal });
  }

  private grantableOf(identity: LedgerIdentity): IGrantable | undefined {
    return 'principalId' in identity ? identity.grantable : identity;
  }

  private allow(fn: LedgerFunction, actions: string[], resources: string[]): void {
    fn.function.addToRolePolicy(new PolicyStatement({ effect: Effect.ALLOW, actions, resources }));
  }
}
