import type { SQSEvent } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { loadHandler, LOCAL_FUNCTIONS } from '../../local/functions.js';
import type { SqsHandler } from '../../local/runtime/sqs-event-source.js';
import { lambdaContext, sqsRecord } from '../support/sqs-records.js';

// The orchestrators function's handler (functions/orchestrators): what it acknowledges and what it
// reports back to SQS. A message it cannot read never touches the store, so no engine is needed here.

const SETTINGS = { LEDGER_TABLE_NAME: 'local-table', EVIDENCE_BUCKET: 'local-bucket', PRINCIPAL_MODE: 'enforce', AWS_REGION: 'us-east-1' };

const record = (messageId: string, body: string) => sqsRecord(messageId, body, 'AROAFLOWROLE:execution', 'dispatch-ledger-orchestrators');

const context = lambdaContext(60_000);

describe('the orchestrators handler', () => {
  it('reports an unreadable message back, so it ends in the alarmed DLQ instead of being acknowledged', async () => {
    // The bug it pins: an unreadable message (an approval request of the wrong shape, say) was logged and
    // acknowledged, and the execution waited on its task token with nothing anywhere but a log line.
    const orchestrators = LOCAL_FUNCTIONS.find((fn) => fn.name === 'orchestrators');
    if (!orchestrators) throw new Error('no orchestrators function in LOCAL_FUNCTIONS');
    const handler = await loadHandler<SqsHandler>(orchestrators, SETTINGS);
    const event: SQSEvent = {
      Records: [record('m-not-json', 'not json'), record('m-neither', JSON.stringify({ hello: 'world' })), record('m-no-token', JSON.stringify({ dispatchId: 'd-1', runId: 'r-1' }))],
    };

    // Every record reported back: Powertools then fails the whole batch, and SQS brings each one back.
    await expect(handler(event, context)).rejects.toThrow(/All records failed processing/);
  });
});
