import { readFileSync } from 'node:fs';
import { App, CfnElement, Stack, Validations } from 'aws-cdk-lib';
import { Match } from 'aws-cdk-lib/assertions';
import { Pass, StateMachine, StateMachineType, DefinitionBody, IntegrationPattern, JsonPath, TaskInput } from 'aws-cdk-lib/aws-stepfunctions';
import { LambdaInvoke, SqsSendMessage } from 'aws-cdk-lib/aws-stepfunctions-tasks';
import { Role } from 'aws-cdk-lib/aws-iam';
import type { Function as LambdaFunction } from 'aws-cdk-lib/aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DispatchLedger, executionStatusPattern } from '@dispatch-ledger/cdk';
import { parseStaticRegistry } from '../../shared/adapters/static-registry.js';
import { cfnLint, durableFunctionFixture, logicalId, registryOf, synthesizeLedger, type Synthesized } from './synth.js';

/**
 * `ledger.addStateMachineTarget(name, stateMachine)` (CONTRACT §17): a Standard state machine as a
 * target, with exactly the Step Functions calls the ledger makes granted, its approval requests and
 * status changes routed to the orchestrator queue, and its registry entry in every function.
 */

type Resource = { readonly Type: string; readonly Properties?: Record<string, unknown> };
interface Statement {
  readonly Effect: string;
  readonly Action: string | string[];
  readonly Resource: unknown;
}

/** AWS's sample "Step Functions Execution Status Change" event (an execution that succeeded). */
const SAMPLE = JSON.parse(readFileSync(new URL('../fixtures/sfn-status-change.json', import.meta.url), 'utf8')) as Record<string, unknown> & { detail: { stateMachineArn: string } };
const IMPORTED_ARN = 'arn:aws:states:eu-west-1:111122223333:stateMachine:imported-flow';
/** What the fixture state machines' own cdk-nag findings are: the user's, not the ledger's. */
const FIXTURE_FINDINGS = ['AwsSolutions-SF1', 'AwsSolutions-SF2', 'Serverless-StepFunctionStateMachineXray', 'Serverless-StepFunctionStateMachineAllLogging'];

let synth: Synthesized;
let resources: Record<string, Resource>;
let flow: StateMachine;
let audit: StateMachine;
let reviewTask: LambdaFunction;

/**
 * A Standard state machine: with `ask`, its first task asks the ledger for an approval (`.waitForTaskToken`
 * on the orchestrator queue, read before the target is added); without, a Pass alone (nothing of its own
 * grants it the queue).
 */
function flowIn(stack: Stack & { readonly ledger: DispatchLedger }, id: string, ask: boolean, task?: LambdaFunction): StateMachine {
  const done = new Pass(stack, `${id}Done`);
  const approval = new SqsSendMessage(stack, `${id}Ask`, {
    queue: stack.ledger.orchestratorQueue,
    integrationPattern: IntegrationPattern.WAIT_FOR_TASK_TOKEN,
    messageBody: TaskInput.fromObject({ dispatchId: JsonPath.stringAt('$.dispatchId'), runId: JsonPath.executionId, taskToken: JsonPath.taskToken }),
  });
  const steps = ask ? approval.next(done) : done;
  const machine = new StateMachine(stack, id, { definitionBody: DefinitionBody.fromChainable(task ? new LambdaInvoke(stack, `${id}Work`, { lambdaFunction: task }).next(steps) : steps) });
  for (const finding of FIXTURE_FINDINGS) Validations.of(machine).acknowledge({ id: finding, reason: "test fixture: the user's own state machine" });
  if (task) Validations.of(machine).acknowledge({ id: `AwsSolutions-IAM5[Resource::<${stack.getLogicalId(task.node.defaultChild as CfnElement)}.Arn>:*]`, reason: "test fixture: the user's flow invokes its task function's versions" });
  return machine;
}

beforeAll(() => {
  synth = synthesizeLedger({
    extend: (stack) => {
      reviewTask = durableFunctionFixture(stack, 'ReviewTask', { durable: false });
      flow = flowIn(stack, 'ReviewFlow', true, reviewTask);
      stack.ledger.addStateMachineTarget('review-flow', flow);
      // As the READMEs show: the flow's task function reports as the target. Regression: its identity grant on
      // the API made a dependency cycle (API → registry → state machine → its policy → task function → its
      // policy → API) that synth let through and CloudFormation refuses.
      stack.ledger.addTargetCaller(reviewTask.role as Role, 'review-flow');
      audit = flowIn(stack, 'AuditFlow', false);
      stack.ledger.addStateMachineTarget('audit-flow', audit, { maxConcurrentRuns: 3 });
      stack.ledger.addStateMachineTarget('imported-flow', StateMachine.fromStateMachineArn(stack, 'ImportedFlow', IMPORTED_ARN));
    },
  });
  resources = synth.template.toJSON().Resources as Record<string, Resource>;
});
afterAll(() => synth.dispose());

