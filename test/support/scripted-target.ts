import type { SubmitRequest, TargetPort } from '../../shared/targets/port.js';
import type { ApprovalOutcome, LookupOutcome, SubmitOutcome } from '../../shared/dispatch/target-answers.js';

/** A target whose submission answer the test sets; it counts calls per Idempotency-Key. */
export class ScriptedTarget implements TargetPort {
  answer: (request: SubmitRequest) => SubmitOutcome = (request) => ({ kind: 'accepted', runId: `r-${request.attempt}`, status: 'running', requestId: `q-${request.attempt}` });
  readonly submissions: SubmitRequest[] = [];
  onSubmit: (() => Promise<void>) | undefined;
  async submit(request: SubmitRequest): Promise<SubmitOutcome> {
    this.submissions.push(request);
    await this.onSubmit?.();
    return this.answer(request);
  }
  lookups = 0;
  async lookup(): Promise<LookupOutcome> {
    this.lookups += 1;
    return { kind: 'unavailable', reason: 'HTTP 503' };
  }
  onDecide: (() => Promise<void>) | undefined;
  async decideApproval(_runId: string, approvalId: string, decision: 'approve' | 'cancel'): Promise<ApprovalOutcome> {
    await this.onDecide?.();
    return { kind: 'decided', approvalId, decision };
  }
  async cancel() {
    return { kind: 'cancelled' as const, status: 'cancelled' as const };
  }
}
