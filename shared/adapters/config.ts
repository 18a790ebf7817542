import { inboxShardCount } from './ledger-keys.js';
import { DEFAULT_RETRY_POLICY, parseRetryDelays, type RetryPolicy } from '../dispatch/retry.js';
import { PARENT_WAIT_SECONDS } from '../dispatch/state.js';
import type { PrincipalMode } from '../principals/principals.js';
import type { StaticRegistry } from './static-registry.js';
import type { AddressPolicy } from './target-address.js';

/** Defined (true) by the deployed bundles' esbuild options (infra/bundling.ts): what is local-only is compiled out. */
declare const DISPATCH_LEDGER_DEPLOYED_BUNDLE: boolean | undefined;

/** The functions' configuration, read once at cold start; a missing required variable fails the init. */
export interface LedgerConfig {
  readonly tableName: string;
  /** S3 bucket for evidence and for spilled payloads and bodies. */
  readonly bucketName: string;
  /**
   * The ledger API's base URL, given to targets as `callbackUrl`. Unset only in the API function,
   * which cannot be told its own function URL at deploy time and takes it from each request.
   */
  readonly apiBaseUrl: string;
  readonly principalMode: PrincipalMode;
  readonly retryPolicy: RetryPolicy;
  readonly claimSeconds: number;
  /** How long a child waits for its parent to be recorded (`PARENT_WAIT_SECONDS`, 1..300, default 300). */
  readonly parentWaitSeconds: number;
  readonly retentionSeconds: number;
  /** Timeout of each call to a target. */
  readonly targetTimeoutMs: number;
  /** The monitor's schedule period (the stack sets it from the schedule; locally the tick). */
  readonly monitorPeriodSeconds: number;
  /** Deploy-time principals and targets (`LEDGER_REGISTRY`). */
  readonly registry: StaticRegistry;
  /**
   * How long a target registration read from the table is reused, and a principal intake resolved from
   * it (`TARGET_CACHE_SECONDS`, default 30).
   */
  readonly targetCacheMs: number;
  /** How long a target's secret read from Secrets Manager is reused (`SECRET_CACHE_SECONDS`, default 300): a rotated secret is used within it. */
  readonly secretCacheMs: number;
  /**
   * Where targets may live (CONTRACT §8 v2): `public-only` in AWS (`enforce`), `allow-loopback` on the
   * local platform (`open`), whose demo agent listens on http://127.0.0.1.
   */
  readonly targetAddressPolicy: AddressPolicy;
  /**
   * The name prefix of the secrets targets registered at run time may name (`TARGET_SECRET_PREFIX`,
   * `dispatch-ledger/{stackName}/targets/`, set by the stack); empty when unset.
   */
  readonly targetSecretPrefix: string;
  /** Partitions of each origin's results inbox (`INBOX_SHARDS`, default 1; CONTRACT §10). */
  readonly inboxShards: number;
  /** The monitor function a write that freed a slot nudges (`LEDGER_ADMISSION_FUNCTION`; CONTRACT §11); empty: the tick admits. */
  readonly admissionFunction: string;
  /** The bus the publisher puts events on (`EVENT_BUS_NAME`); empty where no function publishes. */
  readonly eventBusName: string;
  /** What the deployment publishes (`PUBLISHED_EVENTS`, the construct's `events` prop; CONTRACT §3 v2); undefined: the default profile. */
  readonly publishedEvents: string | undefined;
}

/**
 * What a function needs set: every function reads the one config, and a variable it does not use may be
 * absent (the stack sets each function only what it uses).
 */
export interface ReadConfigOptions {
  /** The API function learns its URL from each request: `API_BASE_URL` may be absent there. @default true */
  readonly requireApiBaseUrl?: boolean;
  /** The bucket (`EVIDENCE_BUCKET`): the failures and publisher functions read no object. @default true */
  readonly requireBucket?: boolean;
  /** The bus (`EVENT_BUS_NAME`): the publisher's alone. @default false */
  readonly requireEventBus?: boolean;
  /**
   * How `LEDGER_REGISTRY` is read (`parseStaticRegistry`), for a function that resolves principals or
   * targets from it; without it the registry is empty and the variable unread. Passed, not imported
   * here, so the functions that need no registry (the publisher, retention) carry no zod.
   */
  readonly parseRegistry?: ((json: string, policy: AddressPolicy) => StaticRegistry) | undefined;
}

const NO_REGISTRY: StaticRegistry = { principals: new Map(), targets: new Map() };

/**
 * A function's settings as the stack sets them, by variable name: `process.env` in Lambda, a plain
 * record on the local platform (which hands each function its own, never through `process.env`).
 */
export type LedgerSettings = Readonly<Record<string, string | undefined>>;

/** Reads named settings as Powertools' env helpers read variables: trimmed, a default when unset, a clear error when required. */
function settingsReader(settings: LedgerSettings) {
  const text = (key: string, defaultValue?: string): string => {
    const value = settings[key];
    if (value !== undefined) return value.trim();
    if (defaultValue !== undefined) return defaultValue;
    throw new Error(`${key} is not set`);
  };
  const number = (key: string, defaultValue: number): number => {
    const value = Number(text(key, String(defaultValue)));
    if (Number.isNaN(value)) throw new TypeError(`${key} must be a number`);
    return value;
  };
  return { text, number, optionalText: (key: string, required: boolean): string => (required ? text(key) : text(key, '')) };
}

