import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { Role } from 'aws-cdk-lib/aws-iam';
import { Alias, Function as LambdaFunction, Version, type IVersion } from 'aws-cdk-lib/aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DispatchLedger } from '@dispatch-ledger/cdk';
import { parseStaticRegistry } from '../../shared/adapters/static-registry.js';
import { cfnLint, durableFunctionFixture, logicalId, registryOf, synthesizeLedger, type Synthesized } from './synth.js';

/**
 * `ledger.addDurableFunctionTarget(name, fn)` (CONTRACT §17): a Lambda durable function, by a version
 * or an alias, as a target — invoked by its qualified ARN, its durable-execution calls granted on its
 * versions and nothing broader, its registry entry in every function.
 */

type Resource = { readonly Type: string; readonly Properties?: Record<string, unknown> };
interface Statement {
  readonly Effect: string;
  readonly Action: string | string[];
  readonly Resource: unknown;
}
type LedgerFunctionName = 'intake' | 'api' | 'monitor' | 'publisher' | 'retention' | 'failures' | 'orchestrators';

const IMPORTED_ARN = 'arn:aws:lambda:eu-west-1:111122223333:function:imported-durable:7';
/** The durable-execution calls, exactly: no heartbeat (the ledger sends none), nothing else of Lambda. */
const DURABLE_CALLS = [
  'lambda:GetDurableExecution',
  'lambda:GetDurableExecutionHistory',
  'lambda:ListDurableExecutionsByFunction',
  'lambda:SendDurableExecutionCallbackFailure',
  'lambda:SendDurableExecutionCallbackSuccess',
  'lambda:StopDurableExecution',
];

let synth: Synthesized;
let resources: Record<string, Resource>;
let review: LambdaFunction;
let live: Alias;
let audit: LambdaFunction;
let auditVersion: Version;

beforeAll(() => {
  synth = synthesizeLedger({
    extend: (stack) => {
      review = durableFunctionFixture(stack, 'ReviewDurable');
      live = new Alias(stack, 'ReviewLive', { aliasName: 'live', version: review.currentVersion });
      stack.ledger.addDurableFunctionTarget('review-durable', live);
      // As the READMEs show: the function's own role reports its runs. Regression: its identity grant on the
      // API made a dependency cycle (API → registry → alias → function → its policy → API) that synth let
      // through and CloudFormation refuses.
      stack.ledger.addTargetCaller(review.role as Role, 'review-durable');
      audit = durableFunctionFixture(stack, 'AuditDurable');
      auditVersion = audit.currentVersion;
      stack.ledger.addDurableFunctionTarget('audit-durable', auditVersion, { maxConcurrentRuns: 3 });
      stack.ledger.addDurableFunctionTarget('imported-durable', Version.fromVersionArn(stack, 'ImportedDurable', IMPORTED_ARN));
    },
  });
  resources = synth.template.toJSON().Resources as Record<string, Resource>;
});
afterAll(() => synth.dispose());

const roleOf = (name: LedgerFunctionName): string => logicalId(synth.stack, synth.stack.ledger.functions[name].function.role as never);
/** Every statement of the policies attached to a role that names a Lambda action. */
const lambdaGrants = (role: string) =>
  Object.values(resources)
    .filter((resource) => resource.Type === 'AWS::IAM::Policy' && JSON.stringify(resource.Properties?.Roles).includes(`"${role}"`))
    .flatMap((policy) => (policy.Properties?.PolicyDocument as { Statement: Statement[] }).Statement)
    .filter((statement) => [statement.Action].flat().some((action) => action.startsWith('lambda:')))
    .map((statement) => {
      expect(statement.Effect).toBe('Allow');
      return { actions: [statement.Action].flat().sort(), resource: statement.Resource };
    });
/** `arn:…:function:NAME:*` of an in-stack function: every version (and alias) of it. */
const versionsOf = (fn: LambdaFunction) => ({ 'Fn::Join': ['', [{ 'Fn::GetAtt': [logicalId(synth.stack, fn), 'Arn'] }, ':*']] });
/** The admission nudge to the monitor (CONTRACT §11), the one Lambda grant these functions had before. */
const nudge = () => {
  const monitor = resources[logicalId(synth.stack, synth.stack.ledger.functions.monitor.function)]?.Properties?.FunctionName;
  return { actions: ['lambda:InvokeFunction'], resource: { 'Fn::Join': ['', ['arn:', { Ref: 'AWS::Partition' }, `:lambda:eu-west-1:111122223333:function:${String(monitor)}`]] } };
};

