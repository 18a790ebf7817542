import type { RouteName } from '@dispatch-ledger/protocol';
import { existsSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import { PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { createLedgerClient, type RawAnswer, type RawCall } from '@dispatch-ledger/client';
import { localQueueClient } from './connect.js';
import { EXAMPLE_WORKER_TARGET, LIMITED_DEMO_TARGET, MANUAL_DESK_TARGET } from '../local/platform.js';
import { sendInbox, type InboxCommand } from './inbox.js';
import { table } from './table.js';
import type { DispatchView } from '../shared/dispatch/view.js';
import { localClients } from '../local/clients.js';
import { largeResultBody } from '../local/demo-agent/large-result.js';
import type { InvocationReport } from '../local/runtime/context.js';
import type { LocalInfo, LocalState } from '../local/state.js';


/** A message body put on the dispatch queue as it is: the demo sends some the ledger must refuse. */
async function sendDispatchBody(info: LocalInfo, body: string): Promise<string> {
  const sqs = localQueueClient(info);
  try {
    return (await sqs.send(new SendMessageCommand({ QueueUrl: info.dispatchQueueUrl, MessageBody: body }))).MessageId ?? '';
  } finally {
    sqs.destroy();
  }
}

/** One route of the API as `origin` (the operator's routes `as: 'operator'`), through @dispatch-ledger/client, answered as it came. */
function call(info: LocalInfo, origin: string, name: RouteName, parts: RawCall = {}, body?: unknown): Promise<RawAnswer> {
  return createLedgerClient({ origin, local: info }).raw(name, body === undefined ? parts : { ...parts, body });
}

/** Lines of a JSONL file that parse, in order (a line being written may be cut: it is skipped). */
export function readJsonl<T>(file: string): T[] {
  if (!existsSync(file)) return [];
  const out: T[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line) as T);
    } catch {
      // partial last line
    }
  }
  return out;
}

async function waitFor<T>(what: string, find: () => Promise<T | undefined> | T | undefined, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const found = await find();
    if (found !== undefined) return found;
    await sleep(200);
  }
  throw new Error(`demo: timed out waiting for ${what}`);
}

interface DemoCase {
  readonly name: string;
  readonly body: string;
  readonly dispatchId?: string;
  /** When this case has reached what it is meant to show. */
  readonly settled: (view: DispatchView | undefined, taken: boolean) => boolean;
}

/**
 * The demo `npm start` runs against the local platform: a handful of dispatches — good, duplicate,
 * refused, misaddressed, flaky, unreadable, conflicting — and a table of what became of each.
 */
