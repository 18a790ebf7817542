import { CfnElement, Stack, Token, Validations } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';
import type { LedgerFunctionName } from './function-names.js';

/**
 * What the acknowledgements name in a `DispatchLedger` (which has all of it): its parts as constructs,
 * so this file needs nothing from the construct's own file (which applies them).
 */
export interface NagSubject {
  readonly functions: Readonly<Record<LedgerFunctionName, IConstruct>>;
  readonly intake: { readonly deadLetterQueue: IConstruct };
  readonly lambdaFailures: { readonly deadLetterQueue: IConstruct };
  /** What its state machine targets made (CONTRACT §17), acknowledged as it made them. */
  readonly stateMachineTargets: { readonly acknowledgements: readonly NagAcknowledgement[] };
  /** What its durable function targets made (CONTRACT §17), likewise. */
  readonly durableFunctionTargets: { readonly acknowledgements: readonly NagAcknowledgement[] };
  readonly monitor: { readonly rule: IConstruct };
  readonly publisher: { readonly failureBucket: IConstruct };
  readonly storage: { readonly evidenceBucket: IConstruct };
  readonly targetSecretPrefix: string;
}

/** One acknowledged cdk-nag finding: which rule (and finding), on which construct, and why it stands. */
export interface NagAcknowledgement {
  readonly scope: IConstruct;
  readonly id: string;
  readonly reason: string;
}

/**
 * Every cdk-nag finding Dispatch Ledger accepts, with its reason — the only place findings are
 * acknowledged. Anything not here fails `npx cdk synth` and the infra tests.
 */
