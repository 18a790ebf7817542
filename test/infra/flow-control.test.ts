import { App, Duration, Stack, Validations } from 'aws-cdk-lib';
import { CfnFunction, Code, Function as LambdaFunction, Runtime } from 'aws-cdk-lib/aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DispatchLedger } from '@dispatch-ledger/cdk';
import { DispatchLedgerStack } from '../../infra/stack.js';
import { parseStaticRegistry } from '../../shared/adapters/static-registry.js';
import { logicalId, synthesizeLedger, type Synthesized } from './synth.js';

/**
 * Flow control in the stack (CONTRACT §11): a target's `maxConcurrentRuns` reaches the functions'
 * registry, and the writes that free a slot may nudge the monitor — exactly the monitor.
 */

type Resource = { readonly Type: string; readonly Properties?: Record<string, unknown> };

let synth: Synthesized;
let resources: Record<string, Resource>;

/** A user's own Lambda worker, its own findings acknowledged (as the lambda-target tests do). */
function workerIn(stack: Stack, id: string): LambdaFunction {
  const worker = new LambdaFunction(stack, id, { runtime: Runtime.NODEJS_22_X, handler: 'index.handler', code: Code.fromInline('export const handler = async () => ({});'), timeout: Duration.minutes(1) });
  for (const finding of ['AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]', 'Serverless-LambdaTracing', 'Serverless-LambdaDefaultMemorySize', 'Serverless-LambdaLatestVersion']) {
    Validations.of(worker).acknowledge({ id: finding, reason: "test fixture: the user's own worker function" });
  }
  return worker;
}

beforeAll(() => {
  synth = synthesizeLedger({
    extend: (stack) => {
      stack.ledger.addTarget({ name: 'capped-agent', baseUrl: 'https://capped.example.com', maxConcurrentRuns: 3 });
      stack.ledger.addLambdaTarget('summarizer', workerIn(stack, 'SummarizerWorker'), { maxConcurrentRuns: 2 });
    },
  });
  resources = synth.template.toJSON().Resources as Record<string, Resource>;
});
afterAll(() => synth.dispose());

const variablesOf = (fn: LambdaFunction | { readonly node: { readonly defaultChild?: unknown } }): Record<string, unknown> =>
  ((resources[logicalId(synth.stack, fn)]?.Properties?.Environment as { Variables: Record<string, unknown> }).Variables);

/** The registry JSON a function receives, each CloudFormation reference in it standing as a "TOKEN-n" of its own. */
function registryOf(fn: { readonly node: { readonly defaultChild?: unknown } }): string {
  const value = variablesOf(fn).LEDGER_REGISTRY;
  if (typeof value === 'string') return value;
  const [, parts] = (value as { 'Fn::Join': [string, unknown[]] })['Fn::Join'];
  return parts.map((part, index) => (typeof part === 'string' ? part : `TOKEN-${index}`)).join('');
}

describe('maxConcurrentRuns at deploy time (CONTRACT §11)', () => {
  it('lands in the registry every function reads, for an http and a lambda target, and parses as their limit', () => {
    for (const name of ['intake', 'api', 'monitor', 'failures'] as const) {
      const registry = parseStaticRegistry(registryOf(synth.stack.ledger.functions[name].function));
      expect(registry.targets.get('capped-agent'), name).toMatchObject({ kind: 'http', baseUrl: 'https://capped.example.com', maxConcurrentRuns: 3 });
      expect(registry.targets.get('summarizer'), name).toMatchObject({ kind: 'lambda', timeoutSeconds: 60, maxConcurrentRuns: 2 });
      // A target registered without one stays unlimited.
      expect(registry.targets.get('research-agent'), name).not.toHaveProperty('maxConcurrentRuns');
    }
  });

  it('adds no cdk-nag finding of the ledger\'s own', () => {
    expect(synth.nagFindings.filter((finding) => !finding.path.includes('/SummarizerWorker'))).toEqual([]);
  });
});

