import type { DynamoDBRecord } from 'aws-lambda';
import { isPublishedRecord, isTtlRemoval } from '../shared/adapters/stream-records.js';
import { MONITOR_TIMEOUT_SECONDS } from '../shared/usecases/monitor.js';
import type { HttpApiHandler } from './runtime/http-api.js';
import type { ScheduledHandler } from './runtime/scheduler.js';
import type { SqsHandler } from './runtime/sqs-event-source.js';
import type { StreamHandler } from './runtime/stream-event-source.js';

/**
 * The functions the local platform runs, each with the trigger it has in AWS. Modules are the real
 * handler files; they are imported after the handler environment is set, like a Lambda cold start.
 */
/** The handler module, imported when called (an import the CLI package's bundler follows). */
type HandlerModule = () => Promise<{ readonly handler?: unknown }>;

export type LocalFunction =
  | { readonly name: string; readonly module: HandlerModule; readonly trigger: { readonly kind: 'sqs'; readonly queue: 'dispatch' | 'lambdaFailures'; readonly batchSize: number } }
  | { readonly name: string; readonly module: HandlerModule; readonly trigger: { readonly kind: 'http' } }
  | { readonly name: string; readonly module: HandlerModule; readonly trigger: { readonly kind: 'schedule'; readonly timeoutSeconds: number } }
  | {
      readonly name: string;
      readonly module: HandlerModule;
      /** `filter`: the mapping's filter criteria — records it refuses never reach the handler, as in Lambda. */
      readonly trigger: { readonly kind: 'stream'; readonly table: 'ledger'; readonly batchSize: number; readonly filter?: (record: DynamoDBRecord) => boolean };
    };

export const LOCAL_FUNCTIONS: readonly LocalFunction[] = [
  { name: 'intake', module: () => import('../functions/intake/handler.js'), trigger: { kind: 'sqs', queue: 'dispatch', batchSize: 10 } },
  { name: 'api', module: () => import('../functions/api/handler.js'), trigger: { kind: 'http' } },
  // Lambda's on-failure records of lambda targets, from the local Lambda (CONTRACT §12).
  { name: 'failures', module: () => import('../functions/failures/handler.js'), trigger: { kind: 'sqs', queue: 'lambdaFailures', batchSize: 10 } },
  // The stack's timeout: a tick's budget is cut from the invocation's remaining time, as in AWS.
  { name: 'monitor', module: () => import('../functions/monitor/handler.js'), trigger: { kind: 'schedule', timeoutSeconds: MONITOR_TIMEOUT_SECONDS } },
  // Only the items it reads (a dispatch's, rejections), as the stack's filter passes.
  { name: 'publisher', module: () => import('../functions/publisher/handler.js'), trigger: { kind: 'stream', table: 'ledger', batchSize: 100, filter: isPublishedRecord } },
  // Only TTL removals, as the stack's filter passes. DynamoDB Local's sweeper deletes expired items too
  // (within seconds of expiry, by the real clock), so locally it runs as in AWS.
  { name: 'retention', module: () => import('../functions/retention/handler.js'), trigger: { kind: 'stream', table: 'ledger', batchSize: 100, filter: isTtlRemoval } },
];

type AnyHandler = SqsHandler | HttpApiHandler | ScheduledHandler | StreamHandler;

/** Imports a handler module and returns its `handler` export, failing clearly if there is none. */
export async function loadHandler<H extends AnyHandler>(fnDef: LocalFunction): Promise<H> {
  const loaded = await fnDef.module();
  if (typeof loaded.handler !== 'function') {
    throw new TypeError(`the ${fnDef.name} function's module exports no function named "handler"`);
  }
  return loaded.handler as H;
}
