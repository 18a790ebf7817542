import type { OperatorReceiptBody } from '../../shared/dispatch/receipts.js';
import type { NewDispatch } from '../../shared/dispatch/transitions.js';

/** The clock the domain tests stand at. */
export const WRITTEN_AT = '2026-03-01T11:59:59.000Z';
export const NOW = new Date('2026-03-01T12:00:00.000Z');

/** A new dispatch as intake hands it to the transitions: defaults of CONTRACT §1. */
export function newDispatchFactory(overrides: Partial<NewDispatch> = {}): NewDispatch {
  return {
    dispatchId: 'd-2026-0001',
    origin: 'planner',
    target: 'demo-agent',
    hop: 0,
    maxHops: 4,
    parentDispatchId: null,
    deliveryMode: 'callback',
    timeouts: { stallAfterSeconds: 600, approvalWaitSeconds: 1800, deliveryGraceSeconds: 300 },
    writtenAt: WRITTEN_AT,
    ...overrides,
  };
}

/** A valid operator receipt body (CONTRACT §5): an acceptance of run r-1 unless overridden. */
export function operatorReceiptBodyFactory(overrides: Partial<OperatorReceiptBody> = {}): OperatorReceiptBody {
  return { receiptId: 'rc-1', runId: 'r-1', kind: 'artifact_acceptance', state: 'accepted', verifiedBy: 'alice@ops', ...overrides };
}
