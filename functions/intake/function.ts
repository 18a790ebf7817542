import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import { countForTarget } from '../../shared/adapters/metrics.js';
import { crashPoint, isInjectedCrash } from '../../shared/faults.js';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { DispatchInProgressError, takeDispatchMessage, type IntakeDeps, type IntakeResult } from '../../shared/usecases/intake.js';
import type { LedgerConfig } from '../../shared/adapters/config.js';
import { senderOf } from '../../shared/adapters/sqs-batch.js';
import { intakeDeps, logger, metrics } from './deps.js';

export { CONFIG } from './deps.js';

/** One metric per outcome worth alarming on, with the contract's single dimension. */
function count(result: IntakeResult): void {
  const name = result.outcome === 'blocked' ? 'BlockedDispatches' : result.outcome === 'retrying' ? 'SubmissionRetries' : result.outcome === 'rejected' ? 'RejectedMessages' : undefined;
  if (name) countForTarget(metrics, name, 'target' in result ? result.target : 'none');
}

/** SQS's SentTimestamp (epoch milliseconds) as an instant, when it is one. */
const sentAtOf = (timestamp: string | undefined): string | undefined => {
  const ms = Number(timestamp);
  return timestamp && Number.isSafeInteger(ms) && ms > 0 ? new Date(ms).toISOString() : undefined;
};

/**
 * Intake on the dispatch queue: each record becomes exactly one effect (see `takeDispatchMessage`).
 * A record whose processing throws is reported back alone (partial batch failure) and redelivered by
 * SQS; after the queue's maxReceiveCount it lands in the DLQ, which alarms.
 */
async function recordHandler(deps: IntakeDeps, record: SQSRecord, invocation: { crashed: boolean }): Promise<void> {
  try {
    const result = await takeDispatchMessage(deps, {
      messageId: record.messageId,
      body: record.body,
      ...senderOf(record),
      sentAt: sentAtOf(record.attributes.SentTimestamp),
    });
    logger.info('dispatch message taken', { messageId: record.messageId, ...result });
    count(result);
    crashPoint('intake.before_ack', result.dispatchId ?? record.messageId);
  } catch (error) {
    if (isInjectedCrash(error)) invocation.crashed = true;
    if (error instanceof DispatchInProgressError) {
      logger.info('duplicate delivery while the first is in progress; retried later', { messageId: record.messageId, dispatchId: error.dispatchId });
    } else {
      logger.error('dispatch message not taken; SQS will redeliver it', { messageId: record.messageId, error: error instanceof Error ? error.message : String(error) });
    }
    throw error;
  }
}

/** The intake's handler on `config` (its Lambda entry, handler.ts, reads the config from the environment). */
export function createHandler(config: LedgerConfig): (event: SQSEvent, context: Context) => Promise<SQSBatchResponse> {
  const deps = intakeDeps(config);
  // One per handler: a batch's records are its own.
  const processor = new BatchProcessor(EventType.SQS);
  return async (event, context) => {
    const invocation = { crashed: false };
    const response = await processPartialResponse(event, (record: SQSRecord) => recordHandler(deps, record, invocation), processor, { context });
    // The census's crash (compiled out of the deployed bundle): the process died, so nothing of this
    // batch is acknowledged and every record comes back — the ones already taken in included.
    if (invocation.crashed) throw new Error('the invocation crashed (injected)');
    return response;
  };
}
