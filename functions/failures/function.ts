import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { takeLambdaFailure, type LambdaFailureDeps } from '../../shared/usecases/lambda-failure.js';
import type { LedgerConfig } from '../../shared/adapters/config.js';
import { jsonBodyOf, senderOf, sqsBatchHandler } from '../../shared/adapters/sqs-batch.js';
import { clip } from '../../shared/text.js';
import { failureDeps, logger } from './deps.js';

export { CONFIG } from './deps.js';

/**
 * Lambda's on-failure destination of every lambda target (an SQS queue): each record is an invocation
 * that failed or timed out after Lambda's own retries, taken in as the run's failure (CONTRACT §12).
 * A record that cannot be read is logged and acknowledged (nothing in it names a run); a store error,
 * or a record for a run whose submission is not recorded yet, is reported back alone and retried by SQS.
 */
async function recordHandler(deps: LambdaFailureDeps, record: SQSRecord): Promise<void> {
  const { senderId, redrivenFor } = senderOf(record);
  const outcome = await takeLambdaFailure(deps, jsonBodyOf(record), senderId, redrivenFor);
  if (outcome === 'unreadable') logger.warn('an on-failure record names no run of the ledger; dropped', { messageId: record.messageId, bytes: record.body.length });
  else if (outcome === 'refused' || outcome === 'refused_redriven') {
    logger.warn('an on-failure record not from the function of the run it names; refused', { messageId: record.messageId, senderId: clip(senderId ?? '', 200), redrivenFor: clip(redrivenFor ?? '', 200) });
    // An operator moved it back, but for a first sender that is not the run's function (lost on a second
    // redrive without --table/--registry, say): back to the DLQ, alarmed, never acknowledged (a review: lost for good).
    if (outcome === 'refused_redriven') throw new Error("a redriven on-failure record whose first sender is not the run's function; kept for the DLQ");
  }
  // Its run's submission is not recorded yet (the function failed before Invoke's answer was written): kept, and SQS brings it back.
  else if (outcome === 'not_yet') logger.info('an on-failure record came before its run was recorded; kept, and retried', { messageId: record.messageId });
  else logger.info('lambda failure taken in', { messageId: record.messageId, outcome });
  if (outcome === 'conflict') throw new Error('the dispatch kept changing; retried');
  if (outcome === 'not_yet') throw new Error('the run is not recorded yet; retried');
}

export function createHandler(config: LedgerConfig): (event: SQSEvent, context: Context) => Promise<SQSBatchResponse> {
  const deps = failureDeps(config);
  return sqsBatchHandler((record) => recordHandler(deps, record));
}
