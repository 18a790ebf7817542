import type { RunStatus } from '@dispatch-ledger/protocol';

/**
 * What a target answers the ledger (CONTRACT §8), in the domain's words: the transitions read these.
 * The target port (shared/targets/port.ts) returns them; each adapter maps its runtime's answers here.
 */

export type TargetRunStatus = RunStatus;

export type SubmitOutcome =
  /** The target holds a run for this dispatch attempt. `requestId` is the proof of the submission call. */
  | { readonly kind: 'accepted'; readonly runId: string; readonly status: TargetRunStatus; readonly requestId: string }
  /** The target answered and refused the work (4xx other than 408/429 and 409 `in_progress`): retrying will not help. */
  | { readonly kind: 'rejected'; readonly httpStatus: number; readonly reason: string }
  /**
   * Not reachable, timed out, 5xx, 408/429, 409 `{"code":"in_progress"}` (the target is still creating
   * the run for this Idempotency-Key), an address the policy refuses, or an unreadable answer: worth
   * retrying later.
   */
  | { readonly kind: 'unavailable'; readonly reason: string };

export interface TargetRunView {
  readonly runId: string;
  readonly status: TargetRunStatus;
  /** A final run's own word for its status (CONTRACT V3 §2), when the target gave a valid one. */
  readonly nativeStatus?: string;
  /**
   * `bodyJson`: a final result's body as the target holds it, JSON text (a runtime's output, CONTRACT §17;
   * the body an http target's lookup answer or the Lambda kit's table carries): kept as the result's body
   * when it is within §10's bounds. Untrusted: nothing reads it but keepFoundBody.
   */
  readonly result?: { readonly summary?: string; readonly bodyJson?: string };
  readonly evidence?: readonly string[];
  readonly pendingApproval?: { readonly approvalId: string; readonly requestedAt?: string };
  /**
   * When a runtime that sends no heartbeats last moved, by its own record (a state machine's newest
   * history event, CONTRACT §17): a lookup that finds it younger than the stall window records it as
   * activity instead of a stall.
   */
  readonly lastActivityAt?: string;
  /**
   * The runtime ran this run again after it ended (a state machine's redrive, CONTRACT §17): how many
   * times, and when last — by its own record.
   */
  readonly redrive?: { readonly count: number; readonly at?: string };
}

export type LookupOutcome =
  | { readonly kind: 'found'; readonly run: TargetRunView }
  | { readonly kind: 'not_found' }
  | { readonly kind: 'unavailable'; readonly reason: string };

export type ApprovalOutcome =
  | { readonly kind: 'decided'; readonly approvalId: string; readonly decision: 'approve' | 'cancel' }
  /** The target says this approvalId is not the pending one (or the run is not waiting). */
  | { readonly kind: 'conflict'; readonly reason: string }
  | { readonly kind: 'not_found' }
  | { readonly kind: 'unavailable'; readonly reason: string };

export type CancelOutcome =
  | { readonly kind: 'cancelled'; readonly status: TargetRunStatus }
  /** The target learns of the cancel on its own (a Lambda worker, from its control record): its report will say. */
  | { readonly kind: 'requested'; readonly how: string }
  | { readonly kind: 'not_found' }
  | { readonly kind: 'unavailable'; readonly reason: string };
