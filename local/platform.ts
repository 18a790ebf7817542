import { appendFileSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { sqsBody } from '@dispatch-ledger/protocol/message';
import { LedgerTable } from '../shared/adapters/ledger-writes.js';
import { MONITOR_TIMEOUT_SECONDS } from '../shared/usecases/monitor.js';
import { localClients, localHandlerEnvironment, type LocalClients, type LocalEndpoints } from './clients.js';
import { startDemoAgent, type DemoAgent, type DemoAgentFaults } from './demo-agent/server.js';
import { LOCAL_REGION, startEngines } from './engines/index.js';
import { LOCAL_FUNCTIONS, loadHandler } from './functions.js';
import { LEDGER_SETTINGS, type LedgerSettings } from '../shared/adapters/config.js';
import { createLocalResources, type LocalResources } from './resources.js';
import { lambdaContext, type InvocationReport } from './runtime/context.js';
import { EventLogTail } from './runtime/event-log.js';
import { startHttpApi, type HttpApiHandler } from './runtime/http-api.js';
import { startLocalLambda, type LocalLambdaHandler } from './runtime/lambda-invoke.js';
import { demoFlowTask, startFlowTasks } from './demo-flow-task.js';

/** The example Lambda worker's target name, locally as in the app (`-c exampleLambdaWorker=true`). */
export const EXAMPLE_WORKER_TARGET = 'example-worker';
import { Scheduler, type ScheduledFunction, type ScheduledHandler } from './runtime/scheduler.js';
import { allCredentials, createLocalCredentials, sigV4Verifier, SIGV4_SERVICE, type LocalCredential, type LocalCredentials } from './runtime/sigv4.js';
import { SqsEventSource, type SqsHandler } from './runtime/sqs-event-source.js';
import { StreamEventSource, type StreamHandler } from './runtime/stream-event-source.js';
import { clearCredentials, credentialsFile as credentialsPath, readCredentials, writeAwsProfiles, writeCredentials, type LocalInfo } from './state.js';
import { LOCAL_TARGET_SECRET_PREFIX, readLocalTargets, registerLocalTarget } from './targets.js';

export interface PlatformOptions {
  readonly stateDir: string;
  readonly tickSeconds: number;
  /** Structured log lines of the platform itself (not of the handlers). */
  readonly log: (line: Record<string, unknown>) => void;
  /** Run on engines someone else started (tests); by default the platform starts and stops its own. */
  readonly engines?: LocalEndpoints;
  /** Told each engine's pid it starts as soon as it is spawned (the supervisor records it for `down`). */
  readonly spawned?: (role: string, pid: number) => void;
  /** Prefix of every resource name, so several platforms can share engines. */
  readonly prefix?: string;
  /**
   * Overrides of the functions' settings (e.g. second-scale retry delays in tests), by the variable the
   * stack sets. The ledger's settings (`LEDGER_SETTINGS`) go to each function's config; any other
   * variable (Powertools', the SDK's, a worker's) to `process.env`, as the runtime's.
   */
  readonly environment?: Readonly<Record<string, string>>;
  /** The dispatch queue's visibility timeout; default 180 s (6 × the intake's 30 s timeout, as in the stack). */
  readonly dispatchVisibilityTimeoutSeconds?: number;
  /** The census's faults in the platform's own parts (the ledger's are in shared/faults.ts); none by default. */
  readonly faults?: {
    /** The demo agent's schedule: submissions refused or answered late, lookup outages. */
    readonly demoAgent?: DemoAgentFaults;
    /** True: the publisher's stream batch just taken is delivered again (a lost checkpoint). */
    readonly redeliverStreamBatch?: () => boolean;
  };
  /** Receive loops of the event log's tail (a heavy load needs several; see EventLogTail). Default 1. */
  readonly eventLogReceivers?: number;
  /**
   * AWS_IAM auth on the API, as in AWS (`ledger local up --sigv4`, CONTRACT §2 v2): every request must
   * be SigV4-signed by one of the platform's credentials (RunningPlatform.credentials, also in
   * `<stateDir>/credentials.json`), the caller is the principal registered for the signing key, and
   * X-Ledger-Origin is ignored. @default false: open, the caller's origin is X-Ledger-Origin
   */
  readonly sigv4?: boolean;
  /** Lambda targets run in the local Lambda (CONTRACT §12): registered under `name`, invoked asynchronously. */
  readonly lambdaTargets?: ReadonlyArray<{ readonly name: string; readonly handler: LocalLambdaHandler; readonly timeoutSeconds: number; readonly stateTable?: string }>;
}

export interface RunningPlatform {
  readonly info: LocalInfo;
  readonly pids: Readonly<Record<string, number>>;
  readonly resources: LocalResources;
  readonly invocationLog: string;
  readonly demoAgent: DemoAgent;
  readonly scheduler: Scheduler;
  /** With `sigv4`: who may call the API, each registered in the principal registry. */
  readonly credentials?: LocalCredentials;
  /** The functions' settings, as each function's config is read from them (the API's under `sigv4` enforces principals). */
  readonly settings: LedgerSettings;
  stop(): Promise<void>;
}

/** The demo agent's name in the target registry (CONTRACT §8). */
export const DEMO_AGENT_TARGET = 'demo-agent';
/** The demo agent registered again with `maxConcurrentRuns: 2` (the demo's flow-control case). */
export const LIMITED_DEMO_TARGET = 'demo-agent-limited';
/** The `demo-flow` state machine in the local Step Functions (moto), as a `stepfunctions` target (CONTRACT §17). */
export const DEMO_SFN_TARGET = 'demo-sfn';
/** A manual target (CONTRACT §13): a person's desk — dispatches to it are recorded, never submitted anywhere. */
export const MANUAL_DESK_TARGET = 'desk';
/** The monitor's name in the local Lambda, where writes that free a slot nudge it (`LEDGER_ADMISSION_FUNCTION`). */
export const ADMISSION_FUNCTION = 'dispatch-ledger-monitor';

/** The origins that get credentials in --sigv4 mode: the CLI's default and the demo's lead agent. */
export const SIGV4_ORIGINS: readonly string[] = ['planner', 'lead-agent'];

/**
 * Starts the whole local platform in this process: the engines (as child processes, unless given),
 * the resources, the demo agent registered as a target, and the local Lambda runtime (event source
 * mapping, scheduler, HTTP API) running the real handler modules. Stops everything it started if any
 * part fails.
 */
export async function startPlatform(options: PlatformOptions): Promise<RunningPlatform> {
  const { stateDir, log } = options;
  const logDir = join(stateDir, 'logs');
  mkdirSync(logDir, { recursive: true });
  const eventLog = join(stateDir, 'events.jsonl');
  const invocationLog = join(stateDir, 'invocations.jsonl');
  const streamFailures = join(stateDir, 'stream-failures.jsonl');
  writeFileSync(eventLog, '');
  writeFileSync(invocationLog, '');

  const stoppers: Array<() => Promise<void>> = [];
  const stopAll = async (): Promise<void> => {
    for (const stop of stoppers.reverse()) {
      await stop().catch((error: unknown) => log({ level: 'warn', msg: 'stop failed', error: String(error) }));
    }
    stoppers.length = 0;
  };

  try {
    let endpoints: LocalEndpoints;
    let pids: Record<string, number> = {};
    if (options.engines) {
      endpoints = options.engines;
    } else {
      const engines = await startEngines({ logDir, log: (message) => log({ level: 'info', msg: message }), ...(options.spawned ? { spawned: options.spawned } : {}) });
      stoppers.push(() => engines.stop());
      endpoints = engines;
      pids = { ...engines.pids };
    }
    const clients: LocalClients = localClients(endpoints);
    stoppers.push(async () => clients.destroy());
    const resources = await createLocalResources(clients, {
      dispatchVisibilityTimeoutSeconds: options.dispatchVisibilityTimeoutSeconds ?? 180,
      ...(options.prefix ? { prefix: options.prefix } : {}),
    });

    // Fresh keys every run; the file that hands them to the CLI and scripts goes when the platform stops.
    // Keys a run that ended without its stoppers (a kill) left behind name no caller of this one.
    if (!options.sigv4) clearCredentials(stateDir);
    // The user's own workers (`ledger local target add`) get one too: they sign their callbacks as their target.
    const credentials = options.sigv4 ? createLocalCredentials({ origins: SIGV4_ORIGINS, targets: [DEMO_AGENT_TARGET, ...readLocalTargets(stateDir).map((target) => target.name)] }) : undefined;
    const demoAgentCredentials = credentials?.targets[DEMO_AGENT_TARGET];
    const demoAgent = await startDemoAgent({
      log: (line) => log({ component: 'demo-agent', ...line }),
      targetName: DEMO_AGENT_TARGET,
      // Each target registered at the agent gets a base path of its own, so it counts maxOpen per target (CONTRACT V3 §8).
      moreTargets: [LIMITED_DEMO_TARGET],
      ...(options.faults?.demoAgent ? { faults: options.faults.demoAgent } : {}),
      ...(demoAgentCredentials ? { signing: { credentials: demoAgentCredentials, region: LOCAL_REGION } } : {}),
    });
    stoppers.push(() => demoAgent.stop());
    const ledger = new LedgerTable(DynamoDBDocumentClient.from(clients.dynamodb), { tableName: resources.ledgerTable, retentionSeconds: 90 * 86_400 });
    await ledger.putTarget({ name: DEMO_AGENT_TARGET, kind: 'http', baseUrl: demoAgent.url });
    // The same agent behind a concurrency limit (CONTRACT §11): what the demo's flow-control case uses.
    await ledger.putTarget({ name: LIMITED_DEMO_TARGET, kind: 'http', baseUrl: demoAgent.urlOf(LIMITED_DEMO_TARGET), maxConcurrentRuns: 2 });
    // A state machine (CONTRACT §17): one execution of demo-flow per attempt. moto emits no aws.states
    // status changes, so locally the monitor's lookup (after the stall window) learns each end.
    await ledger.putTarget({ name: DEMO_SFN_TARGET, kind: 'stepfunctions', stateMachineArn: resources.demoFlowArn });
    // Manual mode (CONTRACT §13): work a person does, attested with `ledger manual`.
    await ledger.putTarget({ name: MANUAL_DESK_TARGET, kind: 'manual' });
    // The user's own workers (`ledger local target add`), kept in the state directory across down / up.
    for (const target of readLocalTargets(stateDir)) await registerLocalTarget(ledger, clients.secrets, target);
    let credentialsFile: string | undefined;
    if (credentials) {
      for (const credential of allCredentials(credentials)) await ledger.putPrincipal(credential.principalId, credential.principal);
      stoppers.push(async () => clearCredentials(stateDir));
      credentialsFile = writeCredentials(stateDir, { region: LOCAL_REGION, service: SIGV4_SERVICE, credentials });
      writeAwsProfiles(stateDir, credentials);
    }

    // Lambda targets (CONTRACT §12) run in the local Lambda: asynchronous invokes, Lambda's retries, and
    // its on-failure records on the failures queue, as the stack's destination puts them there.
    // The example Lambda worker (examples/lambda-worker, built on the worker kit) is always there: the
    // demo dispatches to it. Its module is imported at its first invocation, once the environment is set.
    let exampleHandler: Promise<LocalLambdaHandler> | undefined;
    const exampleWorker = {
      name: EXAMPLE_WORKER_TARGET,
      timeoutSeconds: 60,
      stateTable: resources.exampleWorkerRuns,
      handler: async (event: unknown, context: Parameters<LocalLambdaHandler>[1]) => {
        exampleHandler ??= import('../examples/lambda-worker/handler.js').then((loaded): LocalLambdaHandler => loaded.handler);
        return (await exampleHandler)(event, context);
      },
    };
    const lambdaTargets = [exampleWorker, ...(options.lambdaTargets ?? [])];
    // The monitor is invoked asynchronously too, as in AWS: a write that frees a slot nudges it to admit
    // the next waiting dispatch at once (CONTRACT §11). Bound once the handlers are loaded.
    let monitorHandler: ScheduledHandler | undefined;
    const monitorFunction = {
      name: ADMISSION_FUNCTION,
      timeoutMs: MONITOR_TIMEOUT_SECONDS * 1000,
      noDestination: true,
      handler: async (event: unknown) => {
        if (!monitorHandler) throw new Error('the monitor handler is not loaded yet');
        // The admit event is not a ScheduledEvent: the handler tells them apart (isAdmitEvent).
        return monitorHandler(event as Parameters<ScheduledHandler>[0], lambdaContext(ADMISSION_FUNCTION, MONITOR_TIMEOUT_SECONDS * 1000, LOCAL_REGION));
      },
    };
    const localLambda = await startLocalLambda({
      region: LOCAL_REGION,
      functions: [...lambdaTargets.map(({ name, handler, timeoutSeconds }) => ({ name, handler, timeoutMs: timeoutSeconds * 1000 })), monitorFunction],
      onFailure: async (record) => {
        // As Lambda's destination sends it; an emoji in the error escaped, which the local queue would refuse raw.
        await clients.sqs.send(new SendMessageCommand({ QueueUrl: resources.lambdaFailuresQueue.url, MessageBody: sqsBody(JSON.stringify(record), { localQueue: true }) }));
      },
      onError: (error) => log({ level: 'error', component: 'local-lambda', msg: 'runtime error', error: error instanceof Error ? error.message : String(error) }),
    });
    stoppers.push(() => localLambda.close());
    for (const target of lambdaTargets) {
      await ledger.putTarget({ name: target.name, kind: 'lambda', functionArn: `arn:aws:lambda:${LOCAL_REGION}:000000000000:function:${target.name}`, timeoutSeconds: target.timeoutSeconds, ...(target.stateTable ? { stateTable: target.stateTable } : {}) });
    }

    const onInvocation = (report: InvocationReport): void => {
      appendFileSync(invocationLog, `${JSON.stringify(report)}\n`);
    };
    const onError = (component: string) => (error: unknown) =>
      log({ level: 'error', component, msg: 'runtime error', error: error instanceof Error ? error.message : String(error) });

    // The API comes up first, with its handler bound once loaded: handlers need its URL (callbackUrl).
    const apiFunction = LOCAL_FUNCTIONS.find((fn) => fn.trigger.kind === 'http');
    if (apiFunction?.trigger.kind !== 'http') throw new Error('no function serves the HTTP API');
    let apiHandler: HttpApiHandler | undefined;
    const api = await startHttpApi({
      functionName: apiFunction.name,
      handler: (event, context) => {
        if (!apiHandler) throw new Error('the API handler is not loaded yet');
        return apiHandler(event, context);
      },
      region: LOCAL_REGION,
      // Its invocations end at the stack's timeout for it, as every local trigger's do.
      timeoutMs: apiFunction.trigger.timeoutSeconds * 1000,
      onInvocation,
      onError: onError(apiFunction.name),
      ...(credentials
        ? {
            // The file as well: `ledger local target add` adds a target's credential to it while the platform runs.
            verifySignature: sigV4Verifier({ region: LOCAL_REGION, credentials: callersOf(stateDir, credentials) }),
            onRefused: (refusal: Record<string, unknown>) => log({ level: 'warn', component: apiFunction.name, msg: 'request refused (SigV4)', ...refusal }),
          }
        : {}),
    });
    stoppers.push(() => api.close());
    // moto runs no Lambda task: the platform plays demo-flow's Task state, invoking its task (the worker
    // kit's stepFunctionsTask) with Step Functions' event for each execution that starts. Started after the API (its
    // callbacks' address) and so stopped before it.
    const flowTasks = startFlowTasks({ sfn: clients.sfn, stateMachineArn: resources.demoFlowArn, handler: demoFlowTask, log: (line) => log({ component: 'demo-flow-task', ...line }) });
    stoppers.push(() => flowTasks.stop());

    // What Lambda's runtime sets in every execution environment, with local endpoints: the region,
    // credentials and endpoint URLs the SDK clients read, and Powertools' variables. The only part of
    // a handler's environment that goes through `process.env`.
    const overrides = Object.entries(options.environment ?? {});
    const ledgerSetting = ([name]: readonly [string, string | undefined]): boolean => LEDGER_SETTINGS.includes(name);
    Object.assign(
      process.env,
      localHandlerEnvironment(endpoints),
      {
        POWERTOOLS_SERVICE_NAME: 'dispatch-ledger',
        // Lambda targets are invoked in the local Lambda; the example worker keeps its runs here.
        AWS_ENDPOINT_URL_LAMBDA: localLambda.url,
        KIT_RUN_TABLE: resources.exampleWorkerRuns,
      },
      Object.fromEntries(overrides.filter((entry) => !ledgerSetting(entry))),
    );
    // The ledger's settings, as the stack sets them on each function in AWS: handed to each function's
    // `createHandler` as a record it reads its config from (loadHandler), never through `process.env`.
    // Under the platform's own: the ones the shell that started it sets (say RETENTION_DAYS or
    // INBOX_SHARDS, to try them locally); over them, the platform's options.
    const settings: LedgerSettings = {
      ...Object.fromEntries(Object.entries(process.env).filter(ledgerSetting)),
      LEDGER_TABLE_NAME: resources.ledgerTable,
      EVIDENCE_BUCKET: resources.evidenceBucket,
      API_BASE_URL: api.url,
      EVENT_BUS_NAME: resources.eventBusName,
      // Locally every caller may speak for any origin (CONTRACT §2).
      PRINCIPAL_MODE: 'open',
      // Where `ledger local target add --secret-file` puts a target's secret: in scope under --sigv4 too.
      TARGET_SECRET_PREFIX: LOCAL_TARGET_SECRET_PREFIX,
      // Locally targets and principals are (re)registered while the platform runs (the demo, the tests): read them every time.
      TARGET_CACHE_SECONDS: '0',
      // And a target's secret (`local target add --replace` with a new secret file is used at once; it waited up to 5 min).
      SECRET_CACHE_SECONDS: '0',
      // Submission retries compressed from ~1 h to ~16 min, so a flaky target shows up in seconds.
      SUBMIT_RETRY_DELAYS_SECONDS: process.env.SUBMIT_RETRY_DELAYS_SECONDS ?? '2,4,8,15,30,60,120,240,480',
      // The monitor's schedule is the tick here.
      MONITOR_PERIOD_SECONDS: String(options.tickSeconds),
      LEDGER_ADMISSION_FUNCTION: ADMISSION_FUNCTION,
      ...Object.fromEntries(overrides.filter(ledgerSetting)),
    };

    const scheduled: ScheduledFunction[] = [];
    for (const fn of LOCAL_FUNCTIONS) {
      switch (fn.trigger.kind) {
        case 'sqs': {
          const queues = {
            dispatch: { queue: resources.dispatchQueue, sqs: clients.sqs },
            lambdaFailures: { queue: resources.lambdaFailuresQueue, sqs: clients.sqs },
            // In moto's SQS, where its state machines' approval requests arrive (LocalResources.orchestratorsQueue).
            orchestrators: { queue: resources.orchestratorsQueue, sqs: clients.motoSqs },
          } as const;
          const { queue, sqs } = queues[fn.trigger.queue];
          const source = new SqsEventSource({
            functionName: fn.name,
            handler: await loadHandler<SqsHandler>(fn, settings),
            sqs,
            queueUrl: queue.url,
            queueArn: queue.arn,
            region: LOCAL_REGION,
            batchSize: fn.trigger.batchSize,
            timeoutMs: fn.trigger.timeoutSeconds * 1000,
            reportBatchItemFailures: true,
            onInvocation,
            onError: onError(fn.name),
          });
          source.start();
          stoppers.push(() => source.stop());
          break;
        }
        case 'http':
          // With SigV4 the API knows its callers, as in AWS: it maps them through the principal registry.
          // Only the API: intake still takes any origin (fauxqs's SenderId names no registered principal).
          apiHandler = await loadHandler<HttpApiHandler>(fn, credentials ? { ...settings, PRINCIPAL_MODE: 'enforce', LOCAL_TARGETS_ON_LOOPBACK: 'true' } : settings);
          break;
        case 'schedule': {
          const handler = await loadHandler<ScheduledHandler>(fn, settings);
          monitorHandler = handler;
          scheduled.push({ functionName: fn.name, handler, timeoutMs: fn.trigger.timeoutSeconds * 1000 });
          break;
        }
        case 'stream': {
          const source = new StreamEventSource({
            functionName: fn.name,
            handler: await loadHandler<StreamHandler>(fn, settings),
            streams: clients.streams,
            streamArn: resources.ledgerStreamArn,
            region: LOCAL_REGION,
            batchSize: fn.trigger.batchSize,
            timeoutMs: fn.trigger.timeoutSeconds * 1000,
            ...(fn.trigger.filter ? { filter: fn.trigger.filter } : {}),
            maxRetryAttempts: 5,
            ...(options.faults?.redeliverStreamBatch && fn.name === 'publisher' ? { redeliverBatch: options.faults.redeliverStreamBatch } : {}),
            // The on-failure destination: what could not be published after the retries, kept for a replay.
            onDiscard: ({ records, error }) =>
              appendFileSync(streamFailures, `${JSON.stringify({ at: new Date().toISOString(), function: fn.name, error, records })}\n`),
            onInvocation,
            onError: onError(fn.name),
          });
          source.start();
          stoppers.push(() => source.stop());
          break;
        }
      }
    }

    const scheduler = new Scheduler(scheduled, { tickSeconds: options.tickSeconds, region: LOCAL_REGION, onInvocation });
    scheduler.start();
    stoppers.push(() => scheduler.stop());

    const tail = new EventLogTail({
      sqs: clients.motoSqs,
      queueUrl: resources.eventLogQueue.url,
      file: eventLog,
      onError: onError('event-log'),
      ...(options.eventLogReceivers ? { receivers: options.eventLogReceivers } : {}),
    });
    tail.start();
    stoppers.push(() => tail.stop());

    const info: LocalInfo = {
      region: LOCAL_REGION,
      apiUrl: api.url,
      dispatchQueueUrl: resources.dispatchQueue.url,
      dlqUrl: resources.dlq.url,
      sqsEndpoint: endpoints.sqsEndpoint,
      dynamodbEndpoint: endpoints.dynamodbEndpoint,
      s3Endpoint: endpoints.s3Endpoint,
      eventBridgeEndpoint: endpoints.motoEndpoint,
      eventBusName: resources.eventBusName,
      eventLog,
      demoAgentUrl: demoAgent.url,
      ...(credentialsFile ? { credentialsFile } : {}),
    };
    return { info, pids, resources, invocationLog, demoAgent, scheduler, settings, ...(credentials ? { credentials } : {}), stop: stopAll };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

/**
 * The --sigv4 callers the API knows: those of the credentials file, read again only when the file changed
 * (a target added or removed while the platform runs), so a request costs a stat, not a parse. The file is
 * written by renaming a new one into place: its inode tells two writes in one mtime tick apart (a review).
 */
function callersOf(stateDir: string, started: LocalCredentials): () => LocalCredential[] {
  let seen = { version: '', callers: allCredentials(started) };
  return () => {
    const stat = statSync(credentialsPath(stateDir), { throwIfNoEntry: false });
    const version = stat ? `${stat.mtimeMs}:${stat.ino}:${stat.size}` : undefined;
    if (version !== undefined && version !== seen.version) seen = { version, callers: allCredentials(readCredentials(stateDir)?.credentials ?? started) };
    return seen.callers;
  };
}
