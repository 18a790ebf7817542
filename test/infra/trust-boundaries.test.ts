import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { targetSecretPrefix } from '@dispatch-ledger/cdk';
import { nagAcknowledgements } from '@dispatch-ledger/cdk';
import { DispatchLedgerStack } from '../../infra/stack.js';
import { logicalId, synthesizeLedger, type Synthesized } from './synth.js';

type Resource = { readonly Type: string; readonly Properties?: Record<string, unknown> };
interface BusStatement {
  readonly Sid?: string;
  readonly Effect: string;
  readonly Principal: unknown;
  readonly Action: string | string[];
  readonly Resource: unknown;
  readonly Condition: Record<string, Record<string, unknown>>;
}

let synth: Synthesized;
let resources: Record<string, Resource>;
const ofType = (type: string): Resource[] => Object.values(resources).filter((resource) => resource.Type === type);
const roleArn = (construct: { readonly node: { readonly defaultChild?: unknown } }) => ({ 'Fn::GetAtt': [logicalId(synth.stack, construct), 'Arn'] });

beforeAll(() => {
  synth = synthesizeLedger({
    extend: (stack) => stack.ledger.addOperator({ principalId: 'AIDAOPSUSER' }),
  });
  resources = synth.template.toJSON().Resources as Record<string, Resource>;
});
afterAll(() => synth.dispose());

/** The bus policy statements that deny PutEvents. */
function denyStatements(): BusStatement[] {
  return ofType('AWS::Events::EventBusPolicy')
    .map((policy) => policy.Properties?.Statement as BusStatement)
    .filter((statement) => statement.Effect === 'Deny');
}

/**
 * What the bus policy decides for a PutEvents of `source` by `principalArn` (or, for a principal given
 * by id, `userId`): the Deny applies when every one of its conditions holds (moto does not evaluate
 * resource policies, so the decision is worked out from the template here).
 */
function refused(statement: BusStatement, call: { readonly source: string; readonly principalArn?: unknown; readonly userId?: string }): boolean {
  const values = (operator: string, key: string): unknown[] => [statement.Condition[operator]?.[key] ?? []].flat();
  const sourceMatches = values('StringEquals', 'events:source').includes(call.source);
  const arnExempt = values('ArnNotEquals', 'aws:PrincipalArn').some((arn) => JSON.stringify(arn) === JSON.stringify(call.principalArn));
  const idExempt = values('StringNotLike', 'aws:userid').some((pattern) => typeof pattern === 'string' && call.userId !== undefined && new RegExp(`^${pattern.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`).test(call.userId));
  return sourceMatches && !arnExempt && !idExempt;
}

describe('trust boundaries: only the ledger publishes ledger events (CONTRACT §3 v2)', () => {
  it('puts a resource policy on the bus denying PutEvents of source dispatch-ledger to anyone but the publisher (and the operators, for stream replay)', () => {
    const bus = logicalId(synth.stack, synth.stack.ledger.publisher.bus);
    const policies = ofType('AWS::Events::EventBusPolicy');
    expect(policies.map((policy) => policy.Properties?.EventBusName)).toEqual([{ Ref: bus }]);
    const [deny] = denyStatements();
    expect(deny).toMatchObject({
      Effect: 'Deny',
      Principal: { AWS: '*' },
      Action: 'events:PutEvents',
      Resource: { 'Fn::GetAtt': [bus, 'Arn'] },
      Condition: { StringEquals: { 'events:source': 'dispatch-ledger' } },
    });
  });

  it('refuses a forged Dispatch Handled from an origin, a target or any other principal, and lets the publisher through', () => {
    const [deny] = denyStatements();
    if (!deny) throw new Error('no deny statement on the bus');
    const { ledger } = synth.stack;
    const publisher = roleArn(ledger.functions.publisher.function.role as never);
    const planner = roleArn(synth.stack.node.findChild('PlannerRole') as never);
    const agent = roleArn(synth.stack.node.findChild('AgentRole') as never);
    const onCall = roleArn(synth.stack.node.findChild('OnCallRole') as never);
    const api = roleArn(ledger.functions.api.function.role as never);

    expect(refused(deny, { source: 'dispatch-ledger', principalArn: publisher, userId: 'AROAPUBLISHER:fn' })).toBe(false);
    for (const forger of [planner, agent, api, 'arn:aws:iam::111122223333:role/Admin']) {
      expect(refused(deny, { source: 'dispatch-ledger', principalArn: forger, userId: 'AROAFORGER:session' }), JSON.stringify(forger)).toBe(true);
    }
    // Other sources on the bus are not the ledger's to police.
    expect(refused(deny, { source: 'my-app', principalArn: planner })).toBe(false);
    // `ledger stream replay` republishes parked batches as the operator.
    expect(refused(deny, { source: 'dispatch-ledger', principalArn: onCall })).toBe(false);
    expect(refused(deny, { source: 'dispatch-ledger', principalArn: 'arn:aws:iam::111122223333:user/ops', userId: 'AIDAOPSUSER' })).toBe(false);
    expect(refused(deny, { source: 'dispatch-ledger', principalArn: 'arn:aws:iam::111122223333:user/x', userId: 'AIDAOPSUSERX' })).toBe(true);
  });

  it('keeps the publisher\'s own grant to put events on the bus', () => {
    const publisherRole = logicalId(synth.stack, synth.stack.ledger.functions.publisher.function.role as never);
    const bus = logicalId(synth.stack, synth.stack.ledger.publisher.bus);
    const statements = ofType('AWS::IAM::Policy')
      .filter((policy) => JSON.stringify(policy.Properties?.Roles).includes(`"${publisherRole}"`))
      .flatMap((policy) => (policy.Properties?.PolicyDocument as { Statement: Array<{ Action: unknown; Resource: unknown }> }).Statement);
    expect(statements).toContainEqual(expect.objectContaining({ Action: 'events:PutEvents', Resource: { 'Fn::GetAtt': [bus, 'Arn'] } }));
  });
});

