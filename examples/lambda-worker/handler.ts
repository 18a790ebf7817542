import { sigv4Signer } from '@dispatch-ledger/worker';
import { createLambdaWorker } from '@dispatch-ledger/worker/lambda';

/**
 * An example Lambda worker (CONTRACT §12), deployed by the app with `-c exampleLambdaWorker=true`:
 * it writes a short report as evidence and completes. The kit keeps its run state in the table
 * `ledger.addLambdaTarget` made (`KIT_RUN_TABLE`) and signs its callbacks with the function's role.
 */
export const handler = createLambdaWorker({
  name: 'example-worker',
  signer: sigv4Signer({ region: process.env.AWS_REGION ?? 'us-east-1' }),
  run: async (task, ctx) => {
    const goal = typeof task.goal === 'string' ? task.goal : 'the task';
    await ctx.heartbeat();
    await ctx.putEvidence('out/report.md', Buffer.from(`# Report\n\nDone: ${goal}\n`, 'utf8'));
    return { summary: `report written for ${goal}` };
  },
});
