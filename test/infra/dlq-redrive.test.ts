import type { Alarm } from 'aws-cdk-lib/aws-cloudwatch';
import type { Queue } from 'aws-cdk-lib/aws-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PRINCIPAL_ITEM } from '../../shared/adapters/item-kinds.js';
import { logicalId, synthesizeLedger, type Synthesized } from './synth.js';

/**
 * Every DLQ the ledger alarms on can be moved back as its alarm says: the alarm names the command
 * (`ledger dlq redrive`, with the queues' URLs where `--stack` does not find them), and an operator
 * (`addOperator`) may read the DLQ and send to the queue it feeds. Regression: only the dispatch
 * queue's DLQ was the operator's; the failures and orchestrator DLQs' alarms said "move the messages
 * back" to someone who could not, and the functions refused what an operator moved (CONTRACT §8 v2's
 * `LedgerRedrivenFor` was read by the intake alone).
 */

type Statement = { readonly Effect: string; readonly Action: string | string[]; readonly Resource: unknown };
type Resource = { readonly Type: string; readonly Properties?: Record<string, unknown> };

let synth: Synthesized;
beforeAll(() => {
  synth = synthesizeLedger();
});
afterAll(() => synth.dispose());

/** The DLQs, each with the queue it feeds and its alarm. */
const dlqs = (): Array<{ readonly name: string; readonly deadLetterQueue: Queue; readonly queue: Queue; readonly alarm: Alarm | undefined }> => {
  const { ledger } = synth.stack;
  return [
    { name: 'dispatch', deadLetterQueue: ledger.intake.deadLetterQueue, queue: ledger.intake.queue, alarm: ledger.alarms.alarms.DeadLetterQueue },
    { name: 'failures', deadLetterQueue: ledger.lambdaFailures.deadLetterQueue, queue: ledger.lambdaFailures.queue, alarm: ledger.alarms.alarms.LambdaFailuresDeadLetterQueue },
    { name: 'orchestrators', deadLetterQueue: ledger.stateMachineTargets.deadLetterQueue as Queue, queue: ledger.stateMachineTargets.queue, alarm: ledger.stateMachineTargets.deadLetterAlarm },
  ];
};

/** The operator role's statements, each as its actions and its resources (as JSON). */
function operatorGrants(): Array<{ readonly actions: string[]; readonly resources: string }> {
  const resources = synth.template.toJSON().Resources as Record<string, Resource>;
  const role = logicalId(synth.stack, synth.stack.node.findChild('OnCallRole') as never);
  return Object.values(resources)
    .filter((resource) => resource.Type === 'AWS::IAM::Policy' && JSON.stringify(resource.Properties?.Roles).includes(`"${role}"`))
    .flatMap((policy) => (policy.Properties?.PolicyDocument as { Statement: Statement[] }).Statement)
    .filter((statement) => statement.Effect === 'Allow')
    .map((statement) => ({ actions: [statement.Action].flat(), resources: JSON.stringify(statement.Resource) }));
}

const granted = (grants: ReturnType<typeof operatorGrants>, action: string, resource: unknown): boolean =>
  grants.some((grant) => grant.actions.includes(action) && grant.resources.includes(JSON.stringify(resource)));

describe('every alarmed DLQ can be moved back by an operator, as its alarm says', () => {
  it('lets the operator read and delete from each DLQ and send to the queue it feeds', () => {
    const grants = operatorGrants();
    for (const { name, deadLetterQueue, queue } of dlqs()) {
      const dlq = { 'Fn::GetAtt': [logicalId(synth.stack, deadLetterQueue), 'Arn'] };
      for (const action of ['sqs:ReceiveMessage', 'sqs:DeleteMessage']) expect(granted(grants, action, dlq), `${name}: ${action} on its DLQ`).toBe(true);
      expect(granted(grants, 'sqs:SendMessage', { 'Fn::GetAtt': [logicalId(synth.stack, queue), 'Arn'] }), `${name}: send to its queue`).toBe(true);
    }
  });

  it("lets the operator read the table's principal items, and no other item (the redrive asks who is an operator)", () => {
    const resources = synth.template.toJSON().Resources as Record<string, Resource>;
    const role = logicalId(synth.stack, synth.stack.node.findChild('OnCallRole') as never);
    const table = { 'Fn::GetAtt': [logicalId(synth.stack, synth.stack.ledger.storage.table), 'Arn'] };
    const statements = Object.values(resources)
      .filter((resource) => resource.Type === 'AWS::IAM::Policy' && JSON.stringify(resource.Properties?.Roles).includes(`"${role}"`))
      .flatMap((policy) => (policy.Properties?.PolicyDocument as { Statement: Array<Statement & { Condition?: unknown }> }).Statement)
      .filter((statement) => [statement.Action].flat().some((action) => action.startsWith('dynamodb:')));
    expect(statements).toEqual([{ Effect: 'Allow', Action: 'dynamodb:GetItem', Resource: table, Condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [`${PRINCIPAL_ITEM.pk}*`] } } }]);
  });

  it("names the command in each alarm, with the queues' URLs where --stack does not find them", () => {
    const resources = synth.template.toJSON().Resources as Record<string, Resource>;
    for (const { name, deadLetterQueue, queue, alarm } of dlqs()) {
      expect(alarm, name).toBeDefined();
      const description = JSON.stringify(resources[logicalId(synth.stack, alarm as never)]?.Properties?.AlarmDescription);
      expect(description, name).toContain('ledger dlq redrive');
      // The region the CLI signs for (the stack's, here a literal).
      expect(description, name).toContain('--region eu-west-1');
      // A bare `ledger dlq redrive` acts on the local platform (a review): the dispatch queue's names the stack.
      if (name === 'dispatch') {
        expect(description, name).toContain('--stack DispatchLedger');
        continue;
      }
      // The queue URL is the queue's Ref; the table tells an operator's earlier redrive apart.
      expect(description, name).toContain(JSON.stringify({ Ref: logicalId(synth.stack, deadLetterQueue) }));
      expect(description, name).toContain(JSON.stringify({ Ref: logicalId(synth.stack, queue) }));
      expect(description, name).toContain(`--table ",${JSON.stringify({ Ref: logicalId(synth.stack, synth.stack.ledger.storage.table) })}`);
    }
  });
});
