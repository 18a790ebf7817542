import { MONITOR_TIMEOUT_SECONDS } from '../../shared/usecases/timeout.js';

/**
 * The ledger's Lambda functions and their triggers: one list, read by the CDK construct (each function,
 * its timeout, memory and event source) and by the local platform (`local/functions.ts`: which handler
 * runs on which local trigger). Each is a thin handler under `functions/<name>/` (handler.ts, the Lambda entry; function.ts, `createHandler(config)`).
 */
export const LEDGER_FUNCTIONS = ['intake', 'api', 'monitor', 'publisher', 'retention', 'failures', 'orchestrators'] as const;
export type LedgerFunctionName = (typeof LEDGER_FUNCTIONS)[number];

export type LedgerTrigger =
  /**
   * An SQS event source: the dispatch queue, the lambda targets' on-failure queue (CONTRACT §12), or the
   * orchestrator queue (state machines' approval requests and status changes, CONTRACT §17).
   */
  | { readonly kind: 'sqs'; readonly queue: 'dispatch' | 'lambdaFailures' | 'orchestrators'; readonly batchSize: number }
  /** The HTTP API (a function URL in AWS). */
  | { readonly kind: 'http' }
  /** The monitor's schedule (its period is the construct's `monitorPeriod`; the local tick). */
  | { readonly kind: 'schedule' }
  /** The ledger table's stream, filtered to the records it reads: the published items, or TTL removals. */
  | { readonly kind: 'stream'; readonly records: 'published' | 'ttl_removals'; readonly batchSize: number };

export interface LedgerFunctionSpec {
  readonly trigger: LedgerTrigger;
  readonly timeoutSeconds: number;
  readonly memoryMb: number;
}

/**
 * Timeouts: each target call is bounded by the target timeout; a batch of 10 runs its records in
 * parallel, so intake needs about one target call plus its writes. The API forwards one call at most. A
 * monitor tick works until its budget (the period, or what is left of its timeout) is spent. The
 * publisher talks to EventBridge and adds each batch's counts to a counter item; retention lists and
 * deletes a few folders per expired record, a batch's records in parallel.
 */
export const LEDGER_FUNCTION_SPECS: Readonly<Record<LedgerFunctionName, LedgerFunctionSpec>> = {
  intake: { trigger: { kind: 'sqs', queue: 'dispatch', batchSize: 10 }, timeoutSeconds: 30, memoryMb: 512 },
  api: { trigger: { kind: 'http' }, timeoutSeconds: 30, memoryMb: 512 },
  monitor: { trigger: { kind: 'schedule' }, timeoutSeconds: MONITOR_TIMEOUT_SECONDS, memoryMb: 512 },
  // Only the items it reads: its own counter writes (and slot, registry, settings items) never wake it.
  publisher: { trigger: { kind: 'stream', records: 'published', batchSize: 100 }, timeoutSeconds: 30, memoryMb: 256 },
  // Nothing waits on a deletion: fuller batches, fewer invocations.
  retention: { trigger: { kind: 'stream', records: 'ttl_removals', batchSize: 100 }, timeoutSeconds: 60, memoryMb: 256 },
  failures: { trigger: { kind: 'sqs', queue: 'lambdaFailures', batchSize: 10 }, timeoutSeconds: 30, memoryMb: 256 },
  // A status change is looked up at Step Functions (one call, bounded by the target timeout) before it is recorded.
  orchestrators: { trigger: { kind: 'sqs', queue: 'orchestrators', batchSize: 10 }, timeoutSeconds: 30, memoryMb: 256 },
};

/** The batch size of a function's event source (SQS or stream). */
export function batchSizeOf(name: LedgerFunctionName): number {
  const trigger = LEDGER_FUNCTION_SPECS[name].trigger;
  if (trigger.kind === 'sqs' || trigger.kind === 'stream') return trigger.batchSize;
  throw new Error(`${name} has no batched event source`);
}