describe('addDurableFunctionTarget: grants', () => {
  it('lets intake, api and monitor invoke each function by its qualified ARN and make the durable-execution calls on its versions — exactly those statements', () => {
    const durable = [
      { actions: ['lambda:InvokeFunction'], resource: { Ref: logicalId(synth.stack, live) } },
      { actions: DURABLE_CALLS, resource: versionsOf(review) },
      { actions: ['lambda:InvokeFunction'], resource: { Ref: logicalId(synth.stack, auditVersion) } },
      { actions: DURABLE_CALLS, resource: versionsOf(audit) },
      { actions: ['lambda:InvokeFunction'], resource: IMPORTED_ARN },
      { actions: DURABLE_CALLS, resource: 'arn:aws:lambda:eu-west-1:111122223333:function:imported-durable:*' },
    ];
    expect(lambdaGrants(roleOf('intake'))).toEqual(durable);
    expect(lambdaGrants(roleOf('monitor'))).toEqual(durable);
    // The API also nudges the monitor: that grant was there before, and nothing else joined it.
    expect(lambdaGrants(roleOf('api'))).toEqual([nudge(), ...durable]);
  });

  it('grants the orchestrators, failures, publisher and retention functions nothing of the durable functions', () => {
    for (const name of ['orchestrators', 'failures'] as const) expect(lambdaGrants(roleOf(name)), name).toEqual([nudge()]);
    for (const name of ['publisher', 'retention'] as const) expect(lambdaGrants(roleOf(name)), name).toEqual([]);
  });

  it('grants no Lambda action with a wildcard, no Lambda action on every resource or every function, and no callback heartbeat, anywhere in the stack', () => {
    const all = Object.values(resources)
      .filter((resource) => resource.Type === 'AWS::IAM::Policy')
      .flatMap((policy) => (policy.Properties?.PolicyDocument as { Statement: Statement[] }).Statement)
      .filter((statement) => [statement.Action].flat().some((action) => action.startsWith('lambda:')));
    expect(all.length).toBeGreaterThan(0);
    for (const statement of all) {
      expect([statement.Action].flat().filter((action) => action.includes('*'))).toEqual([]);
      expect([statement.Action].flat()).not.toContain('lambda:SendDurableExecutionCallbackHeartbeat');
      for (const resource of [statement.Resource].flat()) {
        expect(resource).not.toBe('*');
        // Every wildcard is one function's versions (`…:function:NAME:*`), never `function:*` across functions.
        expect(JSON.stringify(resource)).not.toMatch(/function:\*|function\/\*/);
      }
    }
    // Same account: the grants are the callers' own policies; no resource policy is added to a durable function.
    const permissions = Object.values(resources).filter((resource) => resource.Type === 'AWS::Lambda::Permission');
    for (const fn of [review, audit]) expect(JSON.stringify(permissions)).not.toContain(logicalId(synth.stack, fn));
  });
});

