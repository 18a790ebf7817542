import { Random } from './random.js';

/**
 * The census's workload: a seeded plan of dispatch messages and what each must come out as. Valid
 * dispatches drive the demo agent through every behaviour of CONTRACT §8; duplicates, conflicts and
 * poison cover every intake outcome of §1. The plan is data; `census.ts` sends it and `checker.ts`
 * judges the result against it.
 */

export const ORIGIN = 'census';
/** A registered target nothing listens on: every submission is unavailable until the budget is spent. */
export const UNREACHABLE_TARGET = 'census-unreachable';
/**
 * A second demo agent under a concurrency limit the census raises and lowers while dispatches wait for
 * it (CONTRACT §11): it counts its own open runs, so the checker can hold each run it opened to the
 * limit in force.
 */
export const LIMITED_TARGET = 'census-limited';
/**
 * The limits the census switches between, and how long each holds: the high one spreads the slots over
 * several shards, the low one is a single slot, so runs admitted under the high one drain for seconds
 * while it stands.
 */
export const LIMIT_CHANGE = { low: 1, high: 10, lowSeconds: 5, highSeconds: 3, runSeconds: { min: 2, max: 5 }, changesPerDispatch: 0.25, atLeastChanges: 12 } as const;

export type Behavior =
  | 'complete'
  | 'complete_without_evidence'
  | 'stall'
  | 'stall_resume'
  | 'lose_callback'
  | 'vanish'
  | 'lookup_unavailable'
  | 'await_approval'
  | 'fail'
  | 'slow'
  | 'flaky_submit'
  | 'reject';

/** Where a valid dispatch must end once the census has drained. */
export type ExpectedFinal =
  | { readonly kind: 'handled' }
  /** Completed with nothing expected: nothing to prove, so `unverified`. */
  | { readonly kind: 'completed_unverified' }
  | { readonly kind: 'orphan' }
  | { readonly kind: 'failed' }
  | { readonly kind: 'cancelled' }
  /** Still unknown: the monitor lost sight of it, for one of these reasons. */
  | { readonly kind: 'unknown'; readonly monitorStatuses: readonly string[] }
  | { readonly kind: 'blocked'; readonly code: BlockClass };

export const REJECTION_CLASSES = ['not_json', 'not_an_object', 'too_deep', 'no_readable_dispatch_id', 'no_readable_origin', 'conflict'] as const;
export type RejectionClass = (typeof REJECTION_CLASSES)[number];
export const BLOCK_CLASSES = ['invalid_fields', 'unknown_target', 'unknown_parent', 'hop_budget_exceeded', 'target_rejected', 'retry_budget_spent'] as const;
export type BlockClass = (typeof BLOCK_CLASSES)[number];

export interface DispatchPlan {
  readonly dispatchId: string;
  readonly behavior: Behavior | null;
  readonly expectedEvidence: readonly string[];
  readonly expected: ExpectedFinal;
  /** await_approval: what the census decides when the approval is requested. */
  readonly approval?: 'approve' | 'cancel';
  /** Forced redispatch once submitted, racing the run (slow) or its completion (complete). */
  readonly redispatch?: boolean;
  /** The dispatch the census made to be orphaned (completes without the evidence it was asked for). */
  readonly injectedOrphan?: boolean;
  /** Sent to LIMITED_TARGET, whose limit changes while it runs. */
  readonly limited?: boolean;
  /** The table is unavailable for it until its message is in the DLQ; then redriven (`ledger dlq redrive`), it must come back as this dispatch. */
  readonly dlqRoundTrip?: boolean;
}

export type SendRole = 'original' | 'duplicate_concurrent' | 'duplicate_late' | 'conflict' | 'rejection' | 'blocked';

export interface PlannedSend {
  /** `first`: sent at the start; `late`: after the late delay (late duplicates, conflicts, children of dispatches in the ledger). */
  readonly wave: 'first' | 'late';
  readonly role: SendRole;
  readonly body: string;
  /** The dispatchId the body carries when it has a readable one. */
  readonly dispatchId: string | null;
  /** For role `rejection`/`conflict`: the reason the rejection must carry. */
  readonly rejection?: RejectionClass;
  /**
   * A dispatch the ledger must hold before this is sent: a child names its parent, which must be in
   * the ledger for its hop to be derived (a child taken in first is held for it, `waitingFor: parent`, up to the hold).
   */
  readonly after?: string;
}

export interface Workload {
  readonly seed: number;
  readonly dispatches: readonly DispatchPlan[];
  readonly sends: readonly PlannedSend[];
}