/** Every statement of the policies attached to a role. */
const statementsOf = (role: string): Statement[] =>
  Object.values(resources)
    .filter((resource) => resource.Type === 'AWS::IAM::Policy' && JSON.stringify(resource.Properties?.Roles).includes(`"${role}"`))
    .flatMap((policy) => (policy.Properties?.PolicyDocument as { Statement: Statement[] }).Statement);
const roleOf = (name: 'intake' | 'api' | 'monitor' | 'publisher' | 'retention' | 'failures' | 'orchestrators'): string => logicalId(synth.stack, synth.stack.ledger.functions[name].function.role as never);
const statesGrants = (role: string) =>
  statementsOf(role)
    .filter((statement) => [statement.Action].flat().some((action) => action.startsWith('states:')))
    .map((statement) => ({ actions: [statement.Action].flat().sort(), resource: statement.Resource }));

/** `arn:…:execution:NAME:*` of an in-stack state machine: its name split out of its ARN. */
const executionsOf = (machine: StateMachine) => ({
  'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':states:eu-west-1:111122223333:execution:', { 'Fn::Select': [6, { 'Fn::Split': [':', { Ref: logicalId(synth.stack, machine) }] }] }, ':*']],
});
const START = ['states:StartExecution'];
const ON_EXECUTIONS = ['states:DescribeExecution', 'states:GetExecutionHistory', 'states:StopExecution'];
const TASK_RESPONSES = ['states:SendTaskFailure', 'states:SendTaskSuccess'];

describe('addStateMachineTarget: grants', () => {
  it('lets intake, api and monitor start each state machine, describe, read and stop its executions and answer its task tokens — and nothing else of Step Functions', () => {
    for (const name of ['intake', 'api', 'monitor'] as const) {
      const expected = [flow, audit].flatMap((machine) => [
        { actions: START, resource: { Ref: logicalId(synth.stack, machine) } },
        { actions: ON_EXECUTIONS, resource: executionsOf(machine) },
        { actions: TASK_RESPONSES, resource: { Ref: logicalId(synth.stack, machine) } },
      ]);
      const imported = [
        { actions: START, resource: IMPORTED_ARN },
        { actions: ON_EXECUTIONS, resource: { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, ':states:eu-west-1:111122223333:execution:imported-flow:*']] } },
        { actions: TASK_RESPONSES, resource: IMPORTED_ARN },
      ];
      expect(statesGrants(roleOf(name)), name).toEqual(expect.arrayContaining([...expected, ...imported]));
      expect(statesGrants(roleOf(name)), name).toHaveLength(expected.length + imported.length);
    }
  });

  it('lets the orchestrators function only look executions up (describe and history), and the other functions nothing of Step Functions', () => {
    expect(statesGrants(roleOf('orchestrators'))).toEqual(
      expect.arrayContaining([flow, audit].map((machine) => ({ actions: ['states:DescribeExecution', 'states:GetExecutionHistory'], resource: executionsOf(machine) }))),
    );
    expect(statesGrants(roleOf('orchestrators'))).toHaveLength(3);
    for (const name of ['publisher', 'retention', 'failures'] as const) expect(statesGrants(roleOf(name)), name).toEqual([]);
  });

  it('grants no Step Functions action on every resource, and no wildcard action, anywhere in the stack', () => {
    const all = Object.values(resources)
      .filter((resource) => resource.Type === 'AWS::IAM::Policy')
      .flatMap((policy) => (policy.Properties?.PolicyDocument as { Statement: Statement[] }).Statement);
    const states = all.filter((statement) => [statement.Action].flat().some((action) => action.startsWith('states:')));
    expect(states.length).toBeGreaterThan(0);
    for (const statement of states) {
      expect([statement.Action].flat().filter((action) => action.includes('*'))).toEqual([]);
      expect([statement.Resource].flat()).not.toContain('*');
    }
  });

  it("lets each state machine's own role send to the orchestrator queue (its approval requests), through the queue's grant", () => {
    const queue = { 'Fn::GetAtt': [logicalId(synth.stack, synth.stack.ledger.orchestratorQueue), 'Arn'] };
    const granted = { Effect: 'Allow', Action: ['sqs:SendMessage', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl'], Resource: queue };
    // The audit flow has no SqsSendMessage task of its own: the ledger's grant is its only one on the queue.
    expect(statementsOf(logicalId(synth.stack, audit.role as never)).filter((statement) => JSON.stringify(statement).includes('sqs:'))).toEqual([granted]);
    expect(statementsOf(logicalId(synth.stack, flow.role as never))).toContainEqual(granted);
  });
});