describe('addDurableFunctionTarget: registry', () => {
  it("writes { name, kind: 'durable', functionArn (qualified), maxConcurrentRuns } into every function's registry", () => {
    for (const name of ['intake', 'api', 'monitor', 'failures', 'orchestrators'] as const) {
      const { targets } = JSON.parse(registryOf(synth, synth.stack.ledger.functions[name].function)) as { targets: Array<{ name: string }> };
      const entry = (target: string) => targets.find((registered) => registered.name === target);
      expect(entry('review-durable'), name).toEqual({ name: 'review-durable', kind: 'durable', functionArn: `<Ref ${logicalId(synth.stack, live)}>` });
      expect(entry('audit-durable'), name).toEqual({ name: 'audit-durable', kind: 'durable', functionArn: `<Ref ${logicalId(synth.stack, auditVersion)}>`, maxConcurrentRuns: 3 });
      expect(entry('imported-durable'), name).toEqual({ name: 'imported-durable', kind: 'durable', functionArn: IMPORTED_ARN });
    }
  });

  it('is read back by the functions once deployed (the qualified ARNs CloudFormation puts in)', () => {
    const deployed = {
      [logicalId(synth.stack, live)]: 'arn:aws:lambda:eu-west-1:111122223333:function:review-fn:live',
      [logicalId(synth.stack, auditVersion)]: 'arn:aws:lambda:eu-west-1:111122223333:function:audit-fn:1',
    };
    const registry = parseStaticRegistry(registryOf(synth, synth.stack.ledger.functions.intake.function, deployed));
    expect(registry.targets.get('review-durable')).toEqual({ name: 'review-durable', kind: 'durable', functionArn: 'arn:aws:lambda:eu-west-1:111122223333:function:review-fn:live' });
    expect(registry.targets.get('audit-durable')).toEqual({ name: 'audit-durable', kind: 'durable', functionArn: 'arn:aws:lambda:eu-west-1:111122223333:function:audit-fn:1', maxConcurrentRuns: 3 });
  });

  it("adds no cdk-nag finding of the ledger's own (the grants on versions are acknowledged, each naming its function), and the template passes cfn-lint", () => {
    expect(synth.nagFindings).toEqual([]);
    const acknowledged = synth.stack.ledger.durableFunctionTargets.acknowledgements.map(({ scope, id }) => `${scope.node.id} ${id}`);
    expect(acknowledged).toHaveLength(9);
    expect(acknowledged).toContain(`ApiHandler AwsSolutions-IAM5[Resource::<${logicalId(synth.stack, review)}.Arn>:*]`);
    expect(acknowledged).toContain('MonitorHandler AwsSolutions-IAM5[Resource::arn:aws:lambda:eu-west-1:111122223333:function:imported-durable:*]');
    const { status, output } = cfnLint(synth.templateFile);
    expect(output).toBe('');
    expect(status).toBe(0);
  });
});