describe('maxConcurrentRuns refused at synth time', () => {
  const fresh = () => new App();
  const outOfRange = /target "[a-z-]+": maxConcurrentRuns must be a whole number from 1 to 10,000, got/;

  it.each([0, 10_001, -1, 2.5, Number.NaN])('refuses %s for an http target, in the props and from addTarget', (maxConcurrentRuns) => {
    expect(() => new DispatchLedgerStack(fresh(), 'S', { ledger: { targets: [{ name: 'agent', baseUrl: 'https://agent.example.com', maxConcurrentRuns }] } })).toThrow(outOfRange);
    const stack = new Stack(fresh(), 'T');
    const ledger = new DispatchLedger(stack, 'Ledger');
    expect(() => ledger.addTarget({ name: 'agent', baseUrl: 'https://agent.example.com', maxConcurrentRuns })).toThrow(outOfRange);
  });

  it.each([0, 10_001, 1.5])('refuses %s for a lambda target', (maxConcurrentRuns) => {
    const stack = new Stack(fresh(), 'L');
    const ledger = new DispatchLedger(stack, 'Ledger');
    const worker = new LambdaFunction(stack, 'Worker', { runtime: Runtime.NODEJS_22_X, handler: 'index.handler', code: Code.fromInline('export const handler = async () => ({});'), timeout: Duration.minutes(1) });
    expect(() => ledger.addLambdaTarget('worker', worker, { maxConcurrentRuns })).toThrow(outOfRange);
  });

  it('takes the bounds themselves, 1 and 10,000', () => {
    const stack = new Stack(fresh(), 'B');
    const ledger = new DispatchLedger(stack, 'Ledger');
    const worker = new LambdaFunction(stack, 'Worker', { runtime: Runtime.NODEJS_22_X, handler: 'index.handler', code: Code.fromInline('export const handler = async () => ({});'), timeout: Duration.minutes(1) });
    expect(() => ledger.addTarget({ name: 'one', baseUrl: 'https://one.example.com', maxConcurrentRuns: 1 })).not.toThrow();
    expect(() => ledger.addLambdaTarget('many', worker, { maxConcurrentRuns: 10_000 })).not.toThrow();
  });
});

describe('the admission nudge: a write that frees a slot invokes the monitor (CONTRACT §11)', () => {
  const monitorName = (): string => resources[logicalId(synth.stack, synth.stack.ledger.functions.monitor.function)]?.Properties?.FunctionName as string;

  it('tells the API and the failures function the monitor\'s name in LEDGER_ADMISSION_FUNCTION, and no other function', () => {
    const name = monitorName();
    expect(name).toMatch(/^[A-Za-z0-9-]{1,64}$/);
    const { functions } = synth.stack.ledger;
    expect(variablesOf(functions.api.function).LEDGER_ADMISSION_FUNCTION).toBe(name);
    expect(variablesOf(functions.failures.function).LEDGER_ADMISSION_FUNCTION).toBe(name);
    // Regression: a Ref to the monitor from the API's environment or policy closes a cycle (the monitor
    // depends on the API's URL), which CloudFormation refuses; the name is a plain string instead.
    expect(typeof variablesOf(functions.api.function).LEDGER_ADMISSION_FUNCTION).toBe('string');
    for (const other of [functions.intake, functions.monitor, functions.publisher, functions.retention]) expect(variablesOf(other.function)).not.toHaveProperty('LEDGER_ADMISSION_FUNCTION');
  });

  it('names the monitor from its stack and path: another stack name, another function name, never past 64 characters', () => {
    const nameIn = (stackName: string): string => {
      const stack = new Stack(new App(), 'Id', { stackName });
      const resource = new DispatchLedger(stack, 'Ledger').functions.monitor.function.node.defaultChild;
      if (!(resource instanceof CfnFunction)) throw new Error('the monitor has no CfnFunction');
      return String(stack.resolve(resource.functionName));
    };
    expect(nameIn('ledger-prod')).not.toBe(nameIn('ledger-staging'));
    const long = nameIn(`ledger-${'x'.repeat(120)}`);
    expect(long.length).toBeLessThanOrEqual(64);
    expect(long).toMatch(/^[A-Za-z0-9-]+-monitor$/);
  });
});
