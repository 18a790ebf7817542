import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { localClients, localHandlerEnvironment, type LocalClients } from './clients.js';
import { startDemoAgent, type DemoAgent } from './demo-agent/server.js';
import { startEngines, type Engines } from './engines/index.js';
import { LOCAL_FUNCTIONS, loadHandler } from './functions.js';
import { createLocalResources, type LocalResources } from './resources.js';
import type { InvocationReport } from './runtime/context.js';
import { EventLogTail } from './runtime/event-log.js';
import { startHttpApi, type HttpApiHandler } from './runtime/http-api.js';
import { Scheduler, type ScheduledHandler } from './runtime/scheduler.js';
import { SqsEventSource, type SqsHandler } from './runtime/sqs-event-source.js';
import type { LocalInfo } from './state.js';

export interface PlatformOptions {
  readonly stateDir: string;
  readonly tickSeconds: number;
  /** Structured log lines of the platform itself (not of the handlers). */
  readonly log: (line: Record<string, unknown>) => void;
}

export interface RunningPlatform {
  readonly info: LocalInfo;
  readonly engines: Engines;
  readonly resources: LocalResources;
  readonly invocationLog: string;
  stop(): Promise<void>;
}

/** Local visibility timeout of the dispatch queue: 6 × the intake's 30 s timeout, as in the stack. */
const DISPATCH_VISIBILITY_TIMEOUT_SECONDS = 180;

/**
 * Starts the whole local platform in this process: the engines (as child processes), the resources,
 * the demo agent, and the local Lambda runtime (event source mappings, scheduler, HTTP API) running the
 * real handler modules. Stops everything it started if any part fails.
 */
export async function startPlatform(options: PlatformOptions): Promise<RunningPlatform> {
  const { stateDir, log } = options;
  const logDir = join(stateDir, 'logs');
  mkdirSync(logDir, { recursive: true });
  const eventLog = join(stateDir, 'events.jsonl');
  const invocationLog = join(stateDir, 'invocations.jsonl');
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
    const engines = await startEngines({ logDir, log: (message) => log({ level: 'info', msg: message }) });
    stoppers.push(() => engines.stop());
    const clients: LocalClients = localClients(engines);
    stoppers.push(async () => clients.destroy());
    const resources = await createLocalResources(clients, {
      dispatchVisibilityTimeoutSeconds: DISPATCH_VISIBILITY_TIMEOUT_SECONDS,
    });

    const demoAgent: DemoAgent = await startDemoAgent({ log: (line) => log({ component: 'demo-agent', ...line }) });
    stoppers.push(() => demoAgent.stop());

    const onInvocation = (report: InvocationReport): void => {
      appendFileSync(invocationLog, `${JSON.stringify(report)}\n`);
    };
    const onError = (component: string) => (error: unknown) =>
      log({ level: 'error', component, msg: 'runtime error', error: error instanceof Error ? error.message : String(error) });

    // The handlers' environment, as the stack sets it in AWS, with local endpoints. Set before the
    // handler modules are imported: their deps.ts read it once, at cold start.
    Object.assign(process.env, localHandlerEnvironment(engines), {
      DISPATCH_QUEUE_URL: resources.dispatchQueue.url,
      EVENT_BUS_NAME: resources.eventBusName,
      EVIDENCE_BUCKET: resources.evidenceBucket,
      POWERTOOLS_SERVICE_NAME: 'dispatch-ledger',
    });

    const region = engines.region;
    let apiUrl: string | undefined;
    const scheduled: Array<{ functionName: string; handler: ScheduledHandler }> = [];
    for (const fn of LOCAL_FUNCTIONS) {
      switch (fn.trigger.kind) {
        case 'sqs': {
          const source = new SqsEventSource({
            functionName: fn.name,
            handler: await loadHandler<SqsHandler>(fn),
            sqs: clients.sqs,
            queueUrl: resources.dispatchQueue.url,
            queueArn: resources.dispatchQueue.arn,
            region,
            batchSize: fn.trigger.batchSize,
            reportBatchItemFailures: true,
            onInvocation,
            onError: onError(fn.name),
          });
          source.start();
          stoppers.push(() => source.stop());
          break;
        }
        case 'http': {
          const api = await startHttpApi({
            functionName: fn.name,
            handler: await loadHandler<HttpApiHandler>(fn),
            region,
            onInvocation,
            onError: onError(fn.name),
          });
          apiUrl = api.url;
          stoppers.push(() => api.close());
          break;
        }
        case 'schedule':
          scheduled.push({ functionName: fn.name, handler: await loadHandler<ScheduledHandler>(fn) });
          break;
        case 'stream':
          // The event publisher's stream arrives with the ledger table (lifecycle issue).
          throw new Error(`function ${fn.name}: no local stream named ${fn.trigger.table}`);
      }
    }
    if (!apiUrl) throw new Error('no function serves the HTTP API');

    const scheduler = new Scheduler(scheduled, { tickSeconds: options.tickSeconds, region, onInvocation });
    scheduler.start();
    stoppers.push(() => scheduler.stop());

    const tail = new EventLogTail({
      sqs: clients.motoSqs,
      queueUrl: resources.eventLogQueue.url,
      file: eventLog,
      onError: onError('event-log'),
    });
    tail.start();
    stoppers.push(() => tail.stop());

    const info: LocalInfo = {
      region,
      apiUrl,
      dispatchQueueUrl: resources.dispatchQueue.url,
      dlqUrl: resources.dlq.url,
      sqsEndpoint: engines.sqsEndpoint,
      dynamodbEndpoint: engines.dynamodbEndpoint,
      s3Endpoint: engines.s3Endpoint,
      eventBridgeEndpoint: engines.motoEndpoint,
      eventBusName: resources.eventBusName,
      eventLog,
      demoAgentUrl: demoAgent.url,
    };
    return { info, engines, resources, invocationLog, stop: stopAll };
  } catch (error) {
    await stopAll();
    throw error;
  }
}
