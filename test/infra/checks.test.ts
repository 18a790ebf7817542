import { Validations } from 'aws-cdk-lib';
import { Bucket } from 'aws-cdk-lib/aws-s3';
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nagAcknowledgements } from '../../infra/nag.js';
import { synthesizeLedger, type Synthesized } from './synth.js';

let synth: Synthesized;
beforeAll(() => {
  synth = synthesizeLedger();
});
afterAll(() => synth.dispose());

/** cfn-lint's checks minus W3005 ("DependsOn already enforced by a GetAtt"), which CDK emits for every function with its own role. */
function cfnLint(templateFile: string): { status: number; output: string } {
  try {
    const output = execFileSync('cfn-lint', ['--format', 'parseable', '--ignore-checks', 'W3005', '--', templateFile], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    return { status: 0, output };
  } catch (error) {
    const failed = error as { status?: number; stdout?: string; stderr?: string };
    return { status: failed.status ?? -1, output: `${failed.stdout ?? ''}${failed.stderr ?? ''}` };
  }
}

describe('AWS rule packs on the synthesized stack', () => {
  it('leaves zero unacknowledged cdk-nag findings (AwsSolutions and Serverless packs)', () => {
    expect(synth.nagFindings).toEqual([]);
  });

  it('gives every acknowledged finding a specific reason', () => {
    const acknowledgements = nagAcknowledgements(synth.stack.ledger);
    expect(acknowledgements.length).toBeGreaterThan(0);
    for (const { id, reason } of acknowledgements) {
      expect(id).toMatch(/^(AwsSolutions|Serverless)-[A-Za-z0-9]+(\[.+\])?$/);
      expect(reason.length, `reason for ${id}`).toBeGreaterThan(60);
    }
    expect(new Set(acknowledgements.map(({ reason }) => reason)).size).toBeGreaterThan(acknowledgements.length / 3);
  });

  it('reports a finding nobody acknowledged (the check can fail)', () => {
    const tainted = synthesizeLedger({
      bundle: false,
      extend: (stack) => {
        new Bucket(stack, 'Unreviewed');
        void Validations;
      },
    });
    try {
      expect(tainted.nagFindings.map(({ rule }) => rule)).toEqual(expect.arrayContaining(['AwsSolutions-S1', 'AwsSolutions-S10']));
      expect(tainted.nagFindings.every(({ path }) => path.startsWith('DispatchLedger/Unreviewed/'))).toBe(true);
    } finally {
      tainted.dispose();
    }
  });

  it('passes cfn-lint with no errors or warnings', () => {
    const { status, output } = cfnLint(synth.templateFile);
    expect(output).toBe('');
    expect(status).toBe(0);
  });
});
