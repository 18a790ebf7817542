import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import type { LedgerStore } from '../ledger/port.js';

/**
 * The nudge a write that freed a slot gives the monitor (CONTRACT §11: "at once when the freeing write
 * happens in the API"): an asynchronous invoke of the monitor function with `{ "admit": target }` —
 * Lambda answers at once and the admission runs there, so the caller (a target's callback) is answered
 * without waiting for the next submission. Locally the invoke reaches the local Lambda, which hosts the
 * monitor too. If the nudge fails, the monitor's next tick admits instead.
 */
export function lambdaAdmissionNudge(lambda: LambdaClient, functionName: string): (target: string) => Promise<void> {
  return async (target) => {
    await lambda.send(new InvokeCommand({ FunctionName: functionName, InvocationType: 'Event', Payload: new TextEncoder().encode(JSON.stringify({ admit: target })) }));
  };
}

/** The monitor's admission event (the nudge's payload). */
export const isAdmitEvent = (event: unknown): event is { readonly admit: string } =>
  typeof event === 'object' && event !== null && typeof (event as { admit?: unknown }).admit === 'string' && /^[a-z0-9-]{1,64}$/.test((event as { admit: string }).admit);

/**
 * The store, nudging admission after every committed write that gave a slot back — whichever use case
 * made it (a final event, a confirmed cancel, a supersede, a slot release): derived from the write, never
 * remembered by a caller. `onError`: a nudge that failed (the next tick admits).
 */
export function nudgingAdmission<S extends LedgerStore>(store: S, nudge: (target: string) => Promise<void>, onError: (error: unknown) => void = () => undefined): S {
  return new Proxy(store, {
    get(target, property, receiver) {
      if (property === 'commit') {
        const commit: LedgerStore['commit'] = async (from, next, ended) => {
          const written = await target.commit(from, next, ended);
          // Only when someone waits: a freed slot nobody is waiting for costs no invocation.
          if (written.kind === 'committed' && from.state.slot && !next.slot) {
            await target
              .countWaiting(next.target, 1)
              .then((waiting) => (waiting > 0 ? nudge(next.target) : undefined))
              .catch(onError);
          }
          return written;
        };
        return commit;
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
