import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks, ServerlessChecks } from 'cdk-nag';
import { eventsProfileFrom } from '@dispatch-ledger/cdk';
import { DispatchLedgerStack } from './stack.js';

/**
 * `npx cdk synth` / `npx cdk deploy`: Dispatch Ledger as one stack, checked by cdk-nag's AwsSolutions
 * and Serverless packs (synth fails on any finding not acknowledged with a reason in `nag.ts`).
 * Account and region come from the deploying credentials (`CDK_DEFAULT_*`); synth needs neither.
 */
const app = new App();
new DispatchLedgerStack(app, 'DispatchLedger', {
  description: 'Dispatch Ledger: durable dispatch, watch and proof for agent and worker runs',
  // `npx cdk deploy -c exampleLambdaWorker=true`: also the example Lambda worker, as a lambda target.
  exampleLambdaWorker: app.node.tryGetContext('exampleLambdaWorker') === 'true' || app.node.tryGetContext('exampleLambdaWorker') === true,
  // `npx cdk deploy -c events=attention` (or `-c events="Dispatch Orphaned,Run Stalled"`): what goes on the bus (CONTRACT §3 v2).
  ...(app.node.tryGetContext('events') === undefined ? {} : { ledger: { events: eventsProfileFrom(String(app.node.tryGetContext('events'))) } }),
  ...(process.env.CDK_DEFAULT_ACCOUNT && process.env.CDK_DEFAULT_REGION
    ? { env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION } }
    : {}),
});
Validations.of(app).addPlugins(new AwsSolutionsChecks(app), new ServerlessChecks(app));
app.synth();