export interface WorkloadOptions {
  readonly dispatches: number;
  readonly seed: number;
  /** The timeouts every census dispatch carries (seconds), so verdicts come in seconds. */
  readonly timeouts: { readonly stallAfterSeconds: number; readonly approvalWaitSeconds: number; readonly deliveryGraceSeconds: number };
  /** stall_resume: how long the stalled run stays silent before it completes. */
  readonly resumeAfterSeconds: number;
  /** slow: how long a slow run works. */
  readonly slowSeconds: number;
}

/** Shares of the valid dispatches, by behaviour (the rest complete with evidence). */
const SHARES: ReadonlyArray<readonly [Behavior, number]> = [
  ['complete_without_evidence', 0.02],
  ['slow', 0.05],
  ['stall', 0.03],
  ['stall_resume', 0.02],
  ['lose_callback', 0.04],
  ['vanish', 0.03],
  ['lookup_unavailable', 0.03],
  ['await_approval', 0.05],
  ['fail', 0.03],
  ['flaky_submit', 0.03],
];
const DUPLICATE_SHARE = 0.2;
const POISON_SHARE = 0.01;
/** Conflicts (another content under an id the ledger holds), on top of the poison's own. */
const CONFLICT_SHARE = 0.0025;
const REDISPATCH_SHARE = 0.02;
/** The fewest of each behaviour and each poison class, so a small census still covers every kind. */
const AT_LEAST = 3;
/** Dispatches to the limited target, sent together at the start so it is saturated while its limit changes. */
const LIMITED_SHARE = 0.03;
const LIMITED_AT_LEAST = 36;
/** Dispatches whose message makes a DLQ round trip. */
const DLQ_SHARE = 0.005;

const MAX_HOPS_DEFAULT = 4;

