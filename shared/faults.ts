/**
 * The ledger's one fault-injection point, for the census (`npm run census`): crashes at the step
 * boundaries where a process can die in production, and DynamoDB throttling and timeouts through SDK
 * middleware. Inert unless a process installs an injector with `installFaults` — only the local
 * platform's census and tests do; nothing is read from a message or the environment. In the deployed
 * bundles it is compiled out: `infra/bundling.ts` defines `DISPATCH_LEDGER_DEPLOYED_BUNDLE`, so every
 * check below folds to an early return and the injector code is dropped (test/infra/bundles.test.ts).
 */

/** Where a process may die between two steps whose effects are not atomic together. */
export const CRASH_POINTS = [
  // The accepted message (and its claim) is written; nothing submitted yet.
  'intake.after_claim',
  // The target accepted the submission; the ledger has not recorded it.
  'submit.after_target_accepted',
  // A slot of the target's limit is taken (with the claim); nothing submitted yet (CONTRACT §11).
  'submit.after_slot_taken',
  // The ledger recorded the message's effect; SQS has not been told (the message is redelivered).
  'intake.before_ack',
  // The events are on the bus; the stream batch is not checkpointed (it is delivered again).
  'publisher.before_checkpoint',
  // The monitor has the target's answer; it has not written what it means.
  'monitor.after_lookup',
] as const;
export type CrashPoint = (typeof CRASH_POINTS)[number];

/** Faults of the DynamoDB client: a throttle refused before the request is sent; a timeout after it was applied (the answer lost). */
export const SDK_FAULTS = ['dynamodb_throttle', 'dynamodb_timeout'] as const;
export type SdkFault = (typeof SDK_FAULTS)[number];

/**
 * The table unavailable for the items of one partition key (every call that names it fails as a
 * server error): a message the intake cannot take in, redelivered until SQS moves it to the DLQ.
 * Asked once per key a call names, not at a rate: the injector decides which keys.
 */
export const TABLE_UNAVAILABLE = 'dynamodb_unavailable';

export type ProductFault = CrashPoint | SdkFault | typeof TABLE_UNAVAILABLE;

export interface FaultInjector {
  /** Whether `fault` fires now; `subject` is the dispatch id at a crash point, the command name for an SDK fault, the partition key for TABLE_UNAVAILABLE. */
  fires(fault: ProductFault, subject: string): boolean;
}

/** What an injected crash throws: the invocation ends there, unfinished, as if the process died. */
export class InjectedCrash extends Error {
  override readonly name = 'InjectedCrash';
  constructor(readonly point: CrashPoint, readonly subject: string) {
    super(`injected crash at ${point} (${subject})`);
  }
}

// Replaced by `true` in the deployed bundles (esbuild `define`); undeclared (typeof "undefined") elsewhere.
declare const DISPATCH_LEDGER_DEPLOYED_BUNDLE: boolean | undefined;

let installed: FaultInjector | undefined;

/** Turns fault injection on for this process; the returned function turns it off again. */
export function installFaults(injector: FaultInjector): () => void {
  if (typeof DISPATCH_LEDGER_DEPLOYED_BUNDLE !== 'undefined') return () => undefined;
  installed = injector;
  return () => {
    if (installed === injector) installed = undefined;
  };
}

/**
 * Whether `error` is an injected crash: a handler that catches errors per item (a batch processor)
 * rethrows it so the whole invocation ends unfinished, as a process that died would. Always false in
 * the deployed bundles.
 */
export function isInjectedCrash(error: unknown): boolean {
  // One expression, so the deployed define folds it to `false` and drops the class with it.
  return typeof DISPATCH_LEDGER_DEPLOYED_BUNDLE === 'undefined' && error instanceof InjectedCrash;
}

/** A step boundary: throws `InjectedCrash` when the installed injector says so, else nothing. */
export function crashPoint(point: CrashPoint, subject: string): void {
  if (typeof DISPATCH_LEDGER_DEPLOYED_BUNDLE !== 'undefined') return;
  if (installed?.fires(point, subject)) throw new InjectedCrash(point, subject);
}

/**
 * The DynamoDB fault for one attempt of a command, if one fires: `before_send` may answer a throttle
 * (refused before it is sent, retried by the SDK as a real one would be), `after_apply` a timeout (the
 * request applied, its answer lost, so the SDK's retry meets its own write). The middleware that asks
 * lives with the client (shared/adapters/wiring.ts), inside the SDK's retry loop.
 */
export function dynamoDbFault(phase: 'before_send' | 'after_apply', command: string): Error | undefined {
  if (typeof DISPATCH_LEDGER_DEPLOYED_BUNDLE !== 'undefined') return undefined;
  const [fault, name, message] =
    phase === 'before_send'
      ? (['dynamodb_throttle', 'ThrottlingException', `injected throttle (${command})`] as const)
      : (['dynamodb_timeout', 'TimeoutError', `injected timeout after the request was applied (${command})`] as const);
  if (!installed?.fires(fault, command)) return undefined;
  // Classified by name, as the SDK's retry strategy classifies the real errors.
  return Object.assign(new Error(message), { name, $fault: 'client', $metadata: {} });
}

/**
 * TABLE_UNAVAILABLE for one attempt of a command: the server error of the first partition key it
 * names that the injector holds unavailable (`partitionKeys` is read only when an injector is installed).
 */
export function dynamoDbUnavailable(command: string, partitionKeys: () => readonly string[]): Error | undefined {
  if (typeof DISPATCH_LEDGER_DEPLOYED_BUNDLE !== 'undefined') return undefined;
  const injector = installed;
  if (!injector) return undefined;
  const key = partitionKeys().find((pk) => injector.fires(TABLE_UNAVAILABLE, pk));
  if (key === undefined) return undefined;
  return Object.assign(new Error(`injected unavailability of the table for ${key} (${command})`), { name: 'InternalServerError', $fault: 'server', $metadata: { httpStatusCode: 500 } });
}
