import { Duration, Validations } from 'aws-cdk-lib';
import { Code, Function as LambdaFunction, Runtime } from 'aws-cdk-lib/aws-lambda';
import { DefinitionBody, Pass, StateMachine } from 'aws-cdk-lib/aws-stepfunctions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LEDGER_FUNCTIONS, type LedgerFunctionName } from '../../infra/bundling.js';
import { codeCallsOf } from './code-calls.js';
import { durableFunctionFixture, logicalId, synthesizeLedger, type Synthesized } from './synth.js';

type Statement = { readonly Effect: string; readonly Action: string | string[]; readonly Resource: unknown };
type Resource = { readonly Type: string; readonly Properties?: Record<string, unknown> };

let synth: Synthesized;
let grants: Record<LedgerFunctionName, Array<{ readonly actions: string[]; readonly resources: string }>>;

/** Every statement of every policy attached to the function's role (its only permissions: no managed policies). */
function grantsOf(name: LedgerFunctionName): Array<{ actions: string[]; resources: string }> {
  const resources = synth.template.toJSON().Resources as Record<string, Resource>;
  const role = logicalId(synth.stack, synth.stack.ledger.functions[name].function.role as never);
  expect(resources[role]?.Properties?.ManagedPolicyArns).toBeUndefined();
  return Object.values(resources)
    .filter((resource) => resource.Type === 'AWS::IAM::Policy' && JSON.stringify(resource.Properties?.Roles).includes(`"${role}"`))
    .flatMap((policy) => (policy.Properties?.PolicyDocument as { Statement: Statement[] }).Statement)
    .map((statement) => {
      expect(statement.Effect).toBe('Allow');
      return { actions: [statement.Action].flat(), resources: JSON.stringify(statement.Resource) };
    });
}

const actionsOf = (name: LedgerFunctionName): string[] => [...new Set(grants[name].flatMap((grant) => grant.actions))].sort();
const resourcesFor = (name: LedgerFunctionName, prefix: string): string[] => grants[name].filter((grant) => grant.actions.some((action) => action.startsWith(prefix))).map((grant) => grant.resources);

beforeAll(() => {
  synth = synthesizeLedger();
  grants = { intake: grantsOf('intake'), api: grantsOf('api'), monitor: grantsOf('monitor'), publisher: grantsOf('publisher'), retention: grantsOf('retention'), failures: grantsOf('failures'), orchestrators: grantsOf('orchestrators') };
});
afterAll(() => synth.dispose());

const LOGS = ['logs:CreateLogStream', 'logs:PutLogEvents'];
const TARGET_SECRETS = ['secretsmanager:DescribeSecret', 'secretsmanager:GetSecretValue'];

