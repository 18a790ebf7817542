import { describe, expect, expectTypeOf, it } from 'vitest';
import type { DispatchRequest } from '@dispatch-ledger/client';
import type { DispatchView } from '@dispatch-ledger/protocol/answers';
import { RESULT_DELIVERY_MODES } from '@dispatch-ledger/protocol';

// The client's public types, as a TypeScript origin writes against them (npm test typechecks this file:
// a type that drifts fails `npm run typecheck`, and the runtime checks below pin the values they name).

describe("the client's types", () => {
  it('take only the result delivery modes there are, so a typo does not compile (was: any string, read as after_turn)', () => {
    expectTypeOf<NonNullable<DispatchRequest['resultDelivery']>>().toEqualTypeOf<(typeof RESULT_DELIVERY_MODES)[number]>();
    // @ts-expect-error a mode that is not one of the two
    const typo: DispatchRequest = { dispatchId: 'd-1', target: 't', task: {}, resultDelivery: 'injct' };
    expect(RESULT_DELIVERY_MODES).toEqual(['inject', 'after_turn']);
    expect(RESULT_DELIVERY_MODES).not.toContain(typo.resultDelivery);
  });

  it("type the view's run result as the README's origin reads it (was: unknown, so `execution.result?.summary` failed strict TypeScript)", () => {
    expectTypeOf<NonNullable<DispatchView['execution']['result']>['summary']>().toEqualTypeOf<string | undefined>();
    const view: DispatchView = { dispatchId: 'd-1', origin: 'o', target: 't', phase: 'submitted', attempt: 1, runId: 'r-1', execution: { status: 'completed', result: { summary: 'report written' } }, evidence: { outcome: 'handled' }, ownerDelivery: { state: 'confirmed' }, receipts: [] };
    expect(view.execution.result?.summary).toBe('report written');
  });
});
