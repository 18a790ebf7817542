/**
 * @dispatch-ledger/worker/lambda — a worker as a Lambda function (CONTRACT §12), with its run state in
 * DynamoDB. Apart from the package's root so an HTTP worker pulls no DynamoDB SDK.
 */
export { createLambdaWorker, type LambdaWorkerOptions } from './lambda-worker.js';
export { createLambdaHandler, type LambdaContextLike, type LambdaHandler, type LambdaHandlerOptions } from './lambda.js';
export {
  dynamoRunStore,
  memoryLambdaStore,
  LambdaItemError,
  type DynamoRunStoreOptions,
  type LambdaApproval,
  type LambdaCreateOutcome,
  type LambdaRunItem,
  type LambdaRunState,
  type LambdaRunStore,
} from './lambda-store.js';
