import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DemoAgentStats } from '../../local/demo-agent/model.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { slotTotals } from '../../shared/dispatch/slots.js';
import type { DispatchView } from '../../shared/dispatch/view.js';
import { installFaults } from '../../shared/faults.js';
import { STEP_MS } from '../support/bounds.js';
import { uniqueName } from '../support/engines.js';
import { startGatedProxy } from '../support/gated-proxy.js';
import { eventually, startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * CONTRACT §11 (flow control) and §2 cancel, on the local platform's real engines: targets registered
 * with `maxConcurrentRuns` (all of them the demo agent under another name), dispatches from several
 * origins through the queue, the monitor ticking every second, the API nudging admissions.
 */
let t: TestPlatform;
let ledger: LedgerTable;

beforeAll(async () => {
  t = await startTestPlatform();
  ledger = new LedgerTable(DynamoDBDocumentClient.from(t.clients.dynamodb, { marshallOptions: { removeUndefinedValues: true } }), { tableName: t.platform.resources.ledgerTable, retentionSeconds: 86_400 });
});
afterAll(() => t.stop());

/** Registers the demo agent under `name` with a limit (a target of its own, the same agent behind it). */
async function limitedTarget(limit: number, name = uniqueName('lim')): Promise<string> {
  await ledger.putTarget({ name, kind: 'http', baseUrl: t.platform.demoAgent.url, maxConcurrentRuns: limit });
  return name;
}

const message = (target: string, overrides: Record<string, unknown> = {}) => ({
  dispatchId: uniqueName('d'),
  origin: 'planner',
  target,
  task: { behavior: 'complete', goal: 'flow control' },
  ...overrides,
});

const stats = async (): Promise<DemoAgentStats> => (await (await fetch(`${t.platform.demoAgent.url}/stats`)).json()) as DemoAgentStats;

async function post(path: string, body: unknown, origin = 'planner'): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${t.platform.info.apiUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-ledger-origin': origin }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const submittedAt = (view: DispatchView): string | undefined => view.receipts.find((receipt) => receipt.event === 'dispatch_submitted' && receipt.attempt === view.attempt)?.at;
/** `promise`, or a failure naming `what` after STEP_MS (a bound that only names a failure: nothing is timed). */
async function settledWithin<T>(what: string, promise: Promise<T>): Promise<Awaited<T>> {
  const bound = new AbortController();
  const deadline = sleep(STEP_MS, undefined, { signal: bound.signal }).then(
    (): never => {
      throw new Error(`gave up waiting for ${what} after ${STEP_MS / 1000} s`);
    },
    () => new Promise<never>(() => undefined), // settled in time: the bound is called off and never fires
  );
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    bound.abort();
  }
}
const held = async (target: string) => slotTotals(await ledger.slotShards(target));
const over = (view: DispatchView) => view.execution.status === 'completed' || view.execution.status === 'failed' || view.execution.status === 'cancelled';

describe('flow control: a limit counts the runs still active at the target', () => {
  // First in the file: the demo agent's own count of open runs (maxOpen) is since it started.
  it('never has more than 3 runs of a limit-3 target open at once, taking 50 dispatches from 3 origins (concurrent intake and ticks)', async () => {
    const target = await limitedTarget(3, 'demo-agent');
    const sent = Array.from({ length: 50 }, (_, index) => message(target, { origin: ['planner', 'lead-agent', 'reviewer'][index % 3], task: { behavior: 'slow', seconds: 1, goal: `n${index}` } }));
    await Promise.all(sent.map((body) => t.send(JSON.stringify(body))));
    for (const body of sent) await t.viewWhen(body.dispatchId, over, { origin: body.origin as string, timeoutMs: 120_000 });
    const seen = await stats();
    // The agent's own log of concurrently open runs, not the ledger's counter: at most 3, and 3 were used.
    expect(seen.maxOpen[target]).toBe(3);
    for (const body of sent) expect(seen.runs[body.dispatchId]).toBe(1);
    expect(await held(target)).toMatchObject({ limit: 3, held: 0, unknownHeld: 0 });
    // Back to unlimited for the other tests of the file.
    await ledger.putTarget({ name: target, kind: 'http', baseUrl: t.platform.demoAgent.url });
  });

  it('admits by priority, then alternately across two backlogged origins, FIFO within each', async () => {
    const target = await limitedTarget(1);
    const blocker = message(target, { task: { behavior: 'stall' } });
    await t.send(JSON.stringify(blocker));
    await t.viewWhen(blocker.dispatchId, (view) => view.phase === 'submitted');
    // All wait behind the blocker: one low, four from each origin, one high (sent last).
    const low = message(target, { priority: 1, origin: 'reviewer' });
    const alpha = Array.from({ length: 4 }, () => message(target, { origin: 'planner' }));
    const beta = Array.from({ length: 4 }, () => message(target, { origin: 'lead-agent' }));
    const high = message(target, { priority: 9, origin: 'reviewer' });
    for (const body of [low, ...alpha, ...beta, high]) {
      await t.send(JSON.stringify(body));
      await t.viewWhen(body.dispatchId, (view) => view.submission.waitingFor === 'capacity', { origin: body.origin as string });
    }
    // The blocker's run ends (its cancel, confirmed by the target): the queue drains one at a time.
    expect((await post(`/dispatches/${blocker.dispatchId}/cancel`, { reason: 'make room' })).status).toBe(202);
    const waiters = [low, ...alpha, ...beta, high];
    // Ten runs one after another: alone it drains in ~3 s; beside the browser tests of a full run it took over 60 s
    // twice on 2026-12-06 (the SDK warned of 2 s request timeouts), so the wait allows for a loaded machine.
    const views = await Promise.all(waiters.map((body) => t.viewWhen(body.dispatchId, over, { origin: body.origin as string, timeoutMs: 150_000 })));
    const order = views.map((view) => ({ id: view.dispatchId, origin: view.origin, at: submittedAt(view) ?? '' })).sort((a, b) => a.at.localeCompare(b.at));
    expect(order[0]?.id).toBe(high.dispatchId);
    expect(order.at(-1)?.id).toBe(low.dispatchId);
    const middle = order.slice(1, -1);
    let difference = 0;
    for (const entry of middle) {
      difference += entry.origin === 'planner' ? 1 : -1;
      expect(Math.abs(difference)).toBeLessThanOrEqual(1);
    }
    expect(middle.filter((entry) => entry.origin === 'planner').map((entry) => entry.id)).toEqual(alpha.map((body) => body.dispatchId));
    expect(middle.filter((entry) => entry.origin === 'lead-agent').map((entry) => entry.id)).toEqual(beta.map((body) => body.dispatchId));
  });

  it('keeps the slot of a stalled (unknown) run; a forced supersede frees it', async () => {
    const target = await limitedTarget(1);
    const stalled = message(target, { task: { behavior: 'stall' }, timeouts: { stallAfterSeconds: 1 } });
    await t.send(JSON.stringify(stalled));
    await t.viewWhen(stalled.dispatchId, (view) => view.execution.status === 'unknown');
    const waiter = message(target);
    await t.send(JSON.stringify(waiter));
    await t.viewWhen(waiter.dispatchId, (view) => view.submission.waitingFor === 'capacity');
    // The target became full when the stalled run took the only slot: that is the entry's `since` (§2 v3),
    // and ticks, lookups and the waiter's arrival do not move it.
    const full = (await t.view(stalled.dispatchId)).slot.since;
    expect(full).toEqual(expect.any(String));
    const sinceOf = async (): Promise<unknown> => ((await t.get('/attention?kind=at_capacity')).body as { items: Array<Record<string, unknown>> }).items.find((item) => item.target === target)?.since;
    expect(await sinceOf()).toBe(full);
    // Ticks go by: the unknown run still holds the only slot, and the attention list says so.
    const ticks = t.platform.scheduler.ticks;
    await eventually('three more ticks', async () => (t.platform.scheduler.ticks >= ticks + 3 ? true : undefined));
    expect((await t.view(waiter.dispatchId)).phase).toBe('accepted');
    const capacity = (await t.get('/attention?kind=at_capacity')).body as { items: Array<Record<string, unknown>> };
    expect(capacity.items.find((item) => item.target === target)).toMatchObject({ kind: 'at_capacity', limit: 1, held: 1, heldByUnknownRuns: 1, waiting: 1, since: full });

    expect((await post(`/dispatches/${stalled.dispatchId}/redispatch`, { reason: 'lost it', force: true })).status).toBe(202);
    // The superseded run's slot is given back: the new attempt (the older dispatch, first in line) or the
    // waiter takes it — neither could without it — and never both at once.
    await eventually('the freed slot taken', async () => {
      const [again, other] = [await t.view(stalled.dispatchId), await t.view(waiter.dispatchId)];
      return (again.attempt === 2 && again.phase === 'submitted') || other.phase === 'submitted' ? true : undefined;
    });
    expect((await t.view(stalled.dispatchId)).runs.find((entry) => entry.attempt === 1)).toMatchObject({ superseded: true });
    // (The waiter completes at once when it is the one: the count may already be back to 0.)
    expect((await held(target)).held).toBeLessThanOrEqual(1);
  });

  // Counted in ticks, not timed (it had asserted "submitted < 3 s after notBefore" against a 1 s tick,
  // and failed at 3,059 ms on a clean clone's .ci/run with both cores saturated): the scheduler is
  // stopped, and the test ticks it itself — once before the time, then after it until submitted. A
  // tick stops taking work after its budget (750 ms of the local 1 s period), so on a busy machine it
  // may not reach the dispatch's due shard; the next one goes on from there.
  it('submits a notBefore dispatch at a tick after its time, never at one before it', async () => {
    // Far enough ahead that the message is taken in, and a tick made, before it (under load too).
    const notBefore = new Date(Date.now() + 12_000).toISOString();
    const body = message('demo-agent', { notBefore });
    await t.send(JSON.stringify(body));
    expect((await t.viewWhen(body.dispatchId, (view) => view.submission.waitingFor === 'not_before')).submission.notBefore).toBe(notBefore);
    await t.platform.scheduler.stop();
    try {
      // A tick that starts (and reads its clock) before the time leaves it waiting.
      expect(Date.now()).toBeLessThan(Date.parse(notBefore));
      await t.platform.scheduler.tick();
      const early = await t.viewWhen(body.dispatchId, () => true);
      expect(early.phase).not.toBe('submitted');
      expect(early.submission.waitingFor).toBe('not_before');
      // The one wait on the clock: the dispatch's own time has to pass (the monitor reads the real clock), and
      // nothing happens at that instant that a test could wait for instead.
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, Date.parse(notBefore) - Date.now()) + 50));
      // Ticks after the time, each awaited whole (the submission happens inside the monitor's invocation).
      let view = early;
      let ticksAfter = 0;
      while (view.phase !== 'submitted' && ticksAfter < 5) {
        await t.platform.scheduler.tick();
        ticksAfter += 1;
        view = await t.viewWhen(body.dispatchId, () => true);
      }
      expect(view.phase).toBe('submitted');
      expect(Date.parse(submittedAt(view) ?? '')).toBeGreaterThanOrEqual(Date.parse(notBefore));
    } finally {
      t.platform.scheduler.start();
    }
  });

  it('admits the next dispatch at the freeing write in the API, without a tick, and answers the callback first', async () => {
    // The target is the demo agent behind a proxy that holds the second dispatch's submission, so the order
    // "the report was answered while the admission it caused had not ended" is seen, not timed. The one
    // window left is the platform's target timeout (2 s; a longer one would lengthen every claim here, which
    // lasts twice it): the monitor gives the held submission up then, so the report must be answered within
    // 2 s of the monitor sending it. It is answered right after the nudge, before the monitor has even taken
    // the slot (a read and a conditional write) and sent the submission.
    const gate = await startGatedProxy(t.platform.demoAgent.url);
    const target = uniqueName('lim');
    await ledger.putTarget({ name: target, kind: 'http', baseUrl: gate.url, maxConcurrentRuns: 1 });
    const first = message(target, { task: { behavior: 'stall' } });
    const second = message(target);
    gate.hold(second.dispatchId);
    try {
      await t.send(JSON.stringify(first));
      const running = await t.viewWhen(first.dispatchId, (view) => view.phase === 'submitted');
      await t.send(JSON.stringify(second));
      await t.viewWhen(second.dispatchId, (view) => view.submission.waitingFor === 'capacity');
      // No tick from here on: only the freeing write can admit the second one.
      await t.platform.scheduler.stop();
      const ticks = t.platform.scheduler.ticks;
      const started = Date.now();
      // What the held submission's caller had done at the instant the report's answer arrived (before or
      // after the submission reached the proxy): an API that waited for the admission answers only once the
      // submission has ended, answered (it cannot be: the gate is shut) or given up at the target's timeout.
      const reported = post(`/runs/${encodeURIComponent(running.runId ?? '')}/events`, { dispatchId: first.dispatchId, seq: 100, type: 'completed' }).then((report) => ({
        report,
        submissionEnded: gate.answered(second.dispatchId) || gate.abandoned(second.dispatchId),
      }));
      reported.catch(() => undefined); // awaited below; handled here too, should the wait for the admission fail first
      // The admission reaches the target (no tick: the freeing write nudged the monitor), and is held there.
      await settledWithin('the admission to reach the target', gate.arrived(second.dispatchId));
      // The bound only names a report that never comes: the gate stays shut whatever the time.
      const { report, submissionEnded } = await settledWithin('the report to be answered while the admission it caused is held at the target', reported);
      expect(report.status).toBe(202);
      expect(submissionEnded).toBe(false);
      expect(t.platform.scheduler.ticks).toBe(ticks);
      gate.open(second.dispatchId);
      const admitted = await t.viewWhen(second.dispatchId, (view) => view.phase === 'submitted');
      expect(gate.answered(second.dispatchId)).toBe(true);
      expect(t.platform.scheduler.ticks).toBe(ticks);
      expect(Date.parse(submittedAt(admitted) ?? '')).toBeGreaterThanOrEqual(started);
    } finally {
      t.platform.scheduler.start();
      await gate.close();
    }
  });

  it('frees the only slot of a vanished run with `slots release`, recorded with the principal; a run the target knows keeps it (409)', async () => {
    const target = await limitedTarget(1);
    const vanished = message(target, { task: { behavior: 'vanish' } });
    await t.send(JSON.stringify(vanished));
    const run = await t.viewWhen(vanished.dispatchId, (view) => view.phase === 'submitted');
    const waiter = message(target, { task: { behavior: 'stall' } });
    await t.send(JSON.stringify(waiter));
    await t.viewWhen(waiter.dispatchId, (view) => view.submission.waitingFor === 'capacity');

    const released = await post(`/targets/${target}/slots/release`, { runId: run.runId, dispatchId: vanished.dispatchId, reason: 'the agent lost it' });
    expect(released).toMatchObject({ status: 200, body: { released: true, dispatchId: vanished.dispatchId, releasedBy: 'local:operator' } });
    expect((await t.view(vanished.dispatchId)).slot.released).toMatchObject({ by: 'local:operator', reason: 'the agent lost it', runId: run.runId });
    const admitted = await t.viewWhen(waiter.dispatchId, (view) => view.phase === 'submitted');
    // The stalling run is one the target knows: its slot stays.
    const refused = await post(`/targets/${target}/slots/release`, { runId: admitted.runId, dispatchId: waiter.dispatchId, reason: 'no' });
    expect(refused.status).toBe(409);
    expect(await held(target)).toMatchObject({ held: 1 });
  });

  it('finds the dispatch of a lost run by its run id alone (CONTRACT body { runId, reason }) once the ledger knows it as unknown', async () => {
    const target = await limitedTarget(1);
    const vanished = message(target, { task: { behavior: 'vanish' }, timeouts: { stallAfterSeconds: 1 } });
    await t.send(JSON.stringify(vanished));
    const lost = await t.viewWhen(vanished.dispatchId, (view) => view.execution.monitorStatus === 'target_not_found');
    // The attention feed (an index) is a moment behind the state.
    const released = await eventually('released by run id', async () => {
      const answer = await post(`/targets/${target}/slots/release`, { runId: lost.runId, reason: 'gone at the agent' });
      return answer.status === 200 ? answer : undefined;
    });
    expect(released.body).toMatchObject({ released: true, dispatchId: vanished.dispatchId, status: 'unknown' });
    expect(await held(target)).toMatchObject({ held: 0, unknownHeld: 0 });
  });

  it('reclaims a slot taken by a process that died before submitting: submitted once, then given back', async () => {
    const target = await limitedTarget(1);
    const body = message(target);
    let crashed = 0;
    const uninstall = installFaults({ fires: (fault, subject) => fault === 'submit.after_slot_taken' && subject === body.dispatchId && crashed++ === 0 });
    try {
      await t.send(JSON.stringify(body));
      const view = await t.viewWhen(body.dispatchId, over);
      expect(crashed).toBeGreaterThanOrEqual(1);
      expect(view.execution.status).toBe('completed');
      expect((await stats()).runs[body.dispatchId]).toBe(1);
      await eventually('the slot given back', async () => ((await held(target)).held === 0 ? true : undefined));
    } finally {
      uninstall();
    }
  });
});

