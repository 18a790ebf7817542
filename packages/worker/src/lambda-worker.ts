import { createLambdaHandler, type LambdaHandler } from './lambda.js';
import { dynamoRunStore, type LambdaRunStore } from './lambda-store.js';
import { checkWorkerOptions, safeLog, type CommonWorkerOptions } from './options.js';

export interface LambdaWorkerOptions extends CommonWorkerOptions {
  /** Where run state lives. @default dynamoRunStore({ tableName: process.env.KIT_RUN_TABLE }) (the table `ledger.addLambdaTarget` made), made at the first invocation */
  readonly store?: LambdaRunStore;
}

/**
 * A worker as a Lambda function (CONTRACT §12): `export const handler = createLambdaWorker({ name, run })`.
 * The ledger invokes it asynchronously with the submission; run state lives in `store`, and cancel,
 * supersede and approval decisions reach the run through its control record. No secret: a Lambda
 * worker is reached through IAM (only principals allowed `lambda:InvokeFunction` invoke it).
 * Imported from `@dispatch-ledger/worker/lambda`, so an HTTP worker never loads the DynamoDB SDK.
 */
export function createLambdaWorker(options: LambdaWorkerOptions): LambdaHandler {
  checkWorkerOptions(options, 'createLambdaWorker');
  let store = options.store;
  return createLambdaHandler({
    run: options.run,
    log: safeLog(options.name, options.log),
    signer: options.signer,
    retry: options.retry,
    transport: options.transport,
    clock: options.clock,
    stallHintSeconds: options.stallHintSeconds,
    store: () => (store ??= dynamoRunStore({ tableName: process.env.KIT_RUN_TABLE ?? '' })),
  });
}