describe('trust boundaries: target secrets under the stack\'s own prefix (CONTRACT §8 v2)', () => {
  const PREFIX = 'dispatch-ledger/DispatchLedger/targets/';

  it('names the prefix after the stack', () => {
    expect(targetSecretPrefix('DispatchLedger')).toBe(PREFIX);
    expect(synth.stack.ledger.targetSecretPrefix).toBe(PREFIX);
  });

  it('grants each function reads under that prefix (and the deploy-time secrets), never under another stack\'s', () => {
    for (const name of ['intake', 'api', 'monitor'] as const) {
      const role = logicalId(synth.stack, synth.stack.ledger.functions[name].function.role as never);
      const secretGrants = ofType('AWS::IAM::Policy')
        .filter((policy) => JSON.stringify(policy.Properties?.Roles).includes(`"${role}"`))
        .flatMap((policy) => (policy.Properties?.PolicyDocument as { Statement: Array<{ Action: unknown; Resource: unknown }> }).Statement)
        .filter((statement) => JSON.stringify(statement.Action).includes('secretsmanager:'))
        .map((statement) => JSON.stringify(statement.Resource));
      expect(secretGrants.some((resource) => resource.includes(`:secret:${PREFIX}*`)), name).toBe(true);
      for (const resource of secretGrants) expect(resource, name).toMatch(new RegExp(`:secret:${PREFIX.replace(/\//g, '\\/')}\\*|ResearchAgentAuth`));
      expect(secretGrants.join(' ')).not.toContain(':secret:dispatch-ledger/targets/');
    }
  });

  it('tells the functions the prefix, so the secrets adapter can refuse a secretRef outside it', () => {
    for (const name of ['intake', 'api', 'monitor'] as const) {
      const fn = resources[logicalId(synth.stack, synth.stack.ledger.functions[name].function)];
      const variables = (fn?.Properties?.Environment as { Variables: Record<string, unknown> }).Variables;
      expect(variables.TARGET_SECRET_PREFIX, name).toBe(PREFIX);
    }
  });

  it('acknowledges the wildcard for that prefix only, and says so', () => {
    const secrets = nagAcknowledgements(synth.stack.ledger).filter(({ id }) => id.includes('secretsmanager'));
    expect(secrets.length).toBe(3);
    for (const { id, reason } of secrets) {
      expect(id).toContain(`:secret:${PREFIX}*]`);
      expect(reason).toContain(PREFIX);
    }
  });

  it('gives another stack in the same account a prefix of its own', () => {
    const app = new App();
    const other = new DispatchLedgerStack(app, 'LedgerStaging', { env: { account: '111122223333', region: 'eu-west-1' } });
    const json = JSON.stringify(Template.fromStack(other).toJSON());
    expect(json.includes(':secret:dispatch-ledger/LedgerStaging/targets/*')).toBe(true);
    expect(json.includes(':secret:dispatch-ledger/DispatchLedger/targets/')).toBe(false);
  });
});

describe('trust boundaries: deploy-time targets (the construct\'s targets prop and addTarget)', () => {
  it('refuses a base URL that is not https, or is loopback, link-local, unspecified or a metadata address in any spelling', () => {
    const app = new App();
    const stack = new DispatchLedgerStack(app, 'LedgerTargets', { env: { account: '111122223333', region: 'eu-west-1' } });
    for (const baseUrl of ['http://agents.example.com', 'https://127.0.0.1', 'https://2130706433/', 'https://0x7f000001/', 'https://0177.0.0.1/', 'https://127.1/', 'https://[::ffff:127.0.0.1]/', 'https://[::ffff:7f00:1]/', 'https://localhost/', 'https://169.254.169.254/', 'https://[fd00:ec2::254]/', 'https://[fe80::1]/', 'https://0.0.0.0/', 'https://[::]/']) {
      expect(() => stack.ledger.addTarget({ name: 'agent', baseUrl }), baseUrl).toThrow(RangeError);
    }
    expect(() => stack.ledger.addTarget({ name: 'agent', baseUrl: 'https://agents.example.com/v1' })).not.toThrow();
    const viaProps = new App();
    expect(() => new DispatchLedgerStack(viaProps, 'LedgerProps', { ledger: { targets: [{ name: 'agent', baseUrl: 'https://[::ffff:169.254.169.254]/' }] } })).toThrow(RangeError);
  });
});