export function nagAcknowledgements(ledger: NagSubject & IConstruct): NagAcknowledgement[] {
  const { intake, api, monitor, publisher, retention, failures, orchestrators } = ledger.functions;
  const evidenceObjects = `AwsSolutions-IAM5[Resource::<${logicalIdOf(ledger.storage.evidenceBucket)}.Arn>/*]`;
  const failureObjects = `AwsSolutions-IAM5[Resource::<${logicalIdOf(ledger.publisher.failureBucket)}.Arn>/*]`;
  const stack = Stack.of(ledger);
  const shown = (value: string, pseudo: string): string => (Token.isUnresolved(value) ? `<${pseudo}>` : value);
  const targetSecrets = `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:secretsmanager:${shown(stack.region, 'AWS::Region')}:${shown(stack.account, 'AWS::AccountId')}:secret:${ledger.targetSecretPrefix}*]`;
  const list: NagAcknowledgement[] = [];
  for (const fn of [intake, api, monitor, publisher, retention, failures, orchestrators]) {
    // An aws-cdk-lib newer than the one the repository tests (2.278 knows nodejs26.x) makes this a finding.
    const reason = 'The functions run on the newest runtime their prebuilt bundles are tested on (nodejs24.x; nodejs22.x also works); a newer runtime is an upgrade of the package, not of the stack.';
    list.push({ scope: fn, id: 'Serverless-LambdaLatestVersion', reason }, { scope: fn, id: 'AwsSolutions-L1', reason });
  }
  for (const fn of [intake, api, monitor]) {
    list.push({
      scope: fn,
      id: evidenceObjects,
      reason: 'Evidence and spilled bodies are keyed by dispatch id and attempt at run time; the grant is limited to object actions this function uses on the ledger\'s own bucket.',
    });
    list.push({
      scope: fn,
      id: targetSecrets,
      reason: `Targets registered after deployment name their auth secret at run time; reads are limited to GetSecretValue on this stack's own name prefix ${ledger.targetSecretPrefix}, and the function refuses a secretRef outside it.`,
    });
  }
  list.push({
    scope: orchestrators,
    id: evidenceObjects,
    reason: "A state machine's output above the inline bound is kept as its result's body, keyed by dispatch id, attempt and digest at run time; the grant is PutObject alone on the ledger's own bucket.",
  });
  list.push(
    {
      scope: publisher,
      id: failureObjects,
      reason: 'Lambda names the on-failure records of the stream mapping itself; the publisher may only PutObject (and ListBucket) on its own failure bucket.',
    },
    { scope: publisher, id: 'AwsSolutions-IAM5[Resource::*]', reason: 'dynamodb:ListStreams has no resource-level permissions; every other stream action is scoped to the ledger table\'s stream.' },
    {
      scope: retention,
      id: evidenceObjects,
      reason: 'Expired records name their objects at run time (a dispatch\'s payload, evidence and sealed folders, a rejection\'s body); the grant is DeleteObject alone, on the ledger\'s own bucket, and only this function has it.',
    },
    {
      scope: retention,
      id: failureObjects,
      reason: 'Lambda names the on-failure records of the retention stream mapping itself; the function may only PutObject (and ListBucket) on the failure bucket.',
    },
    {
      scope: retention,
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason: 'dynamodb:ListStreams has no resource-level permissions; the retention function\'s other stream actions are scoped to the ledger table\'s stream, and it has no table data actions.',
    },
    {
      scope: ledger.storage.evidenceBucket,
      id: 'AwsSolutions-S1',
      reason: 'Only the ledger functions touch this bucket, through their roles; access logs would add an S3 write per request to every lifecycle. Enable CloudTrail S3 data events where an object-level audit is required.',
    },
    {
      scope: ledger.publisher.failureBucket,
      id: 'AwsSolutions-S1',
      reason: 'Holds only Lambda on-failure records of the stream mapping, written by Lambda and read by `ledger stream replay`; CloudTrail data events cover an audit need.',
    },
    {
      scope: ledger.intake.deadLetterQueue,
      id: 'Serverless-SQSRedrivePolicy',
      reason: 'This is the dead-letter queue itself; its messages are alarmed on and moved back with `ledger dlq redrive`.',
    },
    {
      scope: ledger.monitor.rule,
      id: 'Serverless-EventBusDLQ',
      reason: 'A missed monitor tick loses nothing: the next tick reads the same due index a minute later, and a retried tick would only overlap it.',
    },
    {
      scope: intake,
      id: 'Serverless-LambdaEventSourceMappingDestination',
      reason: 'An SQS event source mapping cannot have an on-failure destination; the dispatch queue\'s redrive policy sends untakeable messages to the alarmed DLQ.',
    },
    { scope: intake, id: 'Serverless-LambdaDLQ', reason: 'Invoked synchronously by the SQS event source mapping; failures go to the dispatch queue\'s DLQ.' },
    { scope: api, id: 'Serverless-LambdaDLQ', reason: 'Invoked synchronously through its function URL; the caller sees every failure as an HTTP error.' },
    { scope: publisher, id: 'Serverless-LambdaDLQ', reason: 'Invoked synchronously by the stream mapping, whose S3 on-failure destination keeps failed batches.' },
    { scope: monitor, id: 'Serverless-LambdaDLQ', reason: 'A failed scheduled tick needs no replay: the next tick covers the same due runs.' },
    { scope: retention, id: 'Serverless-LambdaDLQ', reason: 'Invoked synchronously by its stream mapping, whose S3 on-failure destination keeps the batches it could not clean up.' },
    { scope: failures, id: 'Serverless-LambdaDLQ', reason: 'Invoked synchronously by the SQS event source mapping of the lambda targets\' failures queue, whose redrive policy keeps what it cannot take in an alarmed DLQ.' },
    {
      scope: failures,
      id: 'Serverless-LambdaEventSourceMappingDestination',
      reason: 'An SQS event source mapping cannot have an on-failure destination; the failures queue\'s redrive policy sends what cannot be taken in to its alarmed DLQ.',
    },
    {
      scope: ledger.lambdaFailures.deadLetterQueue,
      id: 'Serverless-SQSRedrivePolicy',
      reason: 'This is the failures queue\'s dead-letter queue itself; it is alarmed on (LambdaFailuresDeadLetterQueue).',
    },
  );
  list.push(
    { scope: orchestrators, id: 'Serverless-LambdaDLQ', reason: 'Invoked synchronously by the SQS event source mapping of the orchestrator queue, whose redrive policy keeps what it cannot take in an alarmed DLQ.' },
    {
      scope: orchestrators,
      id: 'Serverless-LambdaEventSourceMappingDestination',
      reason: 'An SQS event source mapping cannot have an on-failure destination; the orchestrator queue\'s redrive policy sends what cannot be taken in to its alarmed DLQ.',
    },
  );
  list.push(...ledger.stateMachineTargets.acknowledgements, ...ledger.durableFunctionTargets.acknowledgements);
  for (const fn of [intake, api, monitor, publisher, retention, failures, orchestrators]) {
    list.push({
      scope: fn,
      id: 'Serverless-LambdaTracing',
      reason: 'Every request is traceable by structured logs (messageId, dispatchId, runId) and the ledger\'s own receipts; X-Ray would add a per-trace charge to every lifecycle.',
    });
  }
  return list;
}

