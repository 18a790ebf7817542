import type { Duration, RemovalPolicy } from 'aws-cdk-lib';
import type { IGrantable, Role } from 'aws-cdk-lib/aws-iam';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { ISecret } from 'aws-cdk-lib/aws-secretsmanager';
import type { ITopic } from 'aws-cdk-lib/aws-sns';
import type { EventsProfile } from '../../shared/events/profile.js';

/*
 * What `DispatchLedger` takes: its props, the deploy-time targets' and the lambda targets' options and
 * the identities it registers — all of it public, as `@dispatch-ledger/cdk` exports this file whole.
 * The checks on them live with the construct (dispatch-ledger.ts).
 */

/** An `http` target registered at deploy time (CONTRACT §8); more can be registered later with `ledger registry`. */
export interface LedgerTargetProps {
  /** The name dispatches use in `target`. */
  readonly name: string;
  /** @default 'http' (a `manual` target is `LedgerManualTargetProps`) */
  readonly kind?: 'http';
  /**
   * Base URL of its `POST /runs` and `GET /runs/{runId}` endpoints: https, and not a loopback,
   * link-local, unspecified or metadata address (CONTRACT §8 v2; the functions check the address of
   * every connection again).
   */
  readonly baseUrl: string;
  /** The value of the auth header the target expects, read (and cached) by the functions. @default none */
  readonly authSecret?: ISecret;
  /**
   * At most this many of its runs submitted and not known to be over (CONTRACT §11), 1 to 10,000;
   * dispatches beyond it wait, admitted by priority and round-robin across origins. @default unlimited
   */
  readonly maxConcurrentRuns?: number;
}

/**
 * A `manual` target registered at deploy time (CONTRACT §13): work a person does by hand. Dispatches to
 * it are recorded and never submitted anywhere, so it has no base URL, secret or limit; people attest
 * what happened with `POST /dispatches/{id}/manual` (`ledger manual`).
 */
export interface LedgerManualTargetProps {
  readonly name: string;
  readonly kind: 'manual';
}

/** Options of `addLambdaTarget`. */
export interface LedgerLambdaTargetOptions {
  /**
   * The function's timeout, when it cannot be read from the function: one imported with
   * `Function.fromFunctionAttributes` and its `role` (a Role of this app, which registers it as the
   * target's caller). @default the function's own
   */
  readonly timeout?: Duration;
  /** At most this many of its runs submitted and not known to be over (CONTRACT §11), 1 to 10,000. @default unlimited */
  readonly maxConcurrentRuns?: number;
}

/** An IAM identity for the principal registry: a role of this app, or the unique id of an existing role or user. */
export type LedgerIdentity = Role | { readonly principalId: string; readonly grantable?: IGrantable };

export interface DispatchLedgerProps {
  /** Days a finished dispatch's records and evidence are kept (CONTRACT §7). @default 90 */
  readonly retentionDays?: number;
  /** What `cdk destroy` does to the table and buckets. @default RemovalPolicy.RETAIN */
  readonly removalPolicy?: RemovalPolicy;
  /**
   * Deletion protection of the ledger's tables and the lambda targets' run tables. With
   * `RemovalPolicy.DESTROY`, set it false too: a protected table cannot be deleted, so `cdk destroy`
   * (or removing a lambda target) fails at it. @default true
   */
  readonly deletionProtection?: boolean;
  /** Where alarms (and their recoveries) go. @default a new SNS topic */
  readonly alarmTopic?: ITopic;
  /** Targets registered at deploy time. @default none */
  readonly targets?: readonly (LedgerTargetProps | LedgerManualTargetProps)[];
  /** Monitor period, the resolution of stall and orphan detection. @default 1 minute */
  readonly monitorPeriod?: Duration;
  /** Timeout of each call to a target. @default 10 seconds */
  readonly targetTimeout?: Duration;
  /** @default 'dispatch-ledger' */
  readonly eventBusName?: string;
  /** Retention of the functions' logs. @default one month */
  readonly logRetention?: RetentionDays;
  /** Deliveries before an untakeable message moves to the DLQ: a whole number from 5 to 1,000. @default 5 */
  readonly maxReceiveCount?: number;
  /**
   * Partitions of each origin's results inbox (CONTRACT §10, §14), 1 to 32. One key takes an origin's
   * results up to ~250 a second (each writes its entry when made, moves it when claimed, removes it when
   * delivered: 4 units); an origin sending 5,000 dispatches a second with results by callback needs 32.
   * An empty 20 s long poll reads 5 units
   * with 1 shard and more with more. Raise it, never lower it, on a live stack. @default 1
   */
  readonly inboxShards?: number;
  /**
   * What is put on the bus (CONTRACT §3 v2): every detail-type, only those needing attention
   * (Blocked, Rejected, Failed, Stalled, Unobservable, Approval Wait Expired, Orphaned, Handled,
   * Recovered, Superseded, Cancelled, Result Dropped), or a list of detail-types. EventBridge bills
   * $1 per million events: `attention` publishes 1 event for a usual lifecycle where `all` publishes 4.
   * Unpublished changes are still in the API and the metrics (alarms never depend on the profile).
   * @default 'all'
   */
  readonly events?: EventsProfile;
}

/**
 * Secrets of targets registered at run time (`ledger registry target put --secret-id …`) live under
 * this name prefix, the stack's own (CONTRACT §8 v2): two ledgers in one account cannot read each
 * other's target secrets, and no ledger reads a secret outside its prefix.
 */
export const targetSecretPrefix = (stackName: string): string => `dispatch-ledger/${stackName}/targets/`;