export async function runDemo(state: LocalState, print: (line: string) => void): Promise<void> {
  const info = state.info;
  if (!info) throw new Error('demo: the platform is not ready');
  const run = Date.now().toString(36);
  const id = (name: string): string => `d-demo-${run}-${name}`;
  const message = (name: string, task: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    JSON.stringify({ dispatchId: id(name), origin: 'planner', target: 'demo-agent', task, ...extra });
  const isPhase = (phase: string) => (view: DispatchView | undefined) => view?.phase === phase;
  const cases: DemoCase[] = [
    { name: 'a report, with evidence expected', dispatchId: id('report'), body: message('report', { goal: 'summarise the incident', behavior: 'complete' }, { expectedEvidence: ['out/report.md'] }), settled: isPhase('submitted') },
    { name: 'the same message again', dispatchId: id('report'), body: message('report', { goal: 'summarise the incident', behavior: 'complete' }, { expectedEvidence: ['out/report.md'] }), settled: (_view, taken) => taken },
    { name: 'same id, other content', dispatchId: id('report'), body: message('report', { goal: 'something else', behavior: 'complete' }), settled: (_view, taken) => taken },
    { name: 'a target that refuses it', dispatchId: id('refused'), body: message('refused', { behavior: 'reject' }), settled: isPhase('blocked') },
    { name: 'a target nobody registered', dispatchId: id('nowhere'), body: message('nowhere', { behavior: 'complete' }, { target: 'nobody-home' }), settled: isPhase('blocked') },
    { name: 'a target down at first', dispatchId: id('flaky'), body: message('flaky', { behavior: 'flaky_submit' }), settled: isPhase('submitted') },
    { name: 'a body that is not JSON', body: '{"dispatchId": "oops", ', settled: (_view, taken) => taken },
  ];

  print('demo: sending a handful of dispatches to the queue');
  const sent: Array<DemoCase & { messageId: string }> = [];
  for (const demoCase of cases) {
    sent.push({ ...demoCase, messageId: await sendDispatchBody(info, demoCase.body) });
    // One at a time, so "the same message again" arrives after the first was taken.
    await waitFor(`intake of "${demoCase.name}"`, () =>
      readJsonl<InvocationReport>(state.invocationLog).some((report) => report.function === 'intake' && report.items?.includes(sent.at(-1)?.messageId ?? '')) ? true : undefined,
    );
  }

  const views = new Map<string, DispatchView>();
  for (const demoCase of sent) {
    await waitFor(`"${demoCase.name}" to settle`, async () => {
      const view = demoCase.dispatchId ? await viewOf(demoCase.dispatchId) : undefined;
      if (view && demoCase.dispatchId) views.set(demoCase.dispatchId, view);
      return demoCase.settled(view, true) ? true : undefined;
    });
  }
  const rejections = ((await call(info, 'planner', 'rejections', { query: { limit: 100 }, as: 'operator' })).body as { items: Array<{ messageId: string; reason: string }> }).items;
  const stats = (await (await fetch(`${info.demoAgentUrl}/stats`)).json()) as { submissions: Record<string, number>; runs: Record<string, number> };

  const seen = new Set<string>();
  const rows = sent.map((demoCase) => {
    const rejection = rejections.find((entry) => entry.messageId === demoCase.messageId);
    const view = demoCase.dispatchId ? views.get(demoCase.dispatchId) : undefined;
    let outcome: string;
    let detail: string;
    if (rejection) {
      outcome = 'rejected';
      detail = `${rejection.reason}${rejection.reason === 'conflict' ? ' (the original stands)' : ''}; GET /rejections`;
    } else if (demoCase.dispatchId && seen.has(demoCase.dispatchId)) {
      outcome = 'duplicate';
      detail = `no new effect: the target saw ${stats.submissions[demoCase.dispatchId] ?? 0} submission(s), ${stats.runs[demoCase.dispatchId] ?? 0} run`;
    } else if (view?.phase === 'blocked') {
      outcome = 'blocked';
      detail = view.blockedReason ?? '';
    } else if (view) {
      outcome = view.phase;
      detail = `run ${view.runId ?? '—'} after ${view.submission.attempts} submission call(s); proof in dispatch_submitted`;
    } else {
      outcome = '?';
      detail = '';
    }
    if (demoCase.dispatchId) seen.add(demoCase.dispatchId);
    return [demoCase.name, demoCase.dispatchId ?? `(message ${demoCase.messageId.slice(0, 8)})`, outcome, detail];
  });
  print('');
  print(table(['case', 'dispatch', 'became', 'detail'], rows, { width: 100 }));
  print('');
  // The walkthroughs, in order, each followed by a blank line.
  for (const walkthrough of [lifecycleDemo, evidenceDemo, resultsDemo, lambdaWorkerDemo, flowControlDemo, manualDemo]) {
    await walkthrough(state, run, print);
    print('');
  }
  await busProbe(state, print);
  print(`demo done. Try: npx ledger check ${id('report')}   ·   npx ledger status   ·   npx ledger inbox list --state pending   ·   npx ledger events --follow`);

  async function viewOf(dispatchId: string): Promise<DispatchView | undefined> {
    const { status, body } = await call(info as NonNullable<typeof info>, 'planner', 'getDispatch', { params: { dispatchId: dispatchId } });
    return status === 200 ? (body as DispatchView) : undefined;
  }
}

interface LifecycleCase {
  readonly name: string;
  readonly dispatchId: string;
  readonly task: Record<string, unknown>;
  readonly timeouts: Record<string, number>;
  readonly settled: (view: DispatchView) => boolean;
}

/**
 * Runs the target misbehaves in every way the ledger must handle, with second-scale timeouts: what the
 * ledger concluded for each — never `failed` for a run it merely lost sight of.
 */
async function lifecycleDemo(state: LocalState, run: string, print: (line: string) => void): Promise<void> {
  const info = state.info;
  if (!info) return;
  const short = { stallAfterSeconds: 3 };
  const cases: LifecycleCase[] = [
    { name: 'goes silent (stall)', dispatchId: `d-demo-${run}-stall`, task: { behavior: 'stall' }, timeouts: short, settled: (view) => view.execution.monitorStatus === 'stalled' },
    { name: 'never reports its end (lose_callback)', dispatchId: `d-demo-${run}-lost`, task: { behavior: 'lose_callback' }, timeouts: short, settled: (view) => view.execution.status === 'completed' },
    { name: 'forgets the run (vanish)', dispatchId: `d-demo-${run}-vanish`, task: { behavior: 'vanish' }, timeouts: short, settled: (view) => view.execution.monitorStatus === 'target_not_found' },
    { name: 'status endpoint down (lookup_unavailable)', dispatchId: `d-demo-${run}-dark`, task: { behavior: 'lookup_unavailable' }, timeouts: short, settled: (view) => view.execution.monitorStatus === 'lookup_unavailable' },
    { name: 'asks for approval (await_approval)', dispatchId: `d-demo-${run}-approval`, task: { behavior: 'await_approval' }, timeouts: { stallAfterSeconds: 30, approvalWaitSeconds: 3 }, settled: (view) => view.execution.monitorStatus === 'approval_wait_expired' },
    { name: 'slow but heartbeating (slow)', dispatchId: `d-demo-${run}-slow`, task: { behavior: 'slow', seconds: 5 }, timeouts: short, settled: (view) => view.execution.status === 'completed' },
  ];
  print('demo: runs that misbehave (stall windows of 3 s, a monitor tick every few seconds)');
  for (const demoCase of cases) {
    await sendDispatchBody(info, JSON.stringify({ dispatchId: demoCase.dispatchId, origin: 'planner', target: 'demo-agent', task: demoCase.task, timeouts: demoCase.timeouts }));
  }
  const viewOf = async (dispatchId: string): Promise<DispatchView | undefined> => {
    const { status, body } = await call(info, 'planner', 'getDispatch', { params: { dispatchId: dispatchId } });
    return status === 200 ? (body as DispatchView) : undefined;
  };
  const settled = await Promise.all(
    cases.map((demoCase) => waitFor(`"${demoCase.name}" to settle`, async () => {
      const view = await viewOf(demoCase.dispatchId);
      return view && demoCase.settled(view) ? view : undefined;
    }, 60_000)),
  );
  // The expired approval is still pending: approve it now, and the run completes.
  const approval = settled[4];
  let approvedTo = '';
  if (approval?.execution.pendingApproval) {
    await call(info, 'planner', 'decideApproval', { params: { dispatchId: approval.dispatchId } }, { approvalId: approval.execution.pendingApproval.approvalId, decision: 'approve' });
    const done = await waitFor('the approved run to complete', async () => {
      const view = await viewOf(approval.dispatchId);
      return view?.execution.status === 'completed' ? view : undefined;
    });
    approvedTo = `; approved afterwards → ${done.execution.status}`;
  }
  const recovered = (dispatchId: string): boolean =>
    readJsonl<{ 'detail-type'?: string; detail?: { dispatchId?: string } }>(info.eventLog).some((event) => event['detail-type'] === 'Run Recovered' && event.detail?.dispatchId === dispatchId);
  const rows = cases.map((demoCase, index) => {
    const view = settled[index];
    const execution = view?.execution;
    const concluded = `${execution?.status ?? '?'}${execution?.monitorStatus ? ` (${execution.monitorStatus})` : ''}`;
    const detail =
      execution?.monitorStatus === 'approval_wait_expired'
        ? `approval ${execution.pendingApproval?.approvalId ?? ''} still pending, never auto-denied${approvedTo}`
        : execution?.status === 'unknown'
          ? `target last said ${execution.nativeStatus ?? '—'}; not failed — check: npx ledger check ${demoCase.dispatchId} --refresh`
          : `target says ${execution?.nativeStatus ?? '—'}${execution?.result?.summary ? `: ${execution.result.summary}` : ''}${recovered(demoCase.dispatchId) ? ' — found by lookup (Run Recovered), never reported' : ''}`;
    return [demoCase.name, demoCase.dispatchId, concluded, detail];
  });
  print(table(['run that…', 'dispatch', 'ledger concluded', 'detail'], rows, { width: 100 }));
}

/**
 * Evidence and receipts: the platform checks the files itself, and acceptance and delivery are
 * attested separately. Ends with the summary a person reads in five seconds.
 */
async function evidenceDemo(state: LocalState, run: string, print: (line: string) => void): Promise<void> {
  const info = state.info;
  if (!info) return;
  const delivered = `d-demo-${run}-delivered`;
  const orphan = `d-demo-${run}-orphan`;
  const timeouts = { stallAfterSeconds: 30, deliveryGraceSeconds: 3 };
  print('demo: evidence the platform checks itself (grace window 3 s), and operator receipts');
  await sendDispatchBody(info, JSON.stringify({ dispatchId: delivered, origin: 'planner', target: 'demo-agent', task: { behavior: 'complete' }, expectedEvidence: ['out/report.md'], timeouts }));
  await sendDispatchBody(info, JSON.stringify({ dispatchId: orphan, origin: 'planner', target: 'demo-agent', task: { behavior: 'complete_without_evidence' }, expectedEvidence: ['out/report.md'], timeouts }));
  const viewOf = async (dispatchId: string): Promise<DispatchView | undefined> => {
    const { status, body } = await call(info, 'planner', 'getDispatch', { params: { dispatchId: dispatchId } });
    return status === 200 ? (body as DispatchView) : undefined;
  };
  const settled = (dispatchId: string) =>
    waitFor(`${dispatchId} to be checked`, async () => {
      const view = await viewOf(dispatchId);
      return view && view.evidence.outcome !== 'pending' && view.execution.status === 'completed' ? view : undefined;
    }, 60_000);
  const handled = await settled(delivered);
  await settled(orphan);
  for (const [kind, receiptState, evidenceRef] of [['artifact_acceptance', 'accepted', 'out/report.md'], ['owner_delivery', 'confirmed', 'out/report.md']] as const) {
    await call(info, 'planner', 'recordReceipt', { params: { dispatchId: delivered } }, { receiptId: `rc-${run}-${kind}`, runId: handled.runId, kind, state: receiptState, evidenceRef, verifiedBy: 'demo-operator' });
  }
  const rows: string[][] = [];
  for (const dispatchId of [delivered, orphan]) {
    const view = await viewOf(dispatchId);
    if (!view) continue;
    rows.push([
      dispatchId,
      `${view.execution.status ?? '—'}${view.execution.monitorStatus ? ` (${view.execution.monitorStatus})` : ''}`,
      `${view.evidence.outcome}: ${view.evidence.found.length}/${view.evidence.expected.length} found${view.evidence.missing.length ? `, missing ${view.evidence.missing.join(', ')}` : ''}`,
      view.artifactAcceptance.state,
      view.ownerDelivery.state,
      view.gate.satisfied ? 'satisfied' : 'not satisfied',
      view.unknowns.length === 0 ? 'none' : view.unknowns.join(' / '),
    ]);
  }
  print(table(['dispatch', 'observed', 'evidence checked', 'acceptance', 'delivery', 'gate', 'unknowns'], rows, { width: 100 }));
}

/** What a claim hands out for one result (CONTRACT §10), as far as the demo reads it. */
interface ClaimedResult {
  readonly resultId: string;
  readonly dispatchId: string;
  readonly attempt: number;
  readonly deliveryAttempts: number;
  readonly execution: { readonly status: string | null };
  readonly evidence: { readonly outcome: string };
  readonly summary: string | null;
  readonly body?: unknown;
  readonly preview?: string;
  readonly bodyRef?: string;
}

interface Claim {
  readonly claimToken: string | null;
  readonly leaseExpiresAt?: string | null;
  readonly results: readonly ClaimedResult[];
}

/** How long the demo waits for the child's result to be claimable after the child settled. */
const CLAIM_PATIENCE_MS = 30_000;
/** Each claim's long poll (CONTRACT §10 allows up to 20 s). */
const CLAIM_WAIT_SECONDS = 5;

/**
 * A result back to the origin (CONTRACT §10): the lead agent commissions a parent and, under it, a child
 * whose target reports a ~20 KB body (so the ledger spills it). Between turns the lead agent claims its
 * inbox, reads the child's result — a preview and a bodyRef in the claim, the whole body on request —
 * and acks it: owner delivery is then confirmed on the origin's own word (`origin_ack`), not an operator's.
 */
async function resultsDemo(state: LocalState, run: string, print: (line: string) => void): Promise<void> {
  // An origin of its own, so its inbox holds only what this case commissions (the parent's result and the child's).
  const ORIGIN = 'lead-agent';
  const info = state.info;
  if (!info) return;
  const parent = `d-demo-${run}-parent`;
  const child = `d-demo-${run}-child`;
  const resultBytes = 20_000;
  const viewOf = async (dispatchId: string): Promise<DispatchView | undefined> => {
    const { status, body } = await call(info, ORIGIN, 'getDispatch', { params: { dispatchId: dispatchId } });
    return status === 200 ? (body as DispatchView) : undefined;
  };
  const send = (command: InboxCommand): Promise<{ status: number; body: unknown }> => sendInbox(info, command);
  const failed = (what: string, answer: { status: number; body: unknown }): Error => new Error(`demo: ${what} answered ${answer.status}: ${JSON.stringify(answer.body)}`);

  print('demo: a result back to the origin (lead-agent → parent → child; the child reports a 20 KB body, delivered after the turn)');
  await sendDispatchBody(info, JSON.stringify({ dispatchId: parent, origin: ORIGIN, target: 'demo-agent', task: { goal: 'plan the incident review', behavior: 'complete' } }));
  // The child names its parent, which should be in the ledger first (else it is held up to 300 s for it, then blocked unknown_parent).
  await waitFor(`${parent} to be submitted`, async () => ((await viewOf(parent))?.phase === 'submitted' ? true : undefined));
  await sendDispatchBody(
    info,
    JSON.stringify({
      dispatchId: child,
      origin: ORIGIN,
      target: 'demo-agent',
      parentDispatchId: parent,
      delivery: { mode: 'callback' },
      resultDelivery: 'after_turn',
      task: { goal: 'write the incident report', behavior: 'large_result', resultBytes },
      expectedEvidence: ['out/report.md'],
      timeouts: { stallAfterSeconds: 30, deliveryGraceSeconds: 10 },
    }),
  );
  print(`  sent parent ${parent} and child ${child} (parentDispatchId ${parent}, delivery callback, resultDelivery after_turn)`);
  const settled = await waitFor(`${child} to settle`, async () => {
    const view = await viewOf(child);
    return view?.execution.status === 'completed' && view.evidence.outcome !== 'pending' ? view : undefined;
  }, 60_000);
  print(`  child settled: ${settled.execution.status}, evidence ${settled.evidence.outcome}; delivery ${settled.ownerDelivery.state} — its result waits in lead-agent's inbox`);

  // Between turns the lead agent takes whatever is ready, oldest first: the parent's result comes along.
  // What is not the child's stays held while it looks (each next claim sees only what is new), then goes
  // back to pending, one release each.
  const others: Array<{ resultId: string; claimToken: string }> = [];
  let mine: { result: ClaimedResult; claimToken: string; leaseExpiresAt: string | null } | undefined;
  let claims = 0;
  const deadline = Date.now() + CLAIM_PATIENCE_MS;
  while (!mine && Date.now() < deadline) {
    claims += 1;
    const answer = await send({ kind: 'claim', origin: ORIGIN, json: false, claim: { mode: 'after_turn', max: 50, leaseSeconds: 120, waitSeconds: CLAIM_WAIT_SECONDS } });
    if (answer.status !== 200) throw failed('POST /origins/lead-agent/inbox/claim', answer);
    const { claimToken, leaseExpiresAt, results } = answer.body as Claim;
    if (claimToken === null) continue; // an empty long poll: nothing came within the wait
    for (const result of results) {
      if (result.dispatchId === child) mine = { result, claimToken, leaseExpiresAt: leaseExpiresAt ?? null };
      else others.push({ resultId: result.resultId, claimToken });
    }
  }
  for (const other of others) {
    const released = await send({ kind: 'release', origin: ORIGIN, json: false, resultId: other.resultId, claimToken: other.claimToken, reason: 'demo: read on a later turn' });
    if (released.status !== 200) throw failed(`release of ${other.resultId}`, released);
  }
  if (!mine) throw new Error(`demo: ${child}'s result was not claimable within ${CLAIM_PATIENCE_MS / 1000} s of the child settling (${claims} claims)`);
  const { result, claimToken } = mine;
  const spilled = result.bodyRef !== undefined && result.preview !== undefined;
  print(
    `  claimed lead-agent's inbox (after_turn, long poll ≤ ${CLAIM_WAIT_SECONDS} s, ${claims} claim(s)): result ${result.resultId}, attempt ${result.attempt}, ` +
      `${result.execution.status ?? '—'} / ${result.evidence.outcome}, lease until ${mine.leaseExpiresAt ?? '—'}; ` +
      (spilled ? `preview ${Buffer.byteLength(result.preview ?? '', 'utf8')} B + bodyRef ${result.bodyRef ?? ''}` : 'the body came inline (expected a preview and a bodyRef)'),
  );
  if (others.length > 0) print(`  released lead-agent's ${others.length} other claimed result(s) back to pending (read on a later turn: npx ledger inbox list --state pending --origin lead-agent)`);
  if (!spilled) throw new Error(`demo: a ${resultBytes}-byte body should have been spilled (preview + bodyRef), the claim carried ${JSON.stringify(Object.keys(result))}`);

  const whole = await send({ kind: 'body', origin: ORIGIN, json: false, resultId: result.resultId });
  if (whole.status !== 200) throw failed(`GET ${result.bodyRef ?? 'body'}`, whole);
  const sentBody = largeResultBody(child, resultBytes);
  if (!isDeepStrictEqual(whole.body, sentBody)) throw new Error(`demo: GET ${result.bodyRef ?? 'body'} did not return the body the target sent (${Buffer.byteLength(JSON.stringify(whole.body) ?? '', 'utf8')} bytes)`);
  print(`  GET ${result.bodyRef ?? ''}: the whole body, ${Buffer.byteLength(JSON.stringify(whole.body), 'utf8')} bytes, exactly what the target sent`);

  const acked = await send({ kind: 'ack', origin: ORIGIN, json: false, resultId: result.resultId, claimToken });
  if (acked.status !== 200) throw failed(`ack of ${result.resultId}`, acked);
  const again = await send({ kind: 'ack', origin: ORIGIN, json: false, resultId: result.resultId, claimToken });
  print(`  acked with the claim token → ${String((acked.body as { state?: unknown }).state ?? 'delivered')} (the same ack again → ${again.status})`);

  const delivered = await waitFor(`${child}'s owner delivery`, async () => {
    const view = await viewOf(child);
    return view && view.ownerDelivery.state !== 'unconfirmed' ? view : undefined;
  });
  const { ownerDelivery } = delivered;
  print(`  GET /dispatches/${child}: ownerDelivery ${ownerDelivery.state}, basis ${ownerDelivery.basis ?? '—'} (receipt ${ownerDelivery.receiptId ?? '—'}) — the origin's own proof, not an operator's attestation`);
  if (ownerDelivery.state !== 'confirmed' || ownerDelivery.basis !== 'origin_ack') {
    throw new Error(`demo: after the ack ${child}'s ownerDelivery is ${ownerDelivery.state} (basis ${ownerDelivery.basis ?? 'none'}), expected confirmed by origin_ack`);
  }
}

/**
 * A Lambda worker built on the worker kit (examples/lambda-worker, target kind `lambda`, CONTRACT §12):
 * invoked asynchronously through the local Lambda, its run id `{dispatchId}:1`, it uploads its report
 * and completes; the platform's own check finds the evidence, as for any target.
 */
async function lambdaWorkerDemo(state: LocalState, run: string, print: (line: string) => void): Promise<void> {
  const info = state.info;
  if (!info) return;
  const dispatchId = `d-demo-${run}-lambda`;
  print('demo: a Lambda worker built on the worker kit (examples/lambda-worker, target example-worker)');
  if (info.credentialsFile) {
    // It signs with its function's role in AWS; locally under --sigv4 no credential of the platform's is its own.
    print('  skipped under --sigv4: the local example worker has no registered credential to sign with');
    return;
  }
  await sendDispatchBody(info, JSON.stringify({ dispatchId, origin: 'planner', target: EXAMPLE_WORKER_TARGET, task: { goal: 'summarise the incident' }, expectedEvidence: ['out/report.md'], delivery: { mode: 'detached' } }));
  const view = await waitFor(`${dispatchId} to be handled`, async () => {
    const { status, body } = await call(info, 'planner', 'getDispatch', { params: { dispatchId: dispatchId } });
    const current = status === 200 ? (body as DispatchView) : undefined;
    return current?.evidence.outcome === 'handled' ? current : undefined;
  }, 60_000);
  print(`  ${dispatchId}: run ${view.runId ?? '—'} (invoked asynchronously; the request id is the proof), ${view.execution.status}: ${view.execution.result?.summary ?? ''}; evidence ${view.evidence.outcome} (${view.evidence.files.map((file) => `${file.ref} sha256 ${file.sha256.slice(0, 12)}…`).join(', ')})`);
}

/**
 * Flow control (CONTRACT §11): six dispatches from two origins to a target with `maxConcurrentRuns: 2`.
 * The ledger holds a slot from submission until it knows the run is over: never more than two at once,
 * the rest waiting, admitted round-robin across the origins as slots free.
 */
async function flowControlDemo(state: LocalState, run: string, print: (line: string) => void): Promise<void> {
  const info = state.info;
  if (!info) return;
  print(`demo: six dispatches from two origins to ${LIMITED_DEMO_TARGET} (maxConcurrentRuns: 2)`);
  const sent = Array.from({ length: 6 }, (_, index) => ({ dispatchId: `d-demo-${run}-flow-${index + 1}`, origin: index % 2 === 0 ? 'planner' : 'lead-agent' }));
  for (const { dispatchId, origin } of sent) {
    await sendDispatchBody(info, JSON.stringify({ dispatchId, origin, target: LIMITED_DEMO_TARGET, task: { behavior: 'slow', seconds: 1, goal: 'take a turn' }, delivery: { mode: 'detached' } }));
  }
  const views = await Promise.all(
    sent.map(({ dispatchId, origin }) =>
      waitFor(`${dispatchId} to complete`, async () => {
        const { status, body } = await call(info, origin, 'getDispatch', { params: { dispatchId: dispatchId } });
        const view = status === 200 ? (body as DispatchView) : undefined;
        return view?.execution.status === 'completed' ? view : undefined;
      }, 60_000),
    ),
  );
  const spans = views.map((view) => ({
    view,
    from: Date.parse(view.receipts.find((receipt) => receipt.event === 'dispatch_submitted')?.at ?? ''),
    to: Date.parse(view.execution.completedAt ?? ''),
  })).sort((a, b) => a.from - b.from);
  // The most runs submitted and not yet known to be over at any instant, from the ledger's own times.
  const most = Math.max(...spans.map(({ from }) => spans.filter((span) => span.from <= from && span.to > from).length));
  const start = spans[0]?.from ?? 0;
  print(table(['dispatch', 'origin', 'submitted', 'completed'], spans.map(({ view, from, to }) => [view.dispatchId, view.origin, `+${((from - start) / 1000).toFixed(1)} s`, `+${((to - start) / 1000).toFixed(1)} s`]), { width: 100 }));
  print(`  at most ${most} run(s) at once; admitted in turn from planner and lead-agent as slots freed`);
}

/**
 * Manual mode (CONTRACT §13): a dispatch to the manual target `desk` is recorded and waits for a
 * person; their `manual_result_attested` satisfies the gate, which says it rests on their word — and
 * the demo agent's /stats shows nothing was ever submitted to it.
 */
async function manualDemo(state: LocalState, run: string, print: (line: string) => void): Promise<void> {
  const info = state.info;
  if (!info) return;
  const dispatchId = `d-demo-${run}-manual`;
  print(`demo: a dispatch to the manual target ${MANUAL_DESK_TARGET} (a person does the work; nothing is submitted)`);
  await sendDispatchBody(info, JSON.stringify({ dispatchId, origin: 'planner', target: MANUAL_DESK_TARGET, task: { goal: 'file the quarterly report by hand' }, delivery: { mode: 'detached' } }));
  const viewNow = async () => {
    const { status, body } = await call(info, 'planner', 'getDispatch', { params: { dispatchId: dispatchId } });
    return status === 200 ? (body as DispatchView) : undefined;
  };
  const waiting = await waitFor(`${dispatchId} to wait for a person`, async () => ((await viewNow())?.submission.waitingFor === 'person' ? viewNow() : undefined));
  print(`  ${dispatchId}: ${waiting.phase}, waiting for ${waiting.submission.waitingFor ?? '—'}; ${waiting.unknowns[0] ?? ''}`);
  const attestation = { attestationId: `ma-${run}`, kind: 'manual_result_attested', note: 'report filed by hand at the desk', evidenceRef: 'out/report.md' };
  const recorded = await call(info, 'planner', 'attestManual', { params: { dispatchId: dispatchId } }, attestation);
  print(`  POST /dispatches/${dispatchId}/manual ${attestation.kind} → ${recorded.status} (basis ${(recorded.body as { basis?: string }).basis ?? '—'}, recorded by ${(recorded.body as { recordedBy?: string }).recordedBy ?? '—'})`);
  const attested = await waitFor(`${dispatchId}'s gate`, async () => {
    const view = await viewNow();
    return view?.gate.satisfied ? view : undefined;
  });
  print(`  gate satisfied: ${attested.gate.reasons.join('; ')}`);
  print(`  receipts: ${attested.receipts.map((receipt) => receipt.event).join(', ')} · manual attestations: ${attested.manualAttestations.map((entry) => `${entry.kind} (${entry.basis})`).join(', ')}`);
  const stats = (await (await fetch(`${info.demoAgentUrl}/stats`)).json()) as { submissions: Record<string, number> };
  print(`  the demo agent's /stats: ${stats.submissions[dispatchId] ?? 0} submission(s) for ${dispatchId} — never submitted anywhere`);
}

/** The bus path: an event put on the local bus reaches the event log as EventBridge delivers it. */
async function busProbe(state: LocalState, print: (line: string) => void): Promise<void> {
  const info = state.info;
  if (!info) return;
  const clients = localClients({ dynamodbEndpoint: info.dynamodbEndpoint, sqsEndpoint: info.sqsEndpoint, s3Endpoint: info.s3Endpoint, motoEndpoint: info.eventBridgeEndpoint });
  try {
    const probe = `probe-${Date.now()}`;
    await clients.eventBridge.send(
      new PutEventsCommand({ Entries: [{ EventBusName: info.eventBusName, Source: 'dispatch-ledger.demo', DetailType: 'Demo Probe', Detail: JSON.stringify({ probe }) }] }),
    );
    await waitFor('the probe event in the event log', () => readJsonl<{ detail?: { probe?: string } }>(info.eventLog).find((event) => event.detail?.probe === probe));
    print(`the local bus delivers to ${info.eventLog} (a "Demo Probe" event went through)`);
  } finally {
    clients.destroy();
  }
}