export function planWorkload(options: WorkloadOptions): Workload {
  const random = new Random(options.seed).fork('workload');
  const n = options.dispatches;
  const id = (i: number, kind = 'd'): string => `c${options.seed}-${kind}${String(i).padStart(6, '0')}`;

  // Behaviours: fixed counts from the shares (at least AT_LEAST each), shuffled over the ids.
  const behaviors: Behavior[] = [];
  for (const [behavior, share] of SHARES) behaviors.push(...Array<Behavior>(Math.max(AT_LEAST, Math.round(n * share))).fill(behavior));
  if (behaviors.length > n) throw new RangeError(`at least ${behaviors.length} dispatches are needed to cover every behaviour, got ${n}`);
  behaviors.push(...Array<Behavior>(n - behaviors.length).fill('complete'));
  const order = random.shuffle(behaviors);

  const dispatches: DispatchPlan[] = [];
  const sends: PlannedSend[] = [];
  const bodies = new Map<string, string>();
  const message = (dispatchId: string, fields: Record<string, unknown>): string =>
    JSON.stringify({ dispatchId, origin: ORIGIN, target: 'demo-agent', timeouts: options.timeouts, ...fields });

  let redispatches = 0;
  const redispatchTarget = Math.max(AT_LEAST * 2, Math.round(n * REDISPATCH_SHARE));
  order.forEach((behavior, i) => {
    const dispatchId = id(i);
    // Most complete with evidence; some carry none (nothing to prove: `unverified`, never handled).
    const evidenceCount = behavior === 'complete_without_evidence' ? random.int(1, 2) : random.chance(0.85) ? random.int(1, 2) : 0;
    const expectedEvidence = Array.from({ length: evidenceCount }, (_, k) => `out/${dispatchId}-${k}.md`);
    const task: Record<string, unknown> = { goal: `census ${dispatchId}`, behavior: behavior === 'stall_resume' ? 'stall' : behavior };
    if (behavior === 'stall_resume') task['resumeAfterSeconds'] = options.resumeAfterSeconds;
    if (behavior === 'slow') task['seconds'] = options.slowSeconds;
    const approval = behavior === 'await_approval' ? (random.chance(0.8) ? 'approve' : 'cancel') : undefined;
    // Redispatches race a working run (slow) or a completion (complete), with evidence expected so the
    // new attempt must prove itself too.
    const redispatch = (behavior === 'slow' || behavior === 'complete') && evidenceCount > 0 && redispatches < redispatchTarget && random.chance(0.5);
    if (redispatch) redispatches += 1;
    const completes: ExpectedFinal = evidenceCount > 0 ? { kind: 'handled' } : { kind: 'completed_unverified' };
    const expected: ExpectedFinal = (() => {
      switch (behavior) {
        case 'complete_without_evidence':
          return { kind: 'orphan' };
        case 'fail':
          return { kind: 'failed' };
        case 'stall':
          // A lookup outage (a census fault) can be what the monitor saw last.
          return { kind: 'unknown', monitorStatuses: ['stalled', 'lookup_unavailable'] };
        case 'vanish':
          return { kind: 'unknown', monitorStatuses: ['target_not_found', 'lookup_unavailable'] };
        case 'lookup_unavailable':
          return { kind: 'unknown', monitorStatuses: ['lookup_unavailable'] };
        case 'await_approval':
          return approval === 'cancel' ? { kind: 'cancelled' } : completes;
        default:
          return completes;
      }
    })();
    dispatches.push({
      dispatchId,
      behavior,
      expectedEvidence,
      expected,
      ...(approval ? { approval } : {}),
      ...(redispatch ? { redispatch } : {}),
      ...(behavior === 'complete_without_evidence' ? { injectedOrphan: true } : {}),
    });
    const body = message(dispatchId, { task, ...(expectedEvidence.length > 0 ? { expectedEvidence } : {}) });
    bodies.set(dispatchId, body);
    sends.push({ wave: 'first', role: 'original', body, dispatchId });
  });

  // 20 % duplicates: the same body again, half in the same batch as the original (concurrent), half late.
  const duplicated = random.shuffle(dispatches).slice(0, Math.round(n * DUPLICATE_SHARE));
  duplicated.forEach((plan, k) => {
    const body = bodies.get(plan.dispatchId) ?? '';
    sends.push({ wave: k % 2 === 0 ? 'first' : 'late', role: k % 2 === 0 ? 'duplicate_concurrent' : 'duplicate_late', body, dispatchId: plan.dispatchId });
  });

  // 1 % poison, every class at least AT_LEAST times: rejections and blocked dispatches.
  const poison = Math.max(AT_LEAST * (REJECTION_CLASSES.length + BLOCK_CLASSES.length), Math.round(n * POISON_SHARE));
  const classes = [...REJECTION_CLASSES, ...BLOCK_CLASSES];
  // hop_budget_exceeded needs a parent in the ledger whose budget is spent: one per child, sent first.
  for (let k = 0; k < poison; k += 1) {
    const poisonClass = classes[k % classes.length] as RejectionClass | BlockClass;
    const dispatchId = id(k, 'p');
    const late = { wave: 'late' as const };
    switch (poisonClass) {
      case 'not_json':
        sends.push({ wave: 'first', role: 'rejection', rejection: poisonClass, body: `{"dispatchId": "${dispatchId}", "origin": "${ORIGIN}", oops`, dispatchId: null });
        break;
      case 'not_an_object':
        sends.push({ wave: 'first', role: 'rejection', rejection: poisonClass, body: JSON.stringify([dispatchId, ORIGIN]), dispatchId: null });
        break;
      case 'too_deep': {
        let nested: unknown = { leaf: true };
        for (let depth = 0; depth < 80; depth += 1) nested = { inner: nested };
        sends.push({ wave: 'first', role: 'rejection', rejection: poisonClass, body: JSON.stringify({ deep: nested }), dispatchId: null });
        break;
      }
      case 'no_readable_dispatch_id':
        sends.push({ wave: 'first', role: 'rejection', rejection: poisonClass, body: JSON.stringify({ dispatchId: 'has spaces!', origin: ORIGIN, target: 'demo-agent', task: {} }), dispatchId: null });
        break;
      case 'no_readable_origin':
        sends.push({ wave: 'first', role: 'rejection', rejection: poisonClass, body: JSON.stringify({ dispatchId, origin: 'Not An Origin', target: 'demo-agent', task: {} }), dispatchId });
        break;
      case 'conflict': {
        // Another content under an id the ledger already holds: the original stands untouched.
        const original = random.pick(dispatches);
        sends.push({ ...late, role: 'conflict', rejection: 'conflict', body: message(original.dispatchId, { task: { goal: `conflicting ${k}` } }), dispatchId: original.dispatchId, after: original.dispatchId });
        break;
      }
      case 'invalid_fields':
        blockedPlan(dispatchId, poisonClass);
        sends.push({ wave: 'first', role: 'blocked', body: message(dispatchId, { task: {}, timeouts: { stallAfterSeconds: 0 } }), dispatchId });
        break;
      case 'unknown_target':
        blockedPlan(dispatchId, poisonClass);
        sends.push({ wave: 'first', role: 'blocked', body: message(dispatchId, { target: 'census-no-such-target', task: {} }), dispatchId });
        break;
      case 'unknown_parent':
        blockedPlan(dispatchId, poisonClass);
        sends.push({ wave: 'first', role: 'blocked', body: message(dispatchId, { task: {}, parentDispatchId: `${dispatchId}-never-sent` }), dispatchId });
        break;
      case 'hop_budget_exceeded': {
        // The parent spends its budget (maxHops 0) and completes; its child (hop 1) is blocked before any contact.
        const parentId = id(k, 'h');
        dispatches.push({ dispatchId: parentId, behavior: 'complete', expectedEvidence: [], expected: { kind: 'completed_unverified' } });
        sends.push({ wave: 'first', role: 'original', body: message(parentId, { task: { behavior: 'complete' }, maxHops: 0 }), dispatchId: parentId });
        blockedPlan(dispatchId, poisonClass);
        sends.push({ ...late, role: 'blocked', body: message(dispatchId, { task: {}, parentDispatchId: parentId, maxHops: MAX_HOPS_DEFAULT }), dispatchId, after: parentId });
        break;
      }
      case 'target_rejected':
        blockedPlan(dispatchId, poisonClass, 'reject');
        sends.push({ wave: 'first', role: 'blocked', body: message(dispatchId, { task: { behavior: 'reject' } }), dispatchId });
        break;
      case 'retry_budget_spent':
        blockedPlan(dispatchId, poisonClass);
        sends.push({ wave: 'first', role: 'blocked', body: message(dispatchId, { target: UNREACHABLE_TARGET, task: {} }), dispatchId });
        break;
    }
  }

  // Conflicts beyond the poison's share: other content under ids the ledger already holds, sent late.
  for (let k = 0; k < Math.max(AT_LEAST, Math.round(n * CONFLICT_SHARE)); k += 1) {
    const original = random.pick(dispatches);
    sends.push({ wave: 'late', role: 'conflict', rejection: 'conflict', body: message(original.dispatchId, { task: { goal: `conflicting content ${k}` } }), dispatchId: original.dispatchId, after: original.dispatchId });
  }

  // Added last, so the other dispatches and their behaviours stay what the seed made them. Neither kind is
  // duplicated, conflicted or made a parent: each stands for its own fault alone.
  for (let k = 0; k < Math.max(LIMITED_AT_LEAST, Math.round(n * LIMITED_SHARE)); k += 1) {
    const dispatchId = id(k, 'l');
    const task = { goal: `census ${dispatchId}`, behavior: 'slow', seconds: random.int(LIMIT_CHANGE.runSeconds.min, LIMIT_CHANGE.runSeconds.max) };
    dispatches.push({ dispatchId, behavior: 'slow', expectedEvidence: [], expected: { kind: 'completed_unverified' }, limited: true });
    sends.push({ wave: 'first', role: 'original', body: message(dispatchId, { target: LIMITED_TARGET, task }), dispatchId });
  }
  for (let k = 0; k < Math.max(AT_LEAST, Math.round(n * DLQ_SHARE)); k += 1) {
    const dispatchId = id(k, 'q');
    const expectedEvidence = [`out/${dispatchId}-0.md`];
    dispatches.push({ dispatchId, behavior: 'complete', expectedEvidence, expected: { kind: 'handled' }, dlqRoundTrip: true });
    sends.push({ wave: 'first', role: 'original', body: message(dispatchId, { task: { goal: `census ${dispatchId}`, behavior: 'complete' }, expectedEvidence }), dispatchId });
  }
  const limitedIds = new Set(dispatches.filter((plan) => plan.limited).map((plan) => plan.dispatchId));

  function blockedPlan(dispatchId: string, code: BlockClass, behavior: Behavior | null = null): void {
    dispatches.push({ dispatchId, behavior, expectedEvidence: [], expected: { kind: 'blocked', code } });
  }

  // Originals and their concurrent duplicates go out in the same batches: shuffle the first wave, but
  // keep each concurrent duplicate right after its original.
  // The limited target's dispatches go first, together, so it has a queue from the start.
  const isLimited = (send: PlannedSend): boolean => send.dispatchId !== null && limitedIds.has(send.dispatchId);
  const first = random.shuffle(sends.filter((send) => send.wave === 'first' && send.role !== 'duplicate_concurrent' && !isLimited(send)));
  const concurrent = new Map(sends.filter((send) => send.role === 'duplicate_concurrent').map((send) => [send.dispatchId, send]));
  const ordered: PlannedSend[] = sends.filter(isLimited);
  for (const send of first) {
    ordered.push(send);
    const twin = send.role === 'original' && send.dispatchId ? concurrent.get(send.dispatchId) : undefined;
    if (twin) ordered.push(twin);
  }
  ordered.push(...random.shuffle(sends.filter((send) => send.wave === 'late')));
  return { seed: options.seed, dispatches, sends: ordered };
}