describe('cancel (CONTRACT §2 v2)', () => {
  const events = (): Array<{ 'detail-type': string; detail: Record<string, unknown> }> =>
    readFileSync(t.platform.info.eventLog, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as { 'detail-type': string; detail: Record<string, unknown> });

  it('cancels a dispatch before submission at once: never reaches the target, no slot taken, Dispatch Cancelled', async () => {
    const body = message('demo-agent', { notBefore: new Date(Date.now() + 60_000).toISOString() });
    await t.send(JSON.stringify(body));
    await t.viewWhen(body.dispatchId, (view) => view.submission.waitingFor === 'not_before');
    const answer = await post(`/dispatches/${body.dispatchId}/cancel`, { reason: 'not needed' });
    expect(answer).toMatchObject({ status: 202, body: { phase: 'cancelled', cancelled: true } });
    expect((await t.view(body.dispatchId)).phase).toBe('cancelled');
    await eventually('Dispatch Cancelled on the bus', async () => (events().some((event) => event['detail-type'] === 'Dispatch Cancelled' && event.detail.dispatchId === body.dispatchId) ? true : undefined));
    expect((await stats()).submissions[body.dispatchId]).toBeUndefined();
    // Terminal now: a second cancel is 409.
    expect((await post(`/dispatches/${body.dispatchId}/cancel`, { reason: 'again' })).status).toBe(409);
  });

  it('asks the target to cancel a submitted run, once however often the origin asks; cancelled on the target\'s word', async () => {
    const body = message('demo-agent', { task: { behavior: 'stall' } });
    await t.send(JSON.stringify(body));
    const running = await t.viewWhen(body.dispatchId, (view) => view.phase === 'submitted');
    const [first, second] = [await post(`/dispatches/${body.dispatchId}/cancel`, { reason: 'stop' }), await post(`/dispatches/${body.dispatchId}/cancel`, { reason: 'stop' })];
    expect(first.status).toBe(202);
    expect([202, 409]).toContain(second.status);
    const view = await t.viewWhen(body.dispatchId, (candidate) => candidate.execution.status === 'cancelled');
    expect(view.execution.cancelRequestedAt).not.toBeNull();
    expect((await stats()).cancels?.[running.runId ?? '']).toBe(1);
    expect((await post(`/dispatches/${body.dispatchId}/cancel`, { reason: 'stop' })).status).toBe(409);
  });

  it('retries the cancel while the target is unreachable (cancel_pending), and records it once the target confirms', async () => {
    const target = uniqueName('moody');
    await ledger.putTarget({ name: target, kind: 'http', baseUrl: t.platform.demoAgent.url });
    const body = message(target, { task: { behavior: 'stall' } });
    await t.send(JSON.stringify(body));
    const running = await t.viewWhen(body.dispatchId, (view) => view.phase === 'submitted');
    // The target goes away (nothing listens there).
    await ledger.putTarget({ name: target, kind: 'http', baseUrl: 'http://127.0.0.1:9' });
    const asked = await post(`/dispatches/${body.dispatchId}/cancel`, { reason: 'stop' });
    expect(asked).toMatchObject({ status: 202, body: { cancelled: false } });
    const pending = (await t.get('/attention?kind=cancel_pending')).body as { items: Array<Record<string, unknown>> };
    expect(pending.items.some((item) => item.dispatchId === body.dispatchId)).toBe(true);
    // The monitor asks again (1 s backoff here) until it is back.
    await eventually('asked again', async () => ((await t.view(body.dispatchId)).execution.cancel?.asks ?? 0) >= 2 ? true : undefined);
    expect((await t.view(body.dispatchId)).execution.status).not.toBe('cancelled');
    await ledger.putTarget({ name: target, kind: 'http', baseUrl: t.platform.demoAgent.url });
    await t.viewWhen(body.dispatchId, (view) => view.execution.status === 'cancelled');
    expect((await stats()).cancels?.[running.runId ?? '']).toBe(1);
  });
});
