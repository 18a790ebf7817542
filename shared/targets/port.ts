import type { ApprovalOutcome, CancelOutcome, LookupOutcome, SubmitOutcome, TargetRunStatus } from '../dispatch/target-answers.js';

/**
 * The target port: how the ledger talks to a runtime that executes work (CONTRACT §8).
 * Every call returns an outcome, never throws for a target's answer; only programming errors throw.
 */

/** Why nothing could be asked of a target no registration names (one wording wherever it is answered). */
export const notRegistered = (target: string): string => `target "${target}" is not registered`;

/**
 * Execution statuses a target may report (CONTRACT §2 `execution.status`, minus the ledger's own
 * `unknown`), and a final status's own word (CONTRACT V3 §2): declared once, in the protocol package.
 */
export { RUN_STATUSES as TARGET_RUN_STATUSES, NATIVE_STATUS, NATIVE_STATUS_RULE } from '@dispatch-ledger/protocol';
export interface SubmitRequest {
  readonly dispatchId: string;
  readonly attempt: number;
  readonly origin: string;
  readonly task: Readonly<Record<string, unknown>>;
  readonly expectedEvidence: readonly string[];
  /** The ledger API's base URL: the target posts run events and uploads evidence under it. */
  readonly callbackUrl: string;
  /** The dispatch's clocks, defaults resolved (CONTRACT §8 v2): how long silence may last before a stall, and so on. */
  readonly timeouts?: { readonly stallAfterSeconds: number; readonly approvalWaitSeconds: number; readonly deliveryGraceSeconds: number };
  /** The message's W3C trace context (CONTRACT §1 v2), forwarded to the target as the `traceparent` header. */
  readonly traceparent?: string;
}

/** One registered target, as the ledger talks to it. */
export interface TargetPort {
  submit(request: SubmitRequest): Promise<SubmitOutcome>;
  /** `submittedAt`: when the ledger's submission of this run was accepted (a target that cannot be asked judges silence by it). */
  lookup(runId: string, hints?: { readonly submittedAt?: string | undefined }): Promise<LookupOutcome>;
  /** `dispatchId`: the run's dispatch (a target that keeps what an approval waits on apart from the run reads it by it). */
  decideApproval(runId: string, approvalId: string, decision: 'approve' | 'cancel', dispatchId?: string): Promise<ApprovalOutcome>;
  cancel(runId: string): Promise<CancelOutcome>;
}

/** A target as registered: an agent runtime over HTTP, a Lambda worker, a Step Functions state machine, or a person (CONTRACT §8, §12, §13, §17). */
export type TargetRegistration = HttpTargetRegistration | LambdaTargetRegistration | StepFunctionsTargetRegistration | DurableTargetRegistration | ManualTargetRegistration;

/** An `http` target: name → base URL, and where its auth secret lives. */
export interface HttpTargetRegistration {
  readonly name: string;
  readonly kind: 'http';
  readonly baseUrl: string;
  /** Secrets Manager id (name or ARN) of the header value the target expects; none for open targets. */
  readonly secretRef?: string;
  /** CONTRACT §11: at most this many runs submitted and not known to be over (1..10,000; absent: unlimited). */
  readonly maxConcurrentRuns?: number;
}

/**
 * A `lambda` target (CONTRACT §12): invoked asynchronously with the submission body; the run id is
 * `{dispatchId}:{attempt}` and the invoke's request id the proof. Its runs are looked up in the worker
 * kit's run-state table (`LAMBDA_RUN_STATE` schema) and in the failures Lambda's on-failure destination
 * delivered; a run with neither past its timeout is unknown, never failed.
 */
export interface LambdaTargetRegistration {
  readonly name: string;
  readonly kind: 'lambda';
  readonly functionArn: string;
  /** The function's timeout: silence longer than this (and Lambda's own retries) with no record is unknown. */
  readonly timeoutSeconds: number;
  /** The worker kit's run-state table, when the function uses the kit's DynamoDB store. */
  readonly stateTable?: string;
  /** CONTRACT §11: at most this many runs submitted and not known to be over (1..10,000; absent: unlimited). */
  readonly maxConcurrentRuns?: number;
}

