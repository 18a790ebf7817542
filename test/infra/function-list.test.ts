import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { CfnFunction } from 'aws-cdk-lib/aws-lambda';
import { describe, expect, it } from 'vitest';
import { DispatchLedger, LEDGER_FUNCTIONS } from '@dispatch-ledger/cdk';
import { LEDGER_FUNCTION_SPECS } from '../../infra/constructs/function-names.js';
import { LOCAL_FUNCTIONS } from '../../local/functions.js';
import { isPublishedRecord, isTtlRemoval } from '../../shared/adapters/stream-records.js';

/**
 * Issue 33: the functions and their triggers were listed twice, in the construct and in the local
 * platform. One list (infra/constructs/function-names.ts) now feeds both.
 */
describe('one list of functions and their triggers', () => {
  const stack = new Stack(new App(), 'S');
  const ledger = new DispatchLedger(stack, 'Ledger', {});
  const template = Template.fromStack(stack);
  const functions = template.findResources('AWS::Lambda::Function');
  const mappings = Object.values(template.findResources('AWS::Lambda::EventSourceMapping'));
  const logicalIdOf = (name: (typeof LEDGER_FUNCTIONS)[number]): string => {
    const resource = ledger.functions[name].function.node.defaultChild;
    if (!(resource instanceof CfnFunction)) throw new Error(`${name} has no CfnFunction`);
    return stack.getLogicalId(resource);
  };

  it('deploys each function of the list with its timeout and memory, and its event source with its batch size', () => {
    expect(Object.keys(ledger.functions).sort()).toEqual([...LEDGER_FUNCTIONS].sort());
    for (const name of LEDGER_FUNCTIONS) {
      const spec = LEDGER_FUNCTION_SPECS[name];
      const id = logicalIdOf(name);
      expect(functions[id]?.Properties, name).toMatchObject({ Timeout: spec.timeoutSeconds, MemorySize: spec.memoryMb });
      const own = mappings.filter((mapping) => JSON.stringify(mapping.Properties?.FunctionName).includes(id));
      if (spec.trigger.kind === 'sqs' || spec.trigger.kind === 'stream') {
        expect(own.map((mapping) => mapping.Properties?.BatchSize), name).toEqual([spec.trigger.batchSize]);
      } else {
        expect(own, name).toEqual([]);
      }
    }
  });

  it('runs the same functions on the local platform, each on the trigger the list gives it', () => {
    expect(LOCAL_FUNCTIONS.map((fn) => fn.name)).toEqual([...LEDGER_FUNCTIONS]);
    for (const fn of LOCAL_FUNCTIONS) {
      const spec = LEDGER_FUNCTION_SPECS[fn.name as (typeof LEDGER_FUNCTIONS)[number]];
      expect(fn.trigger.kind, fn.name).toBe(spec.trigger.kind);
      if (fn.trigger.kind === 'sqs' && spec.trigger.kind === 'sqs') expect(fn.trigger, fn.name).toEqual({ kind: 'sqs', queue: spec.trigger.queue, batchSize: spec.trigger.batchSize, timeoutSeconds: spec.timeoutSeconds });
      // Every invocation the local platform makes ends at the stack's timeout, as Lambda ends it.
      expect(fn.trigger.timeoutSeconds, fn.name).toBe(spec.timeoutSeconds);
      if (fn.trigger.kind === 'stream' && spec.trigger.kind === 'stream') {
        expect(fn.trigger.batchSize, fn.name).toBe(spec.trigger.batchSize);
        expect(fn.trigger.filter, fn.name).toBe(spec.trigger.records === 'published' ? isPublishedRecord : isTtlRemoval);
      }
    }
  });
});