/** The orchestrator queue's DLQ (CONTRACT §17), made by the first state machine target. */
export function orchestratorDeadLetterAcknowledgement(deadLetterQueue: IConstruct): NagAcknowledgement {
  return {
    scope: deadLetterQueue,
    id: 'Serverless-SQSRedrivePolicy',
    reason: 'This is the orchestrator queue\'s dead-letter queue itself (and the DLQ of the execution status rule\'s target); it is alarmed on.',
  };
}

/**
 * A function's grant on a state machine's executions (`arn:…:execution:NAME:*`, CONTRACT §17), under
 * the id cdk-nag gives it (the resource as its policy holds it, flattened the way cdk-nag prints it).
 */
export function executionsAcknowledgement(fn: IConstruct, executionsArn: string): NagAcknowledgement {
  return {
    scope: fn,
    id: `AwsSolutions-IAM5[Resource::${flattened(Stack.of(fn).resolve(executionsArn))}]`,
    reason: "The ledger names each execution at run time, one per dispatch attempt (CONTRACT §17); the grant is limited to this state machine's executions and to the calls the function makes on them.",
  };
}

/**
 * A function's grant on a durable function's versions (`arn:…:function:NAME:*`, CONTRACT §17): its
 * durable executions are named under the version that runs them, never under an alias, so no narrower
 * resource covers them.
 */
export function durableExecutionsAcknowledgement(fn: IConstruct, versionsArn: string): NagAcknowledgement {
  return {
    scope: fn,
    id: `AwsSolutions-IAM5[Resource::${flattened(Stack.of(fn).resolve(versionsArn))}]`,
    reason: "The ledger names each durable execution at run time, one per dispatch attempt, under the function version that runs it (an alias never appears in its ARN) (CONTRACT §17); the grant is limited to this function's versions and to the durable-execution calls the function makes.",
  };
}

/** A CloudFormation value as cdk-nag prints it in a finding: references as `<id>` and `<id.attribute>`, joins joined, the rest as JSON. */
function flattened(value: unknown): string {
  if (typeof value === 'string') return value.replace(/\$\{/g, '<').replace(/\}/g, '>');
  if (typeof value !== 'object' || value === null) return JSON.stringify(value);
  const join = (value as { 'Fn::Join'?: [string, unknown[]] })['Fn::Join'];
  if (join) return join[1].map(flattened).join(join[0]);
  const getAtt = (value as { 'Fn::GetAtt'?: [unknown, unknown] })['Fn::GetAtt'];
  if (getAtt) return `<${flattened(getAtt[0])}.${flattened(getAtt[1])}>`;
  const ref = (value as { Ref?: unknown }).Ref;
  if (ref !== undefined) return `<${flattened(ref)}>`;
  return JSON.stringify(value);
}

/** The logical id cdk-nag prints for a construct's CloudFormation resource. */
function logicalIdOf(construct: IConstruct): string {
  const resource = construct.node.defaultChild;
  if (!(resource instanceof CfnElement)) throw new Error(`${construct.node.path} has no CloudFormation resource`);
  return Stack.of(construct).getLogicalId(resource);
}

/** Applies `nagAcknowledgements` with CDK's native acknowledgement API (cdk-nag 3). */
export function acknowledgeNagFindings(ledger: NagSubject & IConstruct): void {
  applyAcknowledgements(nagAcknowledgements(ledger));
}

/** Applies acknowledgements as they are made (a target's grants, after the ledger applied its own). */
export function applyAcknowledgements(made: readonly NagAcknowledgement[]): void {
  for (const { scope, id, reason } of made) Validations.of(scope).acknowledge({ id, reason });
}
