import type { DynamoDBRecord } from 'aws-lambda';
import { isPublishedRecord, isTtlRemoval } from '../shared/adapters/stream-records.js';
import { LEDGER_FUNCTION_SPECS, LEDGER_FUNCTIONS, type LedgerFunctionName } from '../infra/constructs/function-names.js';
import { ledgerConfigFrom, type LedgerConfig, type LedgerSettings, type ReadConfigOptions } from '../shared/adapters/config.js';
import type { HttpApiHandler } from './runtime/http-api.js';
import type { ScheduledHandler } from './runtime/scheduler.js';
import type { SqsHandler } from './runtime/sqs-event-source.js';
import type { StreamHandler } from './runtime/stream-event-source.js';

/**
 * The functions the local platform runs, each with the trigger it has in AWS. Modules are the real
 * functions (`functions/<name>/function.ts`): each handler is made by its `createHandler` from the
 * config the platform gives it, as its Lambda entry (handler.ts) makes it from the stack's environment.
 */
/** The function's module, imported when called (an import the CLI package's bundler follows). */
type HandlerModule = () => Promise<{ readonly createHandler?: unknown; readonly CONFIG?: ReadConfigOptions }>;

export type LocalFunction =
  | { readonly name: string; readonly module: HandlerModule; readonly trigger: { readonly kind: 'sqs'; readonly queue: 'dispatch' | 'lambdaFailures' | 'orchestrators'; readonly batchSize: number; readonly timeoutSeconds: number } }
  | { readonly name: string; readonly module: HandlerModule; readonly trigger: { readonly kind: 'http'; readonly timeoutSeconds: number } }
  | { readonly name: string; readonly module: HandlerModule; readonly trigger: { readonly kind: 'schedule'; readonly timeoutSeconds: number } }
  | {
      readonly name: string;
      readonly module: HandlerModule;
      /** `filter`: the mapping's filter criteria — records it refuses never reach the handler, as in Lambda. */
      readonly trigger: { readonly kind: 'stream'; readonly table: 'ledger'; readonly batchSize: number; readonly timeoutSeconds: number; readonly filter?: (record: DynamoDBRecord) => boolean };
    };

/** Each function's handler module, imported when called (an import the CLI package's bundler follows). */
const MODULES: Readonly<Record<LedgerFunctionName, HandlerModule>> = {
  intake: () => import('../functions/intake/function.js'),
  api: () => import('../functions/api/function.js'),
  monitor: () => import('../functions/monitor/function.js'),
  publisher: () => import('../functions/publisher/function.js'),
  retention: () => import('../functions/retention/function.js'),
  failures: () => import('../functions/failures/function.js'),
  orchestrators: () => import('../functions/orchestrators/function.js'),
};

/**
 * A function's trigger as the local platform runs it. The monitor's schedule is the tick, and its
 * budget is cut from the stack's timeout, as in AWS. A stream function sees only what the stack's filter
 * passes: the published items (the publisher), or TTL removals (retention) — DynamoDB Local's sweeper
 * deletes expired items too (within seconds of expiry, by the real clock), so locally it runs as in AWS.
 */
function localTrigger(name: LedgerFunctionName): LocalFunction['trigger'] {
  const { trigger, timeoutSeconds } = LEDGER_FUNCTION_SPECS[name];
  switch (trigger.kind) {
    case 'sqs':
      return { kind: 'sqs', queue: trigger.queue, batchSize: trigger.batchSize, timeoutSeconds };
    case 'http':
      return { kind: 'http', timeoutSeconds };
    case 'schedule':
      return { kind: 'schedule', timeoutSeconds };
    case 'stream':
      return { kind: 'stream', table: 'ledger', batchSize: trigger.batchSize, timeoutSeconds, filter: trigger.records === 'published' ? isPublishedRecord : isTtlRemoval };
  }
}

/** The functions the local platform runs: the construct's list (infra/constructs/function-names.ts), each on its local trigger. */
export const LOCAL_FUNCTIONS: readonly LocalFunction[] = LEDGER_FUNCTIONS.map((name) => ({ name, module: MODULES[name], trigger: localTrigger(name) }) as LocalFunction);

type AnyHandler = SqsHandler | HttpApiHandler | ScheduledHandler | StreamHandler;

/**
 * Imports a function's module and makes its handler on the config read from `settings` (the variables
 * the stack would set, as a record: never through `process.env`), failing clearly if it has no `createHandler`.
 */
export async function loadHandler<H extends AnyHandler>(fnDef: LocalFunction, settings: LedgerSettings): Promise<H> {
  const loaded = await fnDef.module();
  if (typeof loaded.createHandler !== 'function') {
    throw new TypeError(`the ${fnDef.name} function's module exports no function named "createHandler"`);
  }
  if (!loaded.CONFIG) throw new TypeError(`the ${fnDef.name} function's module exports no CONFIG (the settings it requires)`);
  const create = loaded.createHandler as (config: LedgerConfig) => H;
  return create(ledgerConfigFrom(settings, loaded.CONFIG));
}