/** Every setting `ledgerConfigFrom` reads: the variables the stack may set on a function. */
export const LEDGER_SETTINGS: readonly string[] = [
  'PRINCIPAL_MODE',
  'LOCAL_TARGETS_ON_LOOPBACK',
  'SUBMIT_RETRY_DELAYS_SECONDS',
  'TARGET_TIMEOUT_MS',
  'LEDGER_TABLE_NAME',
  'EVIDENCE_BUCKET',
  'API_BASE_URL',
  'PARENT_WAIT_SECONDS',
  'CLAIM_SECONDS',
  'RETENTION_DAYS',
  'MONITOR_PERIOD_SECONDS',
  'LEDGER_REGISTRY',
  'TARGET_CACHE_SECONDS',
  'SECRET_CACHE_SECONDS',
  'TARGET_SECRET_PREFIX',
  'LEDGER_ADMISSION_FUNCTION',
  'INBOX_SHARDS',
  'EVENT_BUS_NAME',
  'PUBLISHED_EVENTS',
];

/** The config of a function in AWS: its environment, read once at cold start. */
export function readLedgerConfig(options: ReadConfigOptions = {}): LedgerConfig {
  return ledgerConfigFrom(process.env, options);
}

/** The config from a function's settings (`readLedgerConfig` passes `process.env`; the local platform its own record). */
export function ledgerConfigFrom(settings: LedgerSettings, options: ReadConfigOptions = {}): LedgerConfig {
  const { text, number, optionalText } = settingsReader(settings);
  const principalMode = text('PRINCIPAL_MODE', 'enforce');
  if (principalMode !== 'open' && principalMode !== 'enforce') {
    throw new RangeError(`PRINCIPAL_MODE must be "open" or "enforce", got "${principalMode}"`);
  }
  // Derived from the mode rather than set on its own: an AWS deployment cannot be configured into
  // reaching loopback or metadata addresses.
  // The local platform's `--sigv4` mode runs the API enforcing principals while its demo agent listens on
  // loopback: `LOCAL_TARGETS_ON_LOOPBACK` says so, and it is compiled out of every deployed bundle.
  const loopbackForLocal = typeof DISPATCH_LEDGER_DEPLOYED_BUNDLE === 'undefined' && text('LOCAL_TARGETS_ON_LOOPBACK', '') === 'true';
  const targetAddressPolicy: AddressPolicy = principalMode === 'open' || loopbackForLocal ? 'allow-loopback' : 'public-only';
  const delays = text('SUBMIT_RETRY_DELAYS_SECONDS', '');
  const targetTimeoutMs = number('TARGET_TIMEOUT_MS', 10_000);
  return {
    tableName: text('LEDGER_TABLE_NAME'),
    bucketName: optionalText('EVIDENCE_BUCKET', options.requireBucket !== false),
    // A function URL ends in '/' (`https://…lambda-url.<region>.on.aws/`), as the stack sets it: kept, it
    // made every callbackUrl and taskRef `…on.aws//dispatches/…`, which no route matches.
    apiBaseUrl: optionalText('API_BASE_URL', options.requireApiBaseUrl !== false).replace(/\/+$/, ''),
    principalMode,
    retryPolicy: delays ? parseRetryDelays(delays) : DEFAULT_RETRY_POLICY,
    // A claim must outlast the target call it covers, or an overlapping tick (or a duplicate
    // delivery) takes the dispatch over mid-call and the two keep voiding each other's writes.
    // CONTRACT §1 V3: held for its parent up to 300 s; a deployment (or the census) may hold it less, never more.
    parentWaitSeconds: Math.min(PARENT_WAIT_SECONDS, Math.max(1, number('PARENT_WAIT_SECONDS', PARENT_WAIT_SECONDS))),
    claimSeconds: Math.max(number('CLAIM_SECONDS', 60), Math.ceil((2 * targetTimeoutMs) / 1000)),
    retentionSeconds: number('RETENTION_DAYS', 90) * 86_400,
    targetTimeoutMs,
    monitorPeriodSeconds: number('MONITOR_PERIOD_SECONDS', 60),
    registry: options.parseRegistry ? options.parseRegistry(text('LEDGER_REGISTRY', ''), targetAddressPolicy) : NO_REGISTRY,
    targetCacheMs: number('TARGET_CACHE_SECONDS', 30) * 1000,
    secretCacheMs: number('SECRET_CACHE_SECONDS', 300) * 1000,
    targetAddressPolicy,
    targetSecretPrefix: text('TARGET_SECRET_PREFIX', ''),
    admissionFunction: text('LEDGER_ADMISSION_FUNCTION', ''),
    inboxShards: inboxShardCount(number('INBOX_SHARDS', 1)),
    eventBusName: optionalText('EVENT_BUS_NAME', options.requireEventBus === true),
    publishedEvents: text('PUBLISHED_EVENTS', '') || undefined,
  };
}
