import type { LifecycleUsage } from './types.js';

/**
 * Public on-demand unit prices, US East (N. Virginia), as listed on each service's pricing page
 * (checked 2026-12-01). First-tier prices, no free tier: the bench compares designs, not bills.
 * Change a figure here and `npm run bench` recomputes every cost in bench/results.json and
 * docs/performance.md.
 */
export const PRICES = {
  source: 'AWS and Temporal public pricing pages, us-east-1, first tier, without free tiers (checked 2026-12-01)',
  dynamodb: {
    /** On-demand, Standard table class: per write request unit (1 KB; table and each GSI write). https://aws.amazon.com/dynamodb/pricing/on-demand/ */
    perWriteUnit: 0.625 / 1e6,
    /** Per read request unit (4 KB strongly consistent; half for eventually consistent). */
    perReadUnit: 0.125 / 1e6,
    /** Stream reads by a Lambda trigger carry no DynamoDB Streams charge. */
    streamReadsByLambda: 0,
  },
  /** Standard queue, per request (64 KB chunk). https://aws.amazon.com/sqs/pricing/ */
  sqs: { perRequest: 0.4 / 1e6 },
  /** arm64: per request and per GB-second (1 ms granularity). https://aws.amazon.com/lambda/pricing/ */
  lambda: { perRequest: 0.2 / 1e6, perGbSecond: 0.0000133334 },
  /** Custom events put on a bus, per 64 KB chunk. https://aws.amazon.com/eventbridge/pricing/ */
  eventBridge: { perEvent: 1.0 / 1e6 },
  /** Lambda function URLs: no charge beyond the invocation. https://aws.amazon.com/lambda/pricing/ */
  functionUrl: { perRequest: 0 },
  /** API Gateway HTTP API, for comparison only (the ledger uses function URLs). https://aws.amazon.com/api-gateway/pricing/ */
  httpApi: { perRequest: 1.0 / 1e6 },
  /** S3 Standard requests. https://aws.amazon.com/s3/pricing/ */
  s3: { perPutRequest: 0.005 / 1000, perGetRequest: 0.0004 / 1000 },
  /** Per API call (secrets themselves are $0.40 a month each: fixed, not per lifecycle). https://aws.amazon.com/secrets-manager/pricing/ */
  secretsManager: { perCall: 0.05 / 10_000 },
  /** Standard workflows, per state transition. https://aws.amazon.com/step-functions/pricing/ */
  stepFunctionsStandard: { perTransition: 0.025 / 1000 },
  /** Temporal Cloud, per action: $50 per million at the entry tier, $25 at volume. https://temporal.io/pricing */
  temporalCloud: { perActionHigh: 50 / 1e6, perActionLow: 25 / 1e6 },
} as const;

/**
 * The round-trip latencies the duration model (bench/duration-model.ts) prices Lambda with: a handler's
 * billed time is its own CPU plus the round trips it waits on, each at the latency below. They are fixed
 * here, before anything is measured, so the price does not move with the machine the bench runs on (local
 * engines answer in well under a millisecond). Where AWS publishes a figure it is the source; where it
 * publishes none the figure is assumed, and says so.
 */
export const ROUND_TRIPS = {
  /** A DynamoDB item call. AWS's knowledge center puts the average latency of GetItem, PutItem and the other atomic operations in single-digit milliseconds: 5 ms taken, for queries and transactions too. https://repost.aws/knowledge-center/dynamodb-high-latency */
  dynamodb: { ms: 5, source: 'https://repost.aws/knowledge-center/dynamodb-high-latency (average single-digit ms for GetItem/PutItem; 5 ms taken)' },
  /** An S3 GET/HEAD/PUT of a small object. AWS's S3 performance guide gives median latencies in the tens of milliseconds for requests under 512 KB: 30 ms taken. */
  s3: { ms: 30, source: 'https://docs.aws.amazon.com/whitepapers/latest/s3-optimizing-performance-best-practices/timeouts-and-retries-for-latency-sensitive-applications.html (small requests: median tens of ms; 30 ms taken)' },
  /** One PutEvents call (up to 10 entries). AWS publishes no latency for the call itself: assumed. */
  eventBridge: { ms: 20, source: 'assumed: https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevents.html publishes no latency for PutEvents' },
  /** One SQS call made by a handler. AWS publishes no latency: assumed. No handler of the lifecycle calls SQS (the event source mapping receives and deletes outside the function's billed time). */
  sqs: { ms: 10, source: 'assumed: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/standard-queues.html publishes no latency' },
  /** A target's `POST /runs` (CONTRACT §8), or a lookup of a run: the target's own time, assumed for a warm worker behind a function URL that records its run. https://docs.aws.amazon.com/lambda/latest/dg/urls-invocation.html */
  target: { ms: 50, source: 'assumed: a warm worker behind a Lambda function URL recording its run (https://docs.aws.amazon.com/lambda/latest/dg/urls-invocation.html)' },
} as const;