describe('addStateMachineTarget: the orchestrator queue and the status rule', () => {
  it('reads one encrypted, TLS-only orchestrator queue with the orchestrators function (partial batch failures), dead-lettering after 5 receives into an alarmed DLQ', () => {
    const { queue, deadLetterQueue, deadLetterAlarm } = synth.stack.ledger.stateMachineTargets;
    if (!deadLetterQueue || !deadLetterAlarm) throw new Error('the orchestrator queue has no DLQ or no alarm');
    const queueId = logicalId(synth.stack, queue);
    const dlqId = logicalId(synth.stack, deadLetterQueue);
    expect(resources[queueId]?.Properties).toMatchObject({ SqsManagedSseEnabled: true, RedrivePolicy: { maxReceiveCount: 5, deadLetterTargetArn: { 'Fn::GetAtt': [dlqId, 'Arn'] } } });
    expect(resources[dlqId]?.Properties).toMatchObject({ SqsManagedSseEnabled: true });
    for (const id of [queueId, dlqId]) {
      synth.template.hasResourceProperties('AWS::SQS::QueuePolicy', {
        Queues: Match.arrayWith([{ Ref: id }]),
        PolicyDocument: { Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Action: 'sqs:*', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]) },
      });
    }
    synth.template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      EventSourceArn: { 'Fn::GetAtt': [queueId, 'Arn'] },
      FunctionName: { Ref: logicalId(synth.stack, synth.stack.ledger.functions.orchestrators.function) },
      BatchSize: 10,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
    });
    expect(resources[logicalId(synth.stack, deadLetterAlarm)]?.Properties).toMatchObject({
      Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [dlqId, 'QueueName'] } }],
      AlarmActions: [{ Ref: logicalId(synth.stack, synth.stack.ledger.alarms.topic as never) }],
      OKActions: [{ Ref: logicalId(synth.stack, synth.stack.ledger.alarms.topic as never) }],
    });
    // One queue for every state machine: the dispatch queue, the failures queue, this one, and their DLQs.
    expect(Object.values(resources).filter((resource) => resource.Type === 'AWS::SQS::Queue')).toHaveLength(6);
  });

  it('has one rule on the default bus, for the status changes of exactly the registered state machines, into the queue (failed deliveries to the DLQ)', () => {
    const rules = Object.values(synth.template.findResources('AWS::Events::Rule', { Properties: { EventPattern: { source: ['aws.states'] } } }));
    expect(rules).toHaveLength(1);
    const rule = rules[0]?.Properties as Record<string, unknown>;
    expect(rule.EventBusName).toBeUndefined();
    expect(rule.EventPattern).toEqual({
      source: ['aws.states'],
      'detail-type': ['Step Functions Execution Status Change'],
      detail: { stateMachineArn: [{ Ref: logicalId(synth.stack, flow) }, { Ref: logicalId(synth.stack, audit) }, IMPORTED_ARN] },
    });
    const { queue, deadLetterQueue } = synth.stack.ledger.stateMachineTargets;
    if (!deadLetterQueue) throw new Error('the orchestrator queue has no DLQ');
    expect(rule.Targets).toEqual([
      expect.objectContaining({ Arn: { 'Fn::GetAtt': [logicalId(synth.stack, queue), 'Arn'] }, DeadLetterConfig: { Arn: { 'Fn::GetAtt': [logicalId(synth.stack, deadLetterQueue), 'Arn'] } } }),
    ]);
  });

  it("matches AWS's sample status change of a registered state machine, and no other state machine's or detail-type's", () => {
    const rule = Object.values(synth.template.findResources('AWS::Events::Rule', { Properties: { EventPattern: { source: ['aws.states'] } } }))[0]?.Properties as { EventPattern: unknown };
    // The rule as deployed, the review flow's ARN being the sample's.
    const deployed = JSON.parse(JSON.stringify(rule.EventPattern).replace(JSON.stringify({ Ref: logicalId(synth.stack, flow) }), JSON.stringify(SAMPLE.detail.stateMachineArn))) as unknown;
    expect(matches(deployed, SAMPLE)).toBe(true);
    expect(matches(rule.EventPattern, SAMPLE)).toBe(false);
    const other = { ...SAMPLE, detail: { ...SAMPLE.detail, stateMachineArn: 'arn:aws:states:us-east-1:012345678912:stateMachine:another' } };
    expect(matches(deployed, other)).toBe(false);
    expect(matches(deployed, { ...SAMPLE, 'detail-type': 'AWS API Call via CloudTrail' })).toBe(false);
    expect(matches(deployed, { ...SAMPLE, source: 'aws.lambda' })).toBe(false);
  });

  it('exports the pattern the rule is made of, refusing an empty list of state machines', () => {
    expect(executionStatusPattern([SAMPLE.detail.stateMachineArn])).toEqual({
      source: ['aws.states'],
      detailType: ['Step Functions Execution Status Change'],
      detail: { stateMachineArn: [SAMPLE.detail.stateMachineArn] },
    });
    expect(() => executionStatusPattern([])).toThrow(/at least one state machine/);
  });
});

