/**
 * The deployed stack's outputs (infra/stack.ts writes exactly these), in a module of its own so the
 * CLI can read a stack by the same names without loading the CDK: `ledger … --stack NAME`.
 */
export const STACK_OUTPUTS = [
  'ApiUrl',
  'DispatchQueueUrl',
  'DeadLetterQueueUrl',
  'LedgerTableName',
  'EvidenceBucketName',
  'StreamFailureBucketName',
  'EventBusName',
  'AlarmTopicArn',
] as const;

export type StackOutputName = (typeof STACK_OUTPUTS)[number];