export type RoundTripKind = keyof typeof ROUND_TRIPS;

/** Dollars per lifecycle, per service. */
export interface CostBreakdown {
  readonly dynamodb: number;
  readonly sqs: number;
  readonly lambda: number;
  readonly eventBridge: number;
  readonly s3: number;
  readonly secretsManager: number;
  readonly functionUrl: number;
  readonly total: number;
}

export function costOf(usage: LifecycleUsage): CostBreakdown {
  const parts = {
    dynamodb: usage.dynamodb.writeUnits * PRICES.dynamodb.perWriteUnit + usage.dynamodb.readUnits * PRICES.dynamodb.perReadUnit,
    sqs: usage.sqsRequests * PRICES.sqs.perRequest,
    lambda: usage.lambda.invocations * PRICES.lambda.perRequest + usage.lambda.gbSeconds * PRICES.lambda.perGbSecond,
    eventBridge: usage.eventBridgeEvents * PRICES.eventBridge.perEvent,
    s3: usage.s3.putRequests * PRICES.s3.perPutRequest + usage.s3.getRequests * PRICES.s3.perGetRequest,
    secretsManager: usage.secretsManagerCalls * PRICES.secretsManager.perCall,
    functionUrl: usage.functionUrlRequests * PRICES.functionUrl.perRequest,
  };
  return { ...parts, total: Object.values(parts).reduce((sum, part) => sum + part, 0) };
}

/** Dollars per million lifecycles, rounded to cents. */
export const perMillion = (dollarsPerLifecycle: number): number => Math.round(dollarsPerLifecycle * 1e6 * 100) / 100;

/**
 * The same lifecycle on the peers, from their unit prices (a model: the counting is explained with
 * each figure, and the Lambda work the peer would still invoke is priced like ours).
 */
export function peerModels(taskLambda: { readonly invocations: number; readonly gbSeconds: number }): {
  readonly stepFunctionsStandard: { readonly transitions: number; readonly usdPerMillion: number; readonly counting: string };
  readonly temporalCloud: { readonly actions: number; readonly usdPerMillionLow: number; readonly usdPerMillionHigh: number; readonly counting: string };
} {
  const lambda = taskLambda.invocations * PRICES.lambda.perRequest + taskLambda.gbSeconds * PRICES.lambda.perGbSecond;
  // Submit (Task), wait for the run with heartbeats (.waitForTaskToken; SendTaskHeartbeat is not a
  // transition), check evidence (Task), wait for the operator receipt (.waitForTaskToken): 4 states entered.
  const transitions = 4;
  // Start workflow, schedule the submit activity, 2 heartbeats, the completion signal, the evidence
  // activity, the receipt signal: 7 billable actions.
  const actions = 7;
  return {
    stepFunctionsStandard: {
      transitions,
      usdPerMillion: perMillion(transitions * PRICES.stepFunctionsStandard.perTransition + lambda),
      counting: 'Standard workflow: Submit task → wait for the run (task token; heartbeats are API calls, not transitions) → CheckEvidence task → wait for the receipt (task token) = 4 transitions at $25/M, plus the task Lambdas priced like ours.',
    },
    temporalCloud: {
      actions,
      usdPerMillionLow: perMillion(actions * PRICES.temporalCloud.perActionLow + lambda),
      usdPerMillionHigh: perMillion(actions * PRICES.temporalCloud.perActionHigh + lambda),
      counting: 'Workflow start, submit activity, 2 activity heartbeats, completion signal, evidence activity, receipt signal = 7 actions at $25–50/M, plus the worker compute priced like our Lambdas.',
    },
  };
}
