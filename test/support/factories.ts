import type { OperatorReceiptBody } from '../../shared/dispatch/receipts.js';
import type { NewDispatch } from '../../shared/dispatch/transitions/lifecycle.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import type { IntakeDeps } from '../../shared/usecases/intake.js';
import type { DispatchWorkDeps } from '../../shared/ledger/port.js';

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

/**
 * What the intake (and the monitor and API, which need a subset) is given in a use-case test: the
 * store, blobs, target and clock in hand; the local platform's open principal mode and a short claim.
 */
export function intakeDepsFactory(given: Pick<IntakeDeps, 'store' | 'blobs' | 'targetFor' | 'now'> & Partial<IntakeDeps>): IntakeDeps {
  return {
    principals: { resolve: async () => undefined },
    principalMode: 'open',
    callbackUrl: 'http://127.0.0.1:9',
    retryPolicy: DEFAULT_RETRY_POLICY,
    claimSeconds: 60,
    ...given,
  };
}

/** The same object with some methods replaced: a store that crashes, races or forgets at a chosen call. */
export function overriding<T extends object>(base: T, overrides: Partial<T>): T {
  return Object.assign(Object.create(base) as T, overrides);
}

/**
 * The dispatch-work fields of a dependency set that must never call a target (a read route, a quiet
 * monitor tick, the benches): calling one throws `why`.
 */
export function noTargetWork(now: () => Date, why: string, blobs: DispatchWorkDeps['blobs']): Omit<DispatchWorkDeps, 'store'> {
  return {
    blobs,
    targetFor: () => {
      throw new Error(why);
    },
    callbackUrl: 'http://127.0.0.1:9',
    retryPolicy: DEFAULT_RETRY_POLICY,
    now,
    claimSeconds: 60,
  };
}
