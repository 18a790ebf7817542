import { setTimeout as pause } from 'node:timers/promises';
import { CallbackError, type RunContext, type RunFunction, type RunOutput } from '@dispatch-ledger/worker';
import { largeResultBody } from './large-result.js';
import { planFor, type Plan } from './model.js';

/**
 * The demo agent's behaviours (CONTRACT §8 "The demo agent") as the worker kit's `run`: what each
 * `task.behavior` does once the kit has accepted the run and sent its first heartbeat. What a behaviour
 * does to the protocol itself — refusing a submission, a lookup that answers 404 or 503, a callback
 * that never leaves — is the layer in front of the kit (`server.ts`); the run only does the work.
 */

const SUMMARY_CHARS = 200;
/**
 * Every run takes at least this long before its work: short, so tests are fast, but real, so a run is
 * still open when its submission's answer arrives.
 */
const STEP_MS = 10;

/**
 * @example
 * const run = behaviorRun({ ended: (runId) => open.delete(runId) });
 * createWorker({ name: 'demo-agent', run });
 */
export function behaviorRun(hooks: { readonly ended: (runId: string) => void }): RunFunction {
  return async (task, ctx) => {
    try {
      const planned = planFor(task);
      // The layer in front refuses an unplannable task before the kit sees it; a resumed one is read again.
      if (planned.kind === 'invalid') throw new Error(planned.message);
      await pause(STEP_MS, undefined, { signal: ctx.signal });
      return await perform(planned.plan, typeof task['goal'] === 'string' ? task['goal'] : undefined, ctx);
    } finally {
      hooks.ended(ctx.runId);
    }
  };
}

async function perform(plan: Plan, goal: string | undefined, ctx: RunContext): Promise<RunOutput> {
  switch (plan.behavior) {
    case 'complete':
    case 'flaky_submit':
    case 'lose_callback': // completes; its `completed` event is dropped on the way out (server.ts)
      await uploadExpected(ctx);
      return { summary: summarise('Completed', goal) };
    case 'complete_without_evidence': // uploads nothing; its `completed` event claims the refs anyway (server.ts)
      return { summary: summarise('Completed', goal) };
    case 'large_result':
      await uploadExpected(ctx);
      return {
        summary: summarise(`Completed with a ${plan.resultBytes}-byte result`, goal),
        body: largeResultBody(ctx.dispatchId, plan.resultBytes),
      };
    case 'stall':
      if (plan.resumeAfterSeconds === undefined) return untilCancelled(ctx);
      await pause(plan.resumeAfterSeconds * 1000, undefined, { signal: ctx.signal });
      await uploadExpected(ctx);
      return { summary: summarise('Completed', goal) };
    case 'slow':
      // A heartbeat every second of work (the kit sent the first, and coalesces to its stall window).
      for (let elapsed = 0; elapsed < plan.seconds; elapsed += 1) {
        await pause(Math.min(1, plan.seconds - elapsed) * 1000, undefined, { signal: ctx.signal });
        if (elapsed + 1 < plan.seconds) ctx.heartbeat();
      }
      await uploadExpected(ctx);
      return { summary: summarise('Completed', goal) };
    case 'await_approval': {
      const decision = await ctx.requestApproval('the demo agent asks before it completes');
      // A cancel decision: the kit reports the run cancelled whatever it returns.
      if (decision === 'cancel') return undefined;
      ctx.heartbeat();
      await uploadExpected(ctx);
      return { summary: summarise('Completed', goal) };
    }
    case 'fail':
      throw new Error(summarise('Failed on purpose (behavior: fail)', goal));
    case 'lookup_unavailable': // alive once (the kit's first heartbeat), then silent; its lookups answer 503
    case 'vanish': // accepted, then nothing: its callbacks are dropped and its lookups answer 404
      return untilCancelled(ctx);
    case 'reject': // never reaches the kit: refused in front of it
      throw new Error('behavior reject is refused at submission');
  }
}

/**
 * Uploads every expected file, one after another. A file the ledger refused or never took is logged by
 * the kit and skipped: the demo agent carries on, as a careless target would.
 */
async function uploadExpected(ctx: RunContext): Promise<void> {
  for (const ref of ctx.expectedEvidence) {
    const content = `# ${ref}\n\nDemo evidence for dispatch ${ctx.dispatchId}, attempt ${ctx.attempt}, run ${ctx.runId}.\n`;
    try {
      await ctx.putEvidence(ref, content);
    } catch (error) {
      if (!(error instanceof CallbackError)) throw error;
    }
  }
}

/** Silence until the run is cancelled (or the agent stops): its signal's reason is what ends it. */
function untilCancelled(ctx: RunContext): Promise<never> {
  return new Promise((_resolve, reject) => {
    if (ctx.signal.aborted) return reject(ctx.signal.reason);
    ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true });
  });
}

function summarise(outcome: string, goal: string | undefined): string {
  const text = goal === undefined ? `${outcome}.` : `${outcome}: ${goal}`;
  return text.slice(0, SUMMARY_CHARS);
}
