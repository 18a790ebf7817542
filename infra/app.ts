import { App } from 'aws-cdk-lib';

/**
 * The CDK app. The `DispatchLedger` construct and its stack arrive with the deploy issue; until then
 * the app synthesizes nothing, so `npx cdk synth` already works offline on a clean clone.
 */
const app = new App();
app.synth();