/**
 * A `stepfunctions` target (CONTRACT §17): a Standard state machine the ledger starts one execution of
 * per attempt, named from the dispatch and attempt (`executionNameOf`); the run id is the execution's
 * ARN. Registered through the CDK construct only (it grants the calls), like `lambda`.
 */
export interface StepFunctionsTargetRegistration {
  readonly name: string;
  readonly kind: 'stepfunctions';
  readonly stateMachineArn: string;
  /**
   * The unique id (`AROA…`) of the role the state machine runs as: an approval request on the approvals
   * queue is taken only from it (SQS's `SenderId` is that id and the session's name). None: refused.
   */
  readonly roleId?: string;
  /** CONTRACT §11: at most this many runs submitted and not known to be over (1..10,000; absent: unlimited). */
  readonly maxConcurrentRuns?: number;
}

/**
 * A `durable` target (CONTRACT §17): a Lambda durable function, by a qualified ARN (a version or an
 * alias). The ledger starts one durable execution per attempt with an asynchronous `Invoke` named from
 * the dispatch and attempt (`executionNameOf`, ≤ 64 chars); the run id is the durable execution's ARN
 * (up to 1,024 characters, with `/` in it). Registered through the CDK construct only, like `lambda`.
 */
export interface DurableTargetRegistration {
  readonly name: string;
  readonly kind: 'durable';
  /** The function's qualified ARN: `arn:aws:lambda:{region}:{account}:function:{name}:{version or alias}`. */
  readonly functionArn: string;
  /** CONTRACT §11: at most this many runs submitted and not known to be over (1..10,000; absent: unlimited). */
  readonly maxConcurrentRuns?: number;
}

/** A durable target's function ARN: qualified by a version (digits) or an alias — never unqualified. */
export const DURABLE_FUNCTION_ARN = /^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]{1,64}:[A-Za-z0-9_-]{1,128}$/;

/**
 * A `manual` target (CONTRACT §13, VALP's manual mode): work a person carries out by hand. The ledger
 * records a dispatch to it and never submits it anywhere — no base URL, no secret, no runs, no slots:
 * what happened is what people attest (`POST /dispatches/{id}/manual`), kept apart from runtime proof.
 */
export interface ManualTargetRegistration {
  readonly name: string;
  readonly kind: 'manual';
  /** Never set: nothing is submitted, so nothing is limited (declared so every registration can be asked). */
  readonly maxConcurrentRuns?: undefined;
}

/** Target kinds the ledger knows (CONTRACT §8, §12, §13, §17). */
export const TARGET_KINDS = ['http', 'lambda', 'stepfunctions', 'durable', 'manual'] as const satisfies readonly TargetRegistration['kind'][];

export const MAX_CONCURRENT_RUNS_LIMIT = 10_000;

/** The run id of a lambda target's run: the ledger names it, the kit keeps it. */
export const lambdaRunIdOf = (dispatchId: string, attempt: number): string => `${dispatchId}:${attempt}`;
export function parseLambdaRunId(runId: string): { readonly dispatchId: string; readonly attempt: number } | undefined {
  const match = /^([A-Za-z0-9._:-]{1,128}):([1-9]\d{0,8})$/.exec(runId);
  return match ? { dispatchId: match[1] as string, attempt: Number(match[2]) } : undefined;
}

/**
 * The worker kit's run-state item for a Lambda worker (one per run, key `runId`), as the kit's
 * DynamoDB store writes it and a lookup reads it: the kit's own word on its run.
 */
export interface LambdaRunState {
  readonly runId: string;
  readonly status: TargetRunStatus;
  readonly result?: { readonly summary?: string };
  readonly pendingApproval?: { readonly approvalId: string; readonly requestedAt?: string };
  /** The last event seq the kit sent for this run (kept across Lambda's retries). */
  readonly seq?: number;
  readonly updatedAt?: string;
}
