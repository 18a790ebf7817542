import type { LocalEndpoints } from '../local/clients.js';

/**
 * What every benchmark module gets from `bench/run.ts`: the real local engines, started once for the
 * whole run (DynamoDB Local, fauxqs for SQS and S3, moto for EventBridge and Secrets Manager), all on
 * 127.0.0.1. A module creates its own uniquely named resources on them and leaves them behind (the
 * engines are stopped at the end of the run).
 */
export interface BenchContext {
  readonly endpoints: LocalEndpoints;
  /** Progress lines for people (stderr); results go in the returned object, never in logs. */
  readonly log: (line: string) => void;
  /** A name no other benchmark uses. */
  readonly uniqueName: (prefix: string) => string;
  /** `--quick`: smaller sizes for a smoke run of the bench itself (results are not comparable). */
  readonly quick: boolean;
  /** The local engines' process ids (`dynamodbLocal`, `fauxqs`, `moto`), where the bench started them: to read their CPU time. */
  readonly enginePids?: Readonly<Record<string, number>>;
}

/** min / median / max of repeated measurements. */
export interface Spread {
  readonly min: number;
  readonly median: number;
  readonly max: number;
}

export function spreadOf(samples: readonly number[]): Spread {
  if (samples.length === 0) throw new RangeError('no samples');
  const sorted = [...samples].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  const median = sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
  return { min: sorted[0] as number, median, max: sorted[sorted.length - 1] as number };
}

/**
 * What one dispatch lifecycle used, per AWS service: counted from SDK calls (middleware on the
 * clients) and from DynamoDB's consumed capacity (`bench/capacity-units.ts`, which models
 * failed conditional writes and transactions per AWS's billing rules). `bench/prices.ts` prices it.
 */
export interface LifecycleUsage {
  readonly dynamodb: { readonly requests: number; readonly readUnits: number; readonly writeUnits: number; readonly failedConditions: number };
  /** SQS requests, each ≤ 64 KB (a batch of 10 small messages is one request). */
  readonly sqsRequests: number;
  readonly lambda: {
    /** Invocations attributable to one lifecycle (a batch of 10 messages is 0.1 each). */
    readonly invocations: number;
    /** Measured handler time × configured memory (GB), attributable to one lifecycle. */
    readonly gbSeconds: number;
  };
  /** Custom events put on an EventBridge bus. */
  readonly eventBridgeEvents: number;
  /** S3 requests: `put` = PUT/COPY/POST/LIST tier, `get` = GET/HEAD tier. */
  readonly s3: { readonly putRequests: number; readonly getRequests: number };
  readonly secretsManagerCalls: number;
  /** Requests through Lambda function URLs (no charge beyond the invocation, listed for clarity). */
  readonly functionUrlRequests: number;
}

/**
 * The `p`th percentile of `samples` by the nearest-rank method: the smallest sample with at least p % of
 * the samples at or below it (p50 of 1..100 is 50, p99 is 99; p99 of 10 samples is the largest).
 */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) throw new RangeError('no samples');
  if (!(p > 0 && p <= 100)) throw new RangeError(`percentile ${p} is not in (0, 100]`);
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.ceil((p / 100) * sorted.length) - 1] as number;
}
