import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { CfnFunction } from 'aws-cdk-lib/aws-lambda';
import { describe, expect, it } from 'vitest';
import { DispatchLedger, type DispatchLedgerProps } from '@dispatch-ledger/cdk';

/** CONTRACT §14: the construct prop `inboxShards` spreads an origin's inbox over more keys. */
function environments(props: DispatchLedgerProps): Record<string, Record<string, unknown>> {
  const stack = new Stack(new App(), 'S');
  const ledger = new DispatchLedger(stack, 'Ledger', props);
  const functions = Template.fromStack(stack).findResources('AWS::Lambda::Function');
  return Object.fromEntries(
    Object.entries(ledger.functions).map(([name, fn]) => {
      const resource = fn.function.node.defaultChild;
      if (!(resource instanceof CfnFunction)) throw new Error(`${name} has no CfnFunction`);
      return [name, (functions[stack.getLogicalId(resource)]?.Properties?.Environment as { Variables: Record<string, unknown> }).Variables];
    }),
  );
}

describe('the inboxShards prop of the DispatchLedger construct', () => {
  it('gives every function that writes a dispatch\'s state the same count (1 by default), the failures function included', () => {
    const writers = ['intake', 'api', 'monitor', 'failures'];
    const byDefault = environments({});
    for (const name of writers) expect(byDefault[name]?.INBOX_SHARDS, name).toBe('1');
    const scaled = environments({ inboxShards: 16 });
    for (const name of writers) expect(scaled[name]?.INBOX_SHARDS, name).toBe('16');
    // The publisher and retention write no state.
    expect(scaled.publisher).not.toHaveProperty('INBOX_SHARDS');
    expect(scaled.retention).not.toHaveProperty('INBOX_SHARDS');
  });

  it.each([0, 33, 2.5, -1])('refuses %s at synth time', (inboxShards) => {
    expect(() => environments({ inboxShards })).toThrow(/inboxShards must be a whole number from 1 to 32/);
  });
});