describe('least privilege: each function may do exactly what its code does', () => {
  it("failures: take Lambda's on-failure records, read and write the ledger table's items by key, count who waits on the wait index and nudge the monitor — nothing else", () => {
    // UpdateItem: a failure gives its run's slot back, the slot counter's update committed with the state (CONTRACT §11).
    // Query: the admission nudge counts who waits for that target first (regression: not granted, so in AWS
    // every nudge was an AccessDenied the store logged and swallowed, and admission waited for the next tick).
    expect(actionsOf('failures')).toEqual(
      [...LOGS, 'sqs:ChangeMessageVisibility', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl', 'sqs:ReceiveMessage', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:Query', 'lambda:InvokeFunction'].sort(),
    );
    const table = logicalId(synth.stack, synth.stack.ledger.storage.table);
    expect(resourcesFor('failures', 'dynamodb:Query')).toEqual([JSON.stringify({ 'Fn::Join': ['', [{ 'Fn::GetAtt': [table, 'Arn'] }, '/index/waiting']] })]);
    expect(grants.failures.filter((grant) => grant.actions.some((action) => action.startsWith('dynamodb:') && action !== 'dynamodb:Query')).map((grant) => grant.resources)).toEqual([JSON.stringify({ 'Fn::GetAtt': [table, 'Arn'] })]);
  });

  it("orchestrators: take the orchestrator queue's messages, read and write items by key, count who waits, nudge the monitor, keep a large output's body — no Step Functions call without a state machine", () => {
    // With no state machine registered (this stack) it is granted no states: action; addStateMachineTarget grants describe and history on its executions (state-machine-target.test.ts).
    expect(actionsOf('orchestrators')).toEqual(
      [...LOGS, 'sqs:ChangeMessageVisibility', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl', 'sqs:ReceiveMessage', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:Query', 'lambda:InvokeFunction', 's3:PutObject'].sort(),
    );
    const table = logicalId(synth.stack, synth.stack.ledger.storage.table);
    expect(resourcesFor('orchestrators', 'dynamodb:Query')).toEqual([JSON.stringify([{ 'Fn::GetAtt': [table, 'Arn'] }, { 'Fn::Join': ['', [{ 'Fn::GetAtt': [table, 'Arn'] }, '/index/waiting']] }])]);
  });

  it('api, failures and orchestrators may invoke exactly the monitor (the admission nudge, CONTRACT §11): not its versions or aliases, and no other function may', () => {
    const monitor = synth.template.toJSON().Resources[logicalId(synth.stack, synth.stack.ledger.functions.monitor.function)] as { Properties: { FunctionName: string } };
    const exactly = JSON.stringify({ 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, `:lambda:eu-west-1:111122223333:function:${monitor.Properties.FunctionName}`]] });
    for (const name of ['api', 'failures', 'orchestrators'] as const) expect(resourcesFor(name, 'lambda:'), name).toEqual([exactly]);
    for (const name of ['intake', 'monitor', 'publisher', 'retention'] as const) expect(actionsOf(name), name).not.toContain('lambda:InvokeFunction');
  });

  it('intake: take messages, write and read items by key, spill and read bodies, read target secrets', () => {
    expect(actionsOf('intake')).toEqual(
      [
        ...LOGS,
        'sqs:ChangeMessageVisibility', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl', 'sqs:ReceiveMessage',
        'dynamodb:BatchGetItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:Query',
        's3:GetObject', 's3:PutObject',
        ...TARGET_SECRETS,
      ].sort(),
    );
    // A limited target (CONTRACT §11): its slot counters in one batch, and whether others wait first —
    // the wait index, and nothing else of the table is queried.
    expect(resourcesFor('intake', 'dynamodb:Query')).toEqual([JSON.stringify({ 'Fn::Join': ['', [{ 'Fn::GetAtt': [logicalId(synth.stack, synth.stack.ledger.storage.table), 'Arn'] }, '/index/waiting']] })]);
  });

  it('api: items by key and batch, queries on the origin, feed, inbox and wait indexes, evidence uploads and checks, target secrets, the monitor nudge', () => {
    expect(actionsOf('api')).toEqual(
      [...LOGS, 'dynamodb:BatchGetItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:Query', 'lambda:InvokeFunction', 's3:GetObject', 's3:ListBucket', 's3:PutObject', ...TARGET_SECRETS].sort(),
    );
    const queried = resourcesFor('api', 'dynamodb:Query').join();
    expect(queried).toContain('/index/byOrigin');
    expect(queried).toContain('/index/feed');
    // The results inbox (CONTRACT §10): claims and the list read the inbox index (regression: it was not granted).
    expect(queried).toContain('/index/inbox');
    // A redispatch to a limited target and `GET /attention?kind=at_capacity` count who waits (CONTRACT §11).
    expect(queried).toContain('/index/waiting');
    // The operator's list of every origin's dispatches (CONTRACT §2 v2 `GET /dispatches`).
    expect(queried).toContain('/index/recent');
    expect(queried).not.toContain('/index/due');
  });

  it('monitor: items by key, the due index, evidence checks (ListBucket so a missing file is a 404, not a 403; PutObject only to store a file uploaded before the upgrade under its hash), target secrets', () => {
    expect(actionsOf('monitor')).toEqual(
      [...LOGS, 'dynamodb:BatchGetItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:Query', 's3:GetObject', 's3:ListBucket', 's3:PutObject', ...TARGET_SECRETS].sort(),
    );
    const queried = resourcesFor('monitor', 'dynamodb:Query').join();
    expect(queried).toContain('/index/due');
    // Admission (CONTRACT §11): the next waiting dispatch from the wait index, the slot counters in one batch.
    expect(queried).toContain('/index/waiting');
    expect(queried).not.toContain('/index/byOrigin');
  });

  it('publisher: read the table stream, put events on the ledger bus, park failed batches, add to the counter items alone — no other table data, no evidence', () => {
    expect(actionsOf('publisher')).toEqual(
      [...LOGS, 'dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator', 'dynamodb:ListStreams', 'dynamodb:UpdateItem', 'events:PutEvents', 's3:ListBucket', 's3:PutObject'].sort(),
    );
    // `GET /counts` (CONTRACT §2 v2): UpdateItem on the table, only on items whose partition key is a counter's.
    const resources = synth.template.toJSON().Resources as Record<string, Resource>;
    const role = logicalId(synth.stack, synth.stack.ledger.functions.publisher.function.role as never);
    const updates = Object.values(resources)
      .filter((resource) => resource.Type === 'AWS::IAM::Policy' && JSON.stringify(resource.Properties?.Roles).includes(`"${role}"`))
      .flatMap((policy) => (policy.Properties?.PolicyDocument as { Statement: Array<Statement & { Condition?: unknown }> }).Statement)
      .filter((statement) => [statement.Action].flat().includes('dynamodb:UpdateItem'));
    expect(updates).toEqual([
      {
        Effect: 'Allow',
        Action: 'dynamodb:UpdateItem',
        Resource: { 'Fn::GetAtt': [logicalId(synth.stack, synth.stack.ledger.storage.table), 'Arn'] },
        Condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['COUNTS#*'] } },
      },
    ]);
    const failureBucket = logicalId(synth.stack, synth.stack.ledger.publisher.failureBucket);
    for (const resources of resourcesFor('publisher', 's3:')) expect(resources).toContain(failureBucket);
    expect(resourcesFor('publisher', 'events:')).toEqual([JSON.stringify({ 'Fn::GetAtt': [logicalId(synth.stack, synth.stack.ledger.publisher.bus), 'Arn'] })]);
  });

  it('nothing forgotten: retention reads the table stream, looks two items up by key (and puts back an anchor whose dispatch lives), lists the evidence bucket and deletes its objects, parks failed batches — no reads of objects', () => {
    expect(actionsOf('retention')).toEqual(
      [...LOGS, 'dynamodb:DescribeStream', 'dynamodb:GetItem', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator', 'dynamodb:ListStreams', 'dynamodb:PutItem', 's3:DeleteObject', 's3:ListBucket', 's3:PutObject'].sort(),
    );
    const evidence = logicalId(synth.stack, synth.stack.ledger.storage.evidenceBucket);
    const failures = logicalId(synth.stack, synth.stack.ledger.publisher.failureBucket);
    const table = logicalId(synth.stack, synth.stack.ledger.storage.table);
    const on = (action: string) => grants.retention.filter((grant) => grant.actions.includes(action)).map((grant) => grant.resources);
    expect(on('s3:DeleteObject')).toEqual([JSON.stringify({ 'Fn::Join': ['', [{ 'Fn::GetAtt': [evidence, 'Arn'] }, '/*']] })]);
    expect(on('s3:PutObject')).toEqual([JSON.stringify({ 'Fn::Join': ['', [{ 'Fn::GetAtt': [failures, 'Arn'] }, '/*']] })]);
    expect(on('s3:ListBucket').sort()).toEqual([JSON.stringify({ 'Fn::GetAtt': [evidence, 'Arn'] }), JSON.stringify({ 'Fn::GetAtt': [failures, 'Arn'] })].sort());
    for (const resources of on('dynamodb:GetRecords')) expect(resources).toEqual(JSON.stringify({ 'Fn::GetAtt': [table, 'StreamArn'] }));
    // The table itself, not an index: items by key only.
    expect(on('dynamodb:PutItem')).toEqual([JSON.stringify({ 'Fn::GetAtt': [table, 'Arn'] })]);
  });

  it('no function can delete or scan items, change the table, or delete objects — but retention, which may delete objects only', () => {
    for (const name of ['intake', 'api', 'monitor', 'publisher', 'retention', 'failures'] as const) {
      for (const action of actionsOf(name)) {
        expect(action).not.toMatch(/\*|^dynamodb:(Delete|Scan|BatchWrite|CreateTable|UpdateTable|TransactWrite)|^s3:Delete(?!Object$)|^sqs:(Delete|Purge)Queue|^sqs:SendMessage/);
      }
    }
    const deleters = (['intake', 'api', 'monitor', 'publisher', 'retention'] as const).filter((name) => actionsOf(name).some((action) => action.startsWith('s3:Delete')));
    expect(deleters).toEqual(['retention']);
  });

  it('table actions name only the ledger table and its indexes; object actions only the ledger\'s own buckets', () => {
    const table = logicalId(synth.stack, synth.stack.ledger.storage.table);
    const evidence = logicalId(synth.stack, synth.stack.ledger.storage.evidenceBucket);
    for (const name of ['intake', 'api', 'monitor'] as const) {
      for (const resources of resourcesFor(name, 'dynamodb:')) expect(resources).toContain(table);
      for (const resources of resourcesFor(name, 's3:')) expect(resources).toContain(evidence);
      for (const resources of resourcesFor(name, 'secretsmanager:')) expect(resources).toMatch(/dispatch-ledger\/DispatchLedger\/targets\/\*|ResearchAgentAuth/);
    }
  });

  it('lets an origin send dispatches and call the API, and nothing else', () => {
    const resources = synth.template.toJSON().Resources as Record<string, Resource>;
    const planner = logicalId(synth.stack, synth.stack.node.findChild('PlannerRole') as never);
    const actions = Object.values(resources)
      .filter((resource) => resource.Type === 'AWS::IAM::Policy' && JSON.stringify(resource.Properties?.Roles).includes(`"${planner}"`))
      .flatMap((policy) => (policy.Properties?.PolicyDocument as { Statement: Statement[] }).Statement.flatMap((statement) => [statement.Action].flat()));
    expect([...new Set(actions)].sort()).toEqual(['lambda:InvokeFunction', 'lambda:InvokeFunctionUrl', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl', 'sqs:SendMessage'].sort());
  });

  it('grantOrigin gives a client origin the same, and DescribeStacks on this stack alone (createLedgerClient({ stack }))', () => {
    const resources = synth.template.toJSON().Resources as Record<string, Resource>;
    const lead = logicalId(synth.stack, synth.stack.node.findChild('LeadAgentRole') as never);
    const statements = Object.values(resources)
      .filter((resource) => resource.Type === 'AWS::IAM::Policy' && JSON.stringify(resource.Properties?.Roles).includes(`"${lead}"`))
      .flatMap((policy) => (policy.Properties?.PolicyDocument as { Statement: Statement[] }).Statement);
    const actions = statements.flatMap((statement) => [statement.Action].flat());
    expect([...new Set(actions)].sort()).toEqual(['cloudformation:DescribeStacks', 'lambda:InvokeFunction', 'lambda:InvokeFunctionUrl', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl', 'sqs:SendMessage'].sort());
    const describe = statements.filter((statement) => [statement.Action].flat().includes('cloudformation:DescribeStacks'));
    expect(describe.map((statement) => statement.Resource)).toEqual([{ Ref: 'AWS::StackId' }]);
    const registry = JSON.stringify(synth.template.toJSON()).includes('lead-agent');
    expect(registry).toBe(true);
  });
});

describe('least privilege: each role covers what its code calls (read from the source, code-calls.ts)', () => {
  let full: Synthesized;
  beforeAll(() => {
    // With a lambda target too: its invoke is granted per target (addLambdaTarget), and the adapter that sends it is in the bundles.
    // So are the durable-execution calls of a durable target (GetDurableExecution, …, code-calls.ts ACTION_OF).
    full = synthesizeLedger({
      extend: (stack) => {
        const worker = new LambdaFunction(stack, 'ReviewerWorker', { runtime: Runtime.NODEJS_22_X, handler: 'index.handler', code: Code.fromInline('export const handler = async () => ({});'), timeout: Duration.minutes(2) });
        for (const id of ['AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]', 'Serverless-LambdaTracing', 'Serverless-LambdaDefaultMemorySize', 'Serverless-LambdaLatestVersion']) {
          Validations.of(worker).acknowledge({ id, reason: "test fixture: the user's own worker function" });
        }
        stack.ledger.addLambdaTarget('reviewer', worker, { timeout: Duration.minutes(2) });
        // And a state machine: its calls are granted per state machine (addStateMachineTarget, CONTRACT §17).
        const flow = new StateMachine(stack, 'ReviewFlow', { definitionBody: DefinitionBody.fromChainable(new Pass(stack, 'Done')) });
        for (const id of ['AwsSolutions-SF1', 'AwsSolutions-SF2', 'Serverless-StepFunctionStateMachineXray', 'Serverless-StepFunctionStateMachineAllLogging']) {
          Validations.of(flow).acknowledge({ id, reason: "test fixture: the user's own state machine" });
        }
        stack.ledger.addStateMachineTarget('review-flow', flow);
        // And a durable function, by its version: its calls are granted per function (addDurableFunctionTarget, CONTRACT §17).
        stack.ledger.addDurableFunctionTarget('review-durable', durableFunctionFixture(stack, 'ReviewDurable').currentVersion);
      },
    });
  });
  afterAll(() => full.dispose());

  /** What the role lets the function query: `table`, or index names. */
  function queryableBy(name: LedgerFunctionName): string[] {
    const resources = full.template.toJSON().Resources as Record<string, Resource>;
    const role = logicalId(full.stack, full.stack.ledger.functions[name].function.role as never);
    const table = logicalId(full.stack, full.stack.ledger.storage.table);
    return Object.values(resources)
      .filter((resource) => resource.Type === 'AWS::IAM::Policy' && JSON.stringify(resource.Properties?.Roles).includes(`"${role}"`))
      .flatMap((policy) => (policy.Properties?.PolicyDocument as { Statement: Statement[] }).Statement)
      .filter((statement) => [statement.Action].flat().includes('dynamodb:Query'))
      .flatMap((statement) => [statement.Resource].flat())
      .map((resource) => {
        const text = JSON.stringify(resource);
        if (text === JSON.stringify({ 'Fn::GetAtt': [table, 'Arn'] })) return 'table';
        const index = /\/index\/([A-Za-z0-9_-]+)"/.exec(text);
        if (!index?.[1] || !text.includes(table)) throw new Error(`${name} may query something that is not the ledger table: ${text}`);
        return index[1];
      })
      .sort();
  }
  function actionsGranted(name: LedgerFunctionName): string[] {
    const resources = full.template.toJSON().Resources as Record<string, Resource>;
    const role = logicalId(full.stack, full.stack.ledger.functions[name].function.role as never);
    return Object.values(resources)
      .filter((resource) => resource.Type === 'AWS::IAM::Policy' && JSON.stringify(resource.Properties?.Roles).includes(`"${role}"`))
      .flatMap((policy) => (policy.Properties?.PolicyDocument as { Statement: Statement[] }).Statement.flatMap((statement) => [statement.Action].flat()));
  }

  it.each(LEDGER_FUNCTIONS)("%s may query exactly the table and the indexes its code queries (regression: the failures function's admission nudge counted waiters on the wait index, unqueryable)", (name) => {
    expect(queryableBy(name), name).toEqual([...codeCallsOf(name).queried].sort());
  });

  it.each(LEDGER_FUNCTIONS)('%s may send every AWS command its code sends', (name) => {
    const calls = codeCallsOf(name);
    expect([...calls.unmapped], `${name}: commands code-calls.ts maps to no action`).toEqual([]);
    const granted = new Set(actionsGranted(name));
    expect([...calls.actions].filter((action) => !granted.has(action)), name).toEqual([]);
  });
});
