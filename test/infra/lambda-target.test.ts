import { App, Duration, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { DispatchLedger } from '@dispatch-ledger/cdk';
import { Code, Function as LambdaFunction, Runtime } from 'aws-cdk-lib/aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logicalId, synthesizeLedger, type Synthesized } from './synth.js';

/** `ledger.addLambdaTarget(name, fn)` (CONTRACT §12): exactly the grants and the destination a Lambda worker needs. */

let synth: Synthesized;
let workerId: string;
let runsId: string;

beforeAll(() => {
  synth = synthesizeLedger({
    extend: (stack) => {
      const worker = new LambdaFunction(stack, 'ReviewerWorker', { runtime: Runtime.NODEJS_22_X, handler: 'index.handler', code: Code.fromInline('export const handler = async () => ({});'), timeout: Duration.minutes(2) });
      for (const id of ['AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]', 'Serverless-LambdaTracing', 'Serverless-LambdaDefaultMemorySize', 'Serverless-LambdaLatestVersion']) {
        Validations.of(worker).acknowledge({ id, reason: "test fixture: the user's own worker function" });
      }
      const runs = stack.ledger.addLambdaTarget('reviewer', worker, { timeout: Duration.minutes(2) });
      workerId = logicalId(stack, worker);
      runsId = logicalId(stack, runs);
    },
  });
});
afterAll(() => synth.dispose());

interface Statement {
  readonly Action: string | string[];
  readonly Resource: unknown;
}
const statementsOf = (roleLogicalIdPrefix: string): Statement[] =>
  Object.values(synth.template.findResources('AWS::IAM::Policy'))
    .filter((policy) => JSON.stringify((policy as { Properties: { Roles: unknown } }).Properties.Roles).includes(roleLogicalIdPrefix))
    .flatMap((policy) => (policy as { Properties: { PolicyDocument: { Statement: Statement[] } } }).Properties.PolicyDocument.Statement);
const grants = (roleOf: string, action: string): string => JSON.stringify(statementsOf(roleOf).filter((statement) => [statement.Action].flat().includes(action)).map((statement) => statement.Resource));

describe('addLambdaTarget', () => {
  it("sends the worker's failed and timed-out invocations, after Lambda's two retries, to the ledger's failures queue", () => {
    synth.template.hasResourceProperties('AWS::Lambda::EventInvokeConfig', {
      FunctionName: { Ref: workerId },
      MaximumRetryAttempts: 2,
      // Three tries of the 2-minute function and Lambda's delays: no event outlives the ledger's "queued" window.
      MaximumEventAgeInSeconds: 3 * 120 + 180,
      DestinationConfig: { OnFailure: { Destination: { 'Fn::GetAtt': [logicalId(synth.stack, synth.stack.ledger.lambdaFailures.queue), 'Arn'] } } },
    });
  });

  it('lets the functions that submit and resume runs invoke the worker and read its run state by key, and nothing more of it', () => {
    for (const name of ['intake', 'api', 'monitor'] as const) {
      const role = logicalId(synth.stack, synth.stack.ledger.functions[name].function.role as never);
      expect(grants(role, 'lambda:InvokeFunction'), name).toContain(workerId);
      expect(grants(role, 'dynamodb:GetItem'), name).toContain(runsId);
      expect(grants(role, 'dynamodb:PutItem'), name).not.toContain(runsId);
    }
    const failures = logicalId(synth.stack, synth.stack.ledger.functions.failures.function.role as never);
    expect(grants(failures, 'lambda:InvokeFunction')).not.toContain(workerId);
  });

  it("gives the worker its own run state and the ledger's function URL, and registers it as the target", () => {
    const worker = logicalId(synth.stack, synth.template && (synth.stack.node.findChild('ReviewerWorker') as LambdaFunction).role as never);
    expect(grants(worker, 'dynamodb:PutItem')).toContain(runsId);
    synth.template.hasResourceProperties('AWS::Lambda::Permission', {
      Action: 'lambda:InvokeFunctionUrl',
      FunctionName: { 'Fn::GetAtt': [logicalId(synth.stack, synth.stack.ledger.functions.api.function), 'Arn'] },
      Principal: { 'Fn::GetAtt': [worker, 'Arn'] },
      FunctionUrlAuthType: 'AWS_IAM',
    });
    // Function URLs also want InvokeFunction through the URL (regression: without it every callback is 403 in AWS).
    synth.template.hasResourceProperties('AWS::Lambda::Permission', {
      Action: 'lambda:InvokeFunction',
      FunctionName: { 'Fn::GetAtt': [logicalId(synth.stack, synth.stack.ledger.functions.api.function), 'Arn'] },
      Principal: { 'Fn::GetAtt': [worker, 'Arn'] },
      InvokedViaFunctionUrl: true,
    });
    expect(grants(worker, 'dynamodb:UpdateItem')).not.toContain(runsId);
    const api = synth.template.toJSON().Resources[logicalId(synth.stack, synth.stack.ledger.functions.api.function)] as { Properties: { Environment: { Variables: { LEDGER_REGISTRY: unknown } } } };
    const registry = JSON.stringify(api.Properties.Environment.Variables.LEDGER_REGISTRY);
    for (const part of ['reviewer', 'lambda', 'timeoutSeconds', runsId]) expect(registry).toContain(part);
  });

  it("keeps the worker's run table as the ledger keeps its own: retained and protected by default, as removalPolicy says otherwise (regression: always destroyed, so a cdk destroy or a renamed target lost the runs in flight)", () => {
    const table = synth.template.toJSON().Resources[runsId] as { DeletionPolicy?: string; UpdateReplacePolicy?: string; Properties: { DeletionProtectionEnabled?: boolean } };
    expect([table.DeletionPolicy, table.UpdateReplacePolicy, table.Properties.DeletionProtectionEnabled]).toEqual(['Retain', 'Retain', true]);
    const app = new App();
    const stack = new Stack(app, 'Disposable');
    const ledger = new DispatchLedger(stack, 'Ledger', { removalPolicy: RemovalPolicy.DESTROY, deletionProtection: false });
    const worker = new LambdaFunction(stack, 'Worker', { runtime: Runtime.NODEJS_22_X, handler: 'index.handler', code: Code.fromInline('export const handler = async () => ({});'), timeout: Duration.minutes(1) });
    const runs = ledger.addLambdaTarget('disposable', worker);
    const disposable = Template.fromStack(stack).toJSON().Resources[logicalId(stack, runs)] as typeof table;
    expect([disposable.DeletionPolicy, disposable.Properties.DeletionProtectionEnabled]).toEqual(['Delete', false]);
  });

  it("adds no cdk-nag finding of the ledger's own", () => {
    expect(synth.nagFindings.filter((finding) => !finding.path.includes('/ReviewerWorker'))).toEqual([]);
  });
});
