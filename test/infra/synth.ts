import { App, CfnElement, Duration, Stack, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { AccountPrincipal, Role } from 'aws-cdk-lib/aws-iam';
import { Code, Function as LambdaFunction, Runtime } from 'aws-cdk-lib/aws-lambda';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import { AwsSolutionsChecks, ServerlessChecks } from 'cdk-nag';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DispatchLedgerStack } from '../../infra/stack.js';

export interface Synthesized {
  readonly app: App;
  readonly stack: DispatchLedgerStack;
  readonly template: Template;
  readonly outdir: string;
  /** Where the app has been synthesized, for tools that read the template file (cfn-lint). */
  readonly templateFile: string;
  /** cdk-nag's findings left unacknowledged: rule and construct path. */
  readonly nagFindings: ReadonlyArray<{ readonly rule: string; readonly path: string }>;
  readonly dispose: () => void;
}

interface ValidationReport {
  readonly pluginReports: ReadonlyArray<{ readonly violations: ReadonlyArray<{ readonly ruleName: string; readonly violatingConstructs: ReadonlyArray<{ readonly constructPath: string }> }> }>;
}

/**
 * The stack as `npx cdk synth` builds it — the functions' prebuilt bundles as assets, cdk-nag's AwsSolutions and
 * Serverless packs as validation plugins — plus what a user typically adds: an origin, a target with
 * an auth secret and an operator, so their grants and registry entries are under test too.
 */
export function synthesizeLedger(options: { readonly extend?: (stack: DispatchLedgerStack) => void } = {}): Synthesized {
  const outdir = mkdtempSync(path.join(os.tmpdir(), 'ledger-synth-'));
  const app = new App({ outdir });
  const stack = new DispatchLedgerStack(app, 'DispatchLedger', { env: { account: '111122223333', region: 'eu-west-1' } });
  const trusted = new AccountPrincipal('111122223333');
  const authSecret = new Secret(stack, 'ResearchAgentAuth', { description: 'auth header of research-agent' });
  Validations.of(authSecret).acknowledge({ id: 'AwsSolutions-SMG4', reason: 'test fixture: the target rotates its own credential' });
  stack.ledger.addTarget({ name: 'research-agent', baseUrl: 'https://agents.example.com', authSecret });
  stack.ledger.addOrigin(new Role(stack, 'PlannerRole', { assumedBy: trusted }), 'planner');
  stack.ledger.grantOrigin(new Role(stack, 'LeadAgentRole', { assumedBy: trusted }), 'lead-agent');
  stack.ledger.addTargetCaller(new Role(stack, 'AgentRole', { assumedBy: trusted }), 'research-agent');
  const onCall = new Role(stack, 'OnCallRole', { assumedBy: trusted, maxSessionDuration: Duration.hours(1) });
  stack.ledger.addOperator(onCall);
  Validations.of(onCall).acknowledge({
    id: `AwsSolutions-IAM5[Resource::<${stack.getLogicalId(stack.ledger.publisher.failureBucket.node.defaultChild as CfnElement)}.Arn>/*]`,
    reason: 'test fixture: the operator reads and marks the failure records Lambda names itself',
  });
  options.extend?.(stack);
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app), new ServerlessChecks(app));
  try {
    app.synth();
  } catch (error) {
    // Unacknowledged findings fail synthesis; they are read from the report below.
    if ((error as Error).name !== 'ValidationFailed' && !String((error as Error).message).includes('Validation failed')) throw error;
  }
  const report = JSON.parse(readFileSync(path.join(outdir, 'validation-report.json'), 'utf8')) as ValidationReport;
  const nagFindings = report.pluginReports.flatMap((plugin) =>
    plugin.violations.flatMap((violation) => violation.violatingConstructs.map((construct) => ({ rule: violation.ruleName, path: construct.constructPath }))),
  );
  return {
    app,
    stack,
    template: Template.fromJSON(JSON.parse(readFileSync(path.join(outdir, `${stack.artifactId}.template.json`), 'utf8')) as Record<string, unknown>),
    outdir,
    templateFile: path.join(outdir, `${stack.artifactId}.template.json`),
    nagFindings,
    dispose: () => rmSync(outdir, { recursive: true, force: true }),
  };
}

/** The logical id of a construct's CloudFormation resource in its stack. */
export function logicalId(stack: Stack, construct: { readonly node: { readonly defaultChild?: unknown } }): string {
  const resource = construct.node.defaultChild;
  if (!resource || typeof resource !== 'object' || !('logicalId' in resource)) throw new Error('construct has no CloudFormation resource');
  return stack.resolve((resource as { logicalId: string }).logicalId) as string;
}

/** cfn-lint's checks minus W3005 ("DependsOn already enforced by a GetAtt"), which CDK emits for every function with its own role. */
export function cfnLint(templateFile: string): { status: number; output: string } {
  try {
    const output = execFileSync('cfn-lint', ['--format', 'parseable', '--ignore-checks', 'W3005', '--', templateFile], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    return { status: 0, output };
  } catch (error) {
    const failed = error as { status?: number; stdout?: string; stderr?: string };
    return { status: failed.status ?? -1, output: `${failed.stdout ?? ''}${failed.stderr ?? ''}` };
  }
}

/**
 * A Lambda function of the user's own, as a durable target's fixture: durable (`durableConfig`) unless
 * `durable` is false, its own cdk-nag findings acknowledged as the user's, not the ledger's.
 */
export function durableFunctionFixture(stack: Stack, id: string, options: { readonly durable?: boolean } = {}): LambdaFunction {
  const fn = new LambdaFunction(stack, id, {
    runtime: Runtime.NODEJS_22_X,
    handler: 'index.handler',
    code: Code.fromInline('export const handler = async () => ({});'),
    timeout: Duration.minutes(1),
    ...(options.durable === false ? {} : { durableConfig: { executionTimeout: Duration.days(1) } }),
  });
  const managed = options.durable === false ? 'AWSLambdaBasicExecutionRole' : 'AWSLambdaBasicDurableExecutionRolePolicy';
  for (const finding of [`AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/${managed}]`, 'AwsSolutions-L1', 'Serverless-LambdaTracing', 'Serverless-LambdaDefaultMemorySize', 'Serverless-LambdaLatestVersion', 'Serverless-LambdaDLQ']) {
    Validations.of(fn).acknowledge({ id: finding, reason: "test fixture: the user's own durable function" });
  }
  return fn;
}

/**
 * The registry JSON a ledger function receives, each CloudFormation reference standing as "<Ref id>" or
 * "<GetAtt id.attr>" — or as the value `deployed` gives it (the ARN a deployment would put there).
 */
export function registryOf(synth: Synthesized, fn: { readonly node: { readonly defaultChild?: unknown } }, deployed: Readonly<Record<string, string>> = {}): string {
  const resources = synth.template.toJSON().Resources as Record<string, { readonly Properties?: Record<string, unknown> }>;
  const value = (resources[logicalId(synth.stack, fn)]?.Properties?.Environment as { Variables: Record<string, unknown> }).Variables.LEDGER_REGISTRY;
  if (typeof value === 'string') return value;
  const [, parts] = (value as { 'Fn::Join': [string, unknown[]] })['Fn::Join'];
  return parts
    .map((part) => {
      if (typeof part === 'string') return part;
      const reference = part as { Ref?: string; 'Fn::GetAtt'?: [string, string] };
      if (reference.Ref) return deployed[reference.Ref] ?? `<Ref ${reference.Ref}>`;
      return `<GetAtt ${reference['Fn::GetAtt']?.join('.')}>`;
    })
    .join('');
}
