import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { measureKitWorker } from '../../scripts/bundle-report.js';
import { ExampleLambdaWorker } from '../../infra/example-lambda-worker.js';
import { cfnLint, logicalId, synthesizeLedger, type Synthesized } from './synth.js';

/** The app with the example Lambda worker (`-c exampleLambdaWorker=true`), bundled as deployed. */

let synth: Synthesized;
let example: ExampleLambdaWorker;

beforeAll(() => {
  synth = synthesizeLedger({
    extend: (stack) => {
      example = new ExampleLambdaWorker(stack, 'ExampleWorker', { ledger: stack.ledger });
    },
  });
}, 120_000);
afterAll(() => synth.dispose());

describe('the example Lambda worker', () => {
  it('deploys as the lambda target example-worker, with its run-state table in KIT_RUN_TABLE, and no unacknowledged cdk-nag finding', () => {
    const worker = synth.template.toJSON().Resources[logicalId(synth.stack, example.worker.function)] as { Properties: { Environment: { Variables: Record<string, unknown> }; Runtime: string } };
    expect(worker.Properties.Environment.Variables.KIT_RUN_TABLE).toEqual({ Ref: logicalId(synth.stack, example.runs) });
    expect(worker.Properties.Runtime).toMatch(/^nodejs2[2-9]\.x$/);
    expect(synth.nagFindings).toEqual([]);
  });

  it('passes cfn-lint with no errors or warnings (W3005 aside, as for the stack itself)', () => {
    const { status, output } = cfnLint(synth.templateFile);
    expect(output).toBe('');
    expect(status).toBe(0);
  });
});

describe('a kit-based Lambda worker bundle', () => {
  it('stays within 1.2 × a bundle of only the SDK clients it uses (issue 15; npm run bundle:report prints it)', async () => {
    const kit = await measureKitWorker();
    expect(kit.sdkOnlyBytes).toBeGreaterThan(100_000);
    expect(kit.ratio, `${kit.bytes} B vs ${kit.sdkOnlyBytes} B`).toBeLessThanOrEqual(1.2);
    expect(kit.withinBudget).toBe(true);
  });
});