describe('addStateMachineTarget: registry', () => {
  it("reaches every function's registry as kind stepfunctions with the state machine's ARN, its role's unique id and its limit", () => {
    for (const name of ['intake', 'api', 'monitor', 'failures', 'orchestrators'] as const) {
      const registry = parseStaticRegistry(registryOf(synth, synth.stack.ledger.functions[name].function));
      expect(registry.targets.get('review-flow'), name).toEqual({
        name: 'review-flow',
        kind: 'stepfunctions',
        stateMachineArn: `<Ref ${logicalId(synth.stack, flow)}>`,
        roleId: `<GetAtt ${logicalId(synth.stack, flow.role as never)}.RoleId>`,
      });
      expect(registry.targets.get('audit-flow'), name).toMatchObject({ kind: 'stepfunctions', roleId: `<GetAtt ${logicalId(synth.stack, audit.role as never)}.RoleId>`, maxConcurrentRuns: 3 });
      // Imported: its role is not this app's, so no unique id (its approval requests are refused).
      expect(registry.targets.get('imported-flow'), name).toEqual({ name: 'imported-flow', kind: 'stepfunctions', stateMachineArn: IMPORTED_ARN });
    }
  });

  it('adds no cdk-nag finding of the ledger\'s own, and the template passes cfn-lint', () => {
    expect(synth.nagFindings).toEqual([]);
    const { status, output } = cfnLint(synth.templateFile);
    expect(output).toBe('');
    expect(status).toBe(0);
  });
});

describe('addStateMachineTarget refused at synth time', () => {
  const ledgerIn = () => {
    const stack = new Stack(new App(), 'S');
    return { stack, ledger: new DispatchLedger(stack, 'Ledger', {}) };
  };

  it('refuses an Express state machine, naming the target', () => {
    const { stack, ledger } = ledgerIn();
    const fast = new StateMachine(stack, 'Fast', { stateMachineType: StateMachineType.EXPRESS, definitionBody: DefinitionBody.fromChainable(new Pass(stack, 'P')) });
    expect(() => ledger.addStateMachineTarget('fast-flow', fast)).toThrow(/target "fast-flow": an Express state machine cannot be a target/);
    const standard = new StateMachine(stack, 'Slow', { definitionBody: DefinitionBody.fromChainable(new Pass(stack, 'Q')) });
    expect(() => ledger.addStateMachineTarget('slow-flow', standard)).not.toThrow();
  });

  it.each([0, 10_001, -1, 2.5, Number.NaN])('refuses maxConcurrentRuns %s', (maxConcurrentRuns) => {
    const { stack, ledger } = ledgerIn();
    const machine = new StateMachine(stack, 'Flow', { definitionBody: DefinitionBody.fromChainable(new Pass(stack, 'P')) });
    expect(() => ledger.addStateMachineTarget('capped-flow', machine, { maxConcurrentRuns })).toThrow(/target "capped-flow": maxConcurrentRuns must be a whole number from 1 to 10,000/);
  });

  it('takes maxConcurrentRuns 1 and 10,000, and refuses a name registered twice', () => {
    const { stack, ledger } = ledgerIn();
    const machine = new StateMachine(stack, 'Flow', { definitionBody: DefinitionBody.fromChainable(new Pass(stack, 'P')) });
    expect(() => ledger.addStateMachineTarget('one-flow', machine, { maxConcurrentRuns: 1 })).not.toThrow();
    expect(() => ledger.addStateMachineTarget('many-flow', machine, { maxConcurrentRuns: 10_000 })).not.toThrow();
    expect(() => ledger.addStateMachineTarget('one-flow', machine)).toThrow(/registered twice/);
  });
});

/**
 * EventBridge's matching for the patterns used here: every field of the pattern is in the event, an
 * array of values matches a value equal to one of them, an object matches the event's object field by field.
 */
function matches(pattern: unknown, event: unknown): boolean {
  if (Array.isArray(pattern)) return pattern.some((allowed) => allowed === event);
  if (typeof pattern !== 'object' || pattern === null || typeof event !== 'object' || event === null) return false;
  return Object.entries(pattern).every(([key, value]) => key in event && matches(value, (event as Record<string, unknown>)[key]));
}
