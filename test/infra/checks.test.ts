import { Validations } from 'aws-cdk-lib';
import { Bucket } from 'aws-cdk-lib/aws-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nagAcknowledgements } from '@dispatch-ledger/cdk';
import { cfnLint, synthesizeLedger, type Synthesized } from './synth.js';

let synth: Synthesized;
beforeAll(() => {
  synth = synthesizeLedger();
});
afterAll(() => synth.dispose());

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