describe('addDurableFunctionTarget refused at synth time', () => {
  const ledgerIn = () => {
    const stack = new Stack(new App(), 'S', { env: { account: '111122223333', region: 'eu-west-1' } });
    return { stack, ledger: new DispatchLedger(stack, 'Ledger', {}) };
  };
  /** The Lambda actions the ledger's functions' policies name, but the admission nudge's (InvokeFunction on the monitor). */
  const lambdaActionsOf = (stack: Stack, ledger: DispatchLedger): string[] => {
    const template = Template.fromStack(stack).toJSON().Resources as Record<string, Resource>;
    const roles = Object.values(ledger.functions).map((fn) => logicalId(stack, fn.function.role as never));
    return Object.values(template)
      .filter((resource) => resource.Type === 'AWS::IAM::Policy' && roles.some((role) => JSON.stringify(resource.Properties?.Roles).includes(`"${role}"`)))
      .flatMap((policy) => (policy.Properties?.PolicyDocument as { Statement: Statement[] }).Statement)
      .filter((statement) => !JSON.stringify(statement.Resource).includes('-monitor'))
      .flatMap((statement) => [statement.Action].flat().filter((action) => action.startsWith('lambda:')));
  };

  it('refuses an unqualified function — of this app or imported — naming the target, and grants nothing for it', () => {
    const { stack, ledger } = ledgerIn();
    // As a JavaScript app could pass it: the types take a version or an alias only.
    const unqualified = [durableFunctionFixture(stack, 'Plain'), LambdaFunction.fromFunctionArn(stack, 'PlainImported', 'arn:aws:lambda:eu-west-1:111122223333:function:plain')];
    for (const fn of unqualified) {
      expect(() => ledger.addDurableFunctionTarget('plain-durable', fn as unknown as IVersion)).toThrow(/target "plain-durable": a durable function is registered by a version or an alias/);
    }
    // A "version" imported from the function's own ARN has no version.
    expect(() => ledger.addDurableFunctionTarget('plain-durable', Version.fromVersionArn(stack, 'Unqualified', 'arn:aws:lambda:eu-west-1:111122223333:function:plain'))).toThrow(/a durable function is registered by a version or an alias/);
    expect(ledger.durableFunctionTargets.acknowledgements).toEqual([]);
    expect(lambdaActionsOf(stack, ledger)).toEqual([]);
    // The same function by its version, in a ledger of its own, is taken and granted (the check can fail).
    const taken = ledgerIn();
    taken.ledger.addDurableFunctionTarget('plain-durable', durableFunctionFixture(taken.stack, 'Plain').currentVersion);
    expect(lambdaActionsOf(taken.stack, taken.ledger)).toContain('lambda:InvokeFunction');
  });

  it("refuses an ARN whose qualifier is no version or alias name, here rather than at every function's cold start (the registry refuses it there)", () => {
    const { stack, ledger } = ledgerIn();
    const odd = Version.fromVersionArn(stack, 'Odd', 'arn:aws:lambda:eu-west-1:111122223333:function:odd:v.1');
    expect(() => ledger.addDurableFunctionTarget('odd-durable', odd)).toThrow(/target "odd-durable": arn:aws:lambda:eu-west-1:111122223333:function:odd:v\.1 is not a function ARN qualified by a version or an alias/);
  });

  it('refuses $LATEST: the function\'s latest version, an imported one, and an alias on it', () => {
    const { stack, ledger } = ledgerIn();
    const fn = durableFunctionFixture(stack, 'Moving');
    const latest = [fn.latestVersion, Version.fromVersionArn(stack, 'ImportedLatest', 'arn:aws:lambda:eu-west-1:111122223333:function:moving:$LATEST'), new Alias(stack, 'OnLatest', { aliasName: 'edge', version: fn.latestVersion })];
    for (const qualified of latest) expect(() => ledger.addDurableFunctionTarget('moving-durable', qualified)).toThrow(/target "moving-durable": \$LATEST cannot be a durable target/);
    expect(() => ledger.addDurableFunctionTarget('moving-durable', fn.currentVersion)).not.toThrow();
  });

  it('refuses a function of this app without durableConfig (not a durable function)', () => {
    const { stack, ledger } = ledgerIn();
    const plain = durableFunctionFixture(stack, 'NotDurable', { durable: false });
    expect(() => ledger.addDurableFunctionTarget('plain-durable', plain.currentVersion)).toThrow(/target "plain-durable": function S\/NotDurable has no durableConfig/);
    expect(() => ledger.addDurableFunctionTarget('plain-durable', new Alias(stack, 'PlainLive', { aliasName: 'live', version: plain.currentVersion }))).toThrow(/has no durableConfig/);
  });

  it.each([0, 10_001, -1, 2.5, Number.NaN])('refuses maxConcurrentRuns %s', (maxConcurrentRuns) => {
    const { stack, ledger } = ledgerIn();
    expect(() => ledger.addDurableFunctionTarget('capped-durable', durableFunctionFixture(stack, 'Capped').currentVersion, { maxConcurrentRuns })).toThrow(/target "capped-durable": maxConcurrentRuns must be a whole number from 1 to 10,000/);
  });

  it('takes maxConcurrentRuns 1 and 10,000, and refuses a name registered twice or malformed', () => {
    const { stack, ledger } = ledgerIn();
    const version = durableFunctionFixture(stack, 'Flow').currentVersion;
    expect(() => ledger.addDurableFunctionTarget('one-durable', version, { maxConcurrentRuns: 1 })).not.toThrow();
    expect(() => ledger.addDurableFunctionTarget('many-durable', version, { maxConcurrentRuns: 10_000 })).not.toThrow();
    expect(() => ledger.addDurableFunctionTarget('one-durable', version)).toThrow(/registered twice/);
    expect(() => ledger.addDurableFunctionTarget('Not A Name', version)).toThrow(/target name "Not A Name" must match/);
  });

  it("refuses one role registered twice at synth, and takes a target's caller before or after its target (regression: two registrations deployed, then every ledger function refused its registry at cold start)", () => {
    const { stack, ledger } = ledgerIn();
    const fn = durableFunctionFixture(stack, 'Shared');
    ledger.addDurableFunctionTarget('first-durable', fn.currentVersion);
    ledger.addTargetCaller(fn.role as Role, 'first-durable');
    expect(() => ledger.addTargetCaller(fn.role as Role, 'second-durable')).toThrow(/is registered twice \(target first-durable, then target second-durable\): one identity speaks as one principal/);
    // A caller first, its durable target after: the caller's role is let in on the API, so no order closes a cycle.
    const early = durableFunctionFixture(stack, 'Early');
    ledger.addTargetCaller(early.role as Role, 'late-durable');
    ledger.addDurableFunctionTarget('late-durable', early.currentVersion);
    const template = Template.fromStack(stack);
    const permissionsOf = (role: Role) => Object.values(template.findResources('AWS::Lambda::Permission')).filter((resource) => JSON.stringify(resource).includes(logicalId(stack, role as never)));
    expect(permissionsOf(fn.role as Role)).toHaveLength(2);
    expect(permissionsOf(early.role as Role)).toHaveLength(2);
  });
});
