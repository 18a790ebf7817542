import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { takeOrchestratorMessage, type OrchestratorDeps } from '../../shared/usecases/orchestrators.js';
import type { LedgerConfig } from '../../shared/adapters/config.js';
import { jsonBodyOf, senderOf, sqsBatchHandler } from '../../shared/adapters/sqs-batch.js';
import { clip } from '../../shared/text.js';
import { logger, orchestratorDeps } from './deps.js';

export { CONFIG } from './deps.js';

/**
 * The orchestrator queue (CONTRACT §17): state machines' approval requests (`.waitForTaskToken`) and
 * EventBridge's Step Functions status changes. A message for a run the ledger does not follow (now) is
 * logged and acknowledged. One that cannot be read, or an approval request not from the state machine of
 * the run it names, is logged (never its body: it may hold a task token) and reported back: after its
 * receives it rests in the DLQ, which alarms — its execution waits on a task token nobody holds, and only
 * an alarm says so. A lost race, or a request for a run whose start is not recorded yet, is reported back
 * alone and retried by SQS.
 */
async function recordHandler(deps: OrchestratorDeps, record: SQSRecord): Promise<void> {
  const { senderId, redrivenFor } = senderOf(record);
  const outcome = await takeOrchestratorMessage(deps, jsonBodyOf(record), senderId, redrivenFor);
  const fields = { messageId: record.messageId, outcome };
  if (outcome === 'unreadable') logger.warn('an orchestrator message the ledger cannot read; kept for the DLQ', { ...fields, bytes: record.body.length });
  else if (outcome === 'refused') logger.warn('an approval request not from the state machine of the run it names; refused, kept for the DLQ', { ...fields, senderId: clip(senderId ?? '', 200), redrivenFor: clip(redrivenFor ?? '', 200) });
  else logger.info('orchestrator message taken in', fields);
  // Never acknowledged: SQS brings it back until its receives are spent, then moves it to the DLQ (alarmed).
  if (outcome === 'unreadable' || outcome === 'refused') throw new Error(`an orchestrator message ${outcome === 'refused' ? 'refused' : 'not readable'}; kept for the DLQ`);
  if (outcome === 'conflict') throw new Error('the dispatch kept changing; retried');
  // The run's start is not recorded yet (its execution asked, or ended, while the ledger was in StartExecution): SQS brings it back.
  if (outcome === 'not_yet') throw new Error('the run is not recorded yet; retried');
  // An ended run's status change Step Functions could not be asked about: SQS brings it back.
  if (outcome === 'unobserved') throw new Error('Step Functions could not be asked; retried');
}

export function createHandler(config: LedgerConfig): (event: SQSEvent, context: Context) => Promise<SQSBatchResponse> {
  const deps = orchestratorDeps(config);
  return sqsBatchHandler((record) => recordHandler(deps, record));
}
