import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { CfnFunction } from 'aws-cdk-lib/aws-lambda';
import { describe, expect, it } from 'vitest';
import { DispatchLedger } from '@dispatch-ledger/cdk';
import type { EventsProfile } from '../../shared/events/profile.js';

/** CONTRACT §3 v2: the construct prop `events` decides what the publisher puts on the bus. */
function publisherEnvironment(events?: EventsProfile): Record<string, unknown> {
  const stack = new Stack(new App(), 'S');
  const ledger = new DispatchLedger(stack, 'Ledger', events === undefined ? {} : { events });
  const resource = ledger.functions.publisher.function.node.defaultChild;
  if (!(resource instanceof CfnFunction)) throw new Error('the publisher has no CfnFunction');
  const functions = Template.fromStack(stack).findResources('AWS::Lambda::Function');
  const logicalId = stack.getLogicalId(resource);
  return (functions[logicalId]?.Properties?.Environment as { Variables: Record<string, unknown> }).Variables;
}

describe('the events prop of the DispatchLedger construct', () => {
  it('publishes every detail-type by default, and passes attention or a list to the publisher alone', () => {
    expect(publisherEnvironment().PUBLISHED_EVENTS).toBe('all');
    expect(publisherEnvironment('attention').PUBLISHED_EVENTS).toBe('attention');
    expect(publisherEnvironment(['Dispatch Orphaned', 'Run Stalled']).PUBLISHED_EVENTS).toBe('Dispatch Orphaned,Run Stalled');
    expect(publisherEnvironment([]).PUBLISHED_EVENTS).toBe('none');
  });

  it('refuses an unknown detail-type at synth time, naming it', () => {
    expect(() => publisherEnvironment(['Dispatch Orphaned', 'Run Stalld' as 'Run Stalled'])).toThrow(/"Run Stalld" is not a detail-type/);
  });
});
