import { describe, expect, expectTypeOf, it } from 'vitest';
import type { DispatchRequest, LedgerClient } from '@dispatch-ledger/client';
import type { DispatchView } from '@dispatch-ledger/protocol/answers';
import { ATTENTION_KINDS, RESULT_DELIVERY_MODES, RESULT_STATES } from '@dispatch-ledger/protocol';

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

  it("type a list's query from the protocol's schema, so a kind or a state that is none does not compile (was: any string, refused by the ledger with a 400)", () => {
    type AttentionPage = Parameters<LedgerClient['operator']['attention']['page']>[0];
    type InboxPage = Parameters<LedgerClient['inbox']['list']['page']>[0];
    expectTypeOf<NonNullable<NonNullable<AttentionPage>['kind']>>().toEqualTypeOf<(typeof ATTENTION_KINDS)[number] | 'at_capacity'>();
    expectTypeOf<NonNullable<NonNullable<InboxPage>['state']>>().toEqualTypeOf<(typeof RESULT_STATES)[number]>();
    // @ts-expect-error a state that is none of the inbox's
    const typo: InboxPage = { state: 'lost' };
    expect(RESULT_STATES).not.toContain(typo?.state);
  });
});
