/**
 * `npx tsx scripts/regression-check.ts [name…]`: shows that each regression test of issue 12 fails
 * without its fix. For every entry it puts the old behaviour back in one product file (the fixed text
 * replaced by the broken one), runs the test that pins it, and restores the file — whatever happens.
 * A fix whose test still passes when the fix is taken out is reported as "guard only". Not part of
 * `npm test` (it runs vitest once per entry, a few minutes in all).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

interface Regression {
  readonly name: string;
  readonly file: string;
  readonly fixed: string;
  readonly broken: string;
  readonly test: string;
  readonly pattern: string;
}

const REGRESSIONS: readonly Regression[] = [
  {
    "name": "stall window",
    "file": "shared/dispatch/transitions.ts",
    "fixed": "return recorded + coalescingWindowMs(state) + state.timeouts.stallAfterSeconds * 1000;",
    "broken": "return recorded + state.timeouts.stallAfterSeconds * 1000;",
    "test": "test/unit/lifecycle.test.ts",
    "pattern": "true silence"
  },
  {
    "name": "adopt approval",
    "file": "shared/dispatch/transitions.ts",
    "fixed": "if (run.status === 'waiting_for_approval' && run.pendingApproval && held?.approvalId !== run.pendingApproval.approvalId) {",
    "broken": "if (false) {",
    "test": "test/unit/lifecycle.test.ts",
    "pattern": "adopts a pending approval"
  },
  {
    "name": "coalesce approval heartbeats",
    "file": "shared/dispatch/transitions.ts",
    "fixed": "const quiet = waiting ? execution.status === 'waiting_for_approval' : execution.status === 'running' && execution.monitorStatus === null;",
    "broken": "const quiet = execution.status === 'running' && execution.monitorStatus === null;",
    "test": "test/unit/lifecycle.test.ts",
    "pattern": "coalesces heartbeats during an approval wait"
  },
  {
    "name": "terminal submission",
    "file": "shared/dispatch/transitions.ts",
    "fixed": "return isTerminal(outcome.status) ? finished(next, outcome.status, undefined, now, 'same_write') : next;",
    "broken": "return next;",
    "test": "test/integration/run-callbacks.test.ts",
    "pattern": "already completed through the final transition"
  },
  {
    "name": "resume any age",
    "file": "shared/usecases/intake.ts",
    "fixed": "    if (Date.parse(existing.claimUntil) > now.getTime()) throw new DispatchInProgressError(dispatchId);",
    "broken": "    if (now.getTime() - Date.parse(existing.receivedAt) > 24 * 3600 * 1000) return { outcome: 'duplicate', dispatchId, target: 'unknown' };\n    if (Date.parse(existing.claimUntil) > now.getTime()) throw new DispatchInProgressError(dispatchId);",
    "test": "test/integration/intake-edges.test.ts",
    "pattern": "two days old"
  },
  {
    "name": "coalesced answer",
    "file": "shared/api/lifecycle-routes.ts",
    "fixed": "if (outcome.kind === 'coalesced') return { status: 200, body: { applied: false, coalesced: true } };",
    "broken": "if (outcome.kind === 'coalesced') return { status: 202, body: { applied: true } };",
    "test": "test/integration/run-callbacks.test.ts",
    "pattern": "coalesced heartbeat"
  },
  {
    "name": "late any attempt",
    "file": "shared/api/lifecycle-routes.ts",
    "fixed": "if (state.attempt > 1 && (await deps.store.listPastAttempts(state.dispatchId)).some((past) => past.runId === runId)) return 'superseded';",
    "broken": "",
    "test": "test/integration/run-callbacks.test.ts",
    "pattern": "redispatched eleven times"
  },
  {
    "name": "not yet recorded in AWS",
    "file": "shared/api/lifecycle-routes.ts",
    "fixed": "if (message?.content.valid && reportsFor(caller, message.content.target)) throw notYet;",
    "broken": "if (message?.content.valid && caller.kind === 'open') throw notYet;",
    "test": "test/integration/run-callbacks.test.ts",
    "pattern": "not_yet_recorded to the target in AWS mode"
  },
  {
    "name": "task as text",
    "file": "shared/adapters/ledger-items.ts",
    "fixed": "const content = message.content.valid && message.content.task !== null ? { ...message.content, task: null, taskJson: JSON.stringify(message.content.task) } : message.content;",
    "broken": "const content = message.content;",
    "test": "test/integration/intake-edges.test.ts",
    "pattern": "nested 40 levels"
  },
  {
    "name": "anchor ttl",
    "file": "shared/adapters/item-kinds.ts",
    "fixed": "ttl: afterItsTime('receivedAt', 2),",
    "broken": "ttl: NEVER,",
    "test": "test/integration/intake-edges.test.ts",
    "pattern": "expiry on the accepted-message anchor"
  },
  {
    "name": "approval rounds",
    "file": "shared/ledger/repository.ts",
    "fixed": "export const UPDATE_ROUNDS = 8;",
    "broken": "export const UPDATE_ROUNDS = 3;",
    "test": "test/integration/run-callbacks.test.ts",
    "pattern": "lose races"
  },
  {
    "name": "attention since",
    "file": "shared/adapters/ledger-items.ts",
    "fixed": "item.feedAt = `${state.attentionSince ?? state.updatedAt}#${idHash(dispatchId)}`;",
    "broken": "item.feedAt = `${state.updatedAt}#${idHash(dispatchId)}`;",
    "test": "test/integration/monitor-verdicts.test.ts",
    "pattern": "when the problem began"
  },
  {
    "name": "lookup backoff",
    "file": "shared/dispatch/transitions.ts",
    "fixed": "const delay = Math.min(state.timeouts.stallAfterSeconds * 2 ** (lookups - 1), MAX_LOOKUP_BACKOFF_SECONDS);",
    "broken": "const delay = state.timeouts.stallAfterSeconds;",
    "test": "test/integration/monitor-verdicts.test.ts",
    "pattern": "backoff doubling"
  },
  {
    "name": "claim clock",
    "file": "shared/usecases/monitor.ts",
    "fixed": "  const claimed = await writeOnce(deps.store, stored, submissionClaimed(state, deps.now(), deps.claimSeconds));",
    "broken": "  const claimed = await writeOnce(deps.store, stored, submissionClaimed(state, new Date(Date.parse(state.dueAt ?? '')), deps.claimSeconds));",
    "test": "test/integration/monitor-verdicts.test.ts",
    "pattern": "clock at the write"
  },
  {
    "name": "handled from state only",
    "file": "shared/events/derive.ts",
    "fixed": "  if (newItem.kind === 'operator_receipt' && eventName === 'INSERT')",
    "broken": "  if (newItem.kind === 'check' && eventName === 'INSERT' && newItem.check.outcome === 'handled') return [{ detailType: 'Dispatch Handled', detail: newItem.check as never }];\n  if (newItem.kind === 'operator_receipt' && eventName === 'INSERT')",
    "test": "test/integration/evidence-seal.test.ts",
    "pattern": "fenced by a concurrent redispatch"
  },
  {
    "name": "recheck late upload",
    "file": "shared/api/evidence-routes.ts",
    "fixed": "  await recheckIfMissed(deps, dispatchId, ref);",
    "broken": "",
    "test": "test/integration/evidence-seal.test.ts",
    "pattern": "SHA-256 of each file"
  },
  {
    "name": "decode checks",
    "file": "shared/adapters/state-item.ts",
    "fixed": "= checked(item, STATE_ITEM.fields);",
    "broken": "= item;",
    "test": "test/integration/dispatch-view-bounds.test.ts",
    "pattern": "audit_failure"
  },
  {
    "name": "receipt for an old run",
    "file": "shared/api/receipt-routes.ts",
    "fixed": "  if (!(await whichRun(deps, state, submitted.runId))) {",
    "broken": "  if (submitted.runId !== state.runId && !state.supersededRuns.includes(submitted.runId)) {",
    "test": "test/integration/run-callbacks.test.ts",
    "pattern": "redispatched eleven times"
  },
  {
    "name": "view paging",
    "file": "shared/api/pages.ts",
    "fixed": "  const start = Math.max(0, end - limit);",
    "broken": "  const start = 0;",
    "test": "test/integration/dispatch-view-bounds.test.ts",
    "pattern": "newest 50 receipts"
  },
  {
    "name": "v2 fields kept",
    "file": "shared/usecases/intake.ts",
    "fixed": "      resultDelivery: message.resultDelivery,",
    "broken": "",
    "test": "test/integration/intake-edges.test.ts",
    "pattern": "keeps resultDelivery"
  },
  {
    "name": "notBefore 30 days",
    "file": "shared/usecases/intake.ts",
    "fixed": "  const read = withClockRules(readDispatchMessage(record.body), deps.now());",
    "broken": "  const read = readDispatchMessage(record.body);",
    "test": "test/integration/intake-edges.test.ts",
    "pattern": "more than 30 days ahead"
  },
  {
    "name": "seal restores (race 1)",
    "file": "shared/usecases/evidence-check.ts",
    "fixed": "  const now = await blobs.getBytes(key);\n  if (now && sha256Of(now) === sealed.sha256) return false;",
    "broken": "  return false;\n  const now = await blobs.getBytes(key);\n  if (now && sha256Of(now) === sealed.sha256) return false;",
    "test": "test/integration/evidence-seal.test.ts",
    "pattern": "racing PUTs"
  },
  {
    "name": "retried upload restores",
    "file": "shared/api/evidence-routes.ts",
    "fixed": "    await restore(before);\n    throw refuse(before);",
    "broken": "    throw refuse(before);",
    "test": "test/integration/evidence-seal.test.ts",
    "pattern": "died between its write"
  },
  {
    "name": "anchorless check unverified",
    "file": "shared/usecases/evidence-check.ts",
    "fixed": "  let error: string | null = unreadable;",
    "broken": "  let error: string | null = null;",
    "test": "test/integration/evidence-seal.test.ts",
    "pattern": "cannot be read: unverified"
  },
  {
    "name": "refresh keeps approval clock",
    "file": "shared/api/lifecycle-routes.ts",
    "fixed": "  const stallDue = !waiting && now.getTime() >= stallDeadline(state);",
    "broken": "  const stallDue = now.getTime() >= stallDeadline(state);",
    "test": "test/integration/run-callbacks.test.ts",
    "pattern": "waiting for approval whose lookup fails"
  },
  {
    "name": "defer failing due item",
    "file": "shared/usecases/monitor.ts",
    "fixed": "        await deps.store.deferDue(entry, new Date(deps.now().getTime() + seconds * 1000)).catch(() => undefined);",
    "broken": "",
    "test": "test/integration/monitor-verdicts.test.ts",
    "pattern": "out of the way"
  },
  {
    "name": "recheck even when due",
    "file": "shared/api/evidence-routes.ts",
    "fixed": "    if (!message?.content.valid || !message.content.expectedEvidence.includes(ref)) return;",
    "broken": "    if (!message?.content.valid || !message.content.expectedEvidence.includes(ref)) return;\n    if (state.dueAt !== null && Date.parse(state.dueAt) <= deps.now().getTime()) return;",
    "test": "test/integration/evidence-seal.test.ts",
    "pattern": "due already"
  },
  {
    "name": "fence and record in one write",
    "file": "shared/adapters/ledger-table.ts",
    "fixed": "    if (ended) return this.commitWithEnded(put, ended);",
    "broken": "    if (ended) await this.archiveAttempt(ended);",
    "test": "test/integration/store-contract.test.ts",
    "pattern": "both or neither"
  },
  {
    "name": "repeated approval request",
    "file": "shared/dispatch/transitions.ts",
    "fixed": "      if (execution.pendingApproval?.approvalId === event.approvalId) {",
    "broken": "      if (false) {",
    "test": "test/unit/lifecycle.test.ts",
    "pattern": "repeated approval request"
  },
  {
    "name": "bounded redispatch cycles",
    "file": "shared/dispatch/transitions.ts",
    "fixed": "    receipts: [],\n    evidence: { outcome: state.evidence.expectedCount > 0",
    "broken": "    receipts: state.receipts,\n    evidence: { ...state.evidence, outcome: state.evidence.expectedCount > 0",
    "test": "test/unit/lifecycle.test.ts",
    "pattern": "bounded through blocked"
  },
  {
    "name": "legacy handled states",
    "file": "shared/events/derive.ts",
    "fixed": "expected: [...(current.evidence.expected ?? [])]",
    "broken": "expected: [...need(current.evidence.expected, 'evidence.expected')]",
    "test": "test/unit/events-derive.test.ts",
    "pattern": "settled before the refs"
  },
  {
    "name": "transaction conflict is a lost race",
    "file": "shared/adapters/ledger-table.ts",
    "fixed": "      if (isTransactionConflict(error)) return { kind: 'conflict' };\n",
    "broken": "",
    "test": "test/integration/run-callbacks.test.ts",
    "pattern": "overlapped a transaction"
  },
  {
    "name": "seal only what was hashed",
    "file": "shared/usecases/evidence-check.ts",
    "fixed": "    if (!bytes || sha256Of(bytes) !== file.sha256) return undefined;",
    "broken": "    if (!bytes) return undefined;",
    "test": "test/integration/evidence-seal.test.ts",
    "pattern": "changed between its hash and its seal"
  },
  {
    "name": "audit every attempt",
    "file": "shared/dispatch/view.ts",
    "fixed": "  const findings = audit(state, stored, pastAttempts.flatMap((past) => past.receipts));",
    "broken": "  const findings = audit(state, stored);",
    "test": "test/unit/dispatch-view.test.ts",
    "pattern": "ended attempt that fails validation"
  },
  {
    "name": "retention keeps a live dispatch",
    "file": "shared/usecases/retention.ts",
    "fixed": "    if (await live.stateLives(message.dispatchId, options.now)) {",
    "broken": "    if (false) {",
    "test": "test/integration/retention.test.ts",
    "pattern": "while the dispatch lives on"
  },
  {
    "name": "retention leaves a reused id alone",
    "file": "shared/usecases/retention.ts",
    "fixed": "    if (await live.anchorHeld(message.dispatchId)) return { kind: 'kept', of: plan.of, why: 'id_taken_again' };",
    "broken": "",
    "test": "test/integration/retention.test.ts",
    "pattern": "taken again by a new dispatch"
  },
  {
    "name": "deferral moves only the due time seen",
    "file": "shared/adapters/ledger-table.ts",
    "fixed": "          ConditionExpression: 'attribute_exists(dueShard) AND dueAt = :seen',",
    "broken": "          ConditionExpression: 'attribute_exists(dueShard) OR dueAt = :seen',",
    "test": "test/integration/store-contract.test.ts",
    "pattern": "lists what is due"
  }
];

/** The file under change, put back if the script is interrupted (a signal skips `finally`). */
let restoring: { readonly file: string; readonly original: string } | undefined;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (restoring) writeFileSync(restoring.file, restoring.original);
    process.exit(130);
  });
}

/**
 * The product file that holds the fix: the entry's own, or — after a restructuring moved it — the one
 * file of the product's sources that holds its text.
 */
function fileOf(entry: Regression): string | undefined {
  const named = path.join(ROOT, entry.file);
  if (existsSync(named) && readFileSync(named, 'utf8').includes(entry.fixed)) return named;
  const sources = execFileSync('git', ['ls-files', 'shared', 'functions', 'packages', 'local', 'cli', 'infra'], { cwd: ROOT, encoding: 'utf8' })
    .split('\n')
    .filter((file) => file.endsWith('.ts') && !file.endsWith('.test.ts'));
  const holding = sources.filter((file) => readFileSync(path.join(ROOT, file), 'utf8').includes(entry.fixed));
  return holding.length === 1 ? path.join(ROOT, holding[0] as string) : undefined;
}

function run(entry: Regression): string {
  const file = fileOf(entry);
  if (!file) return 'the fix is in no product file (or in several): update the entry';
  const original = readFileSync(file, 'utf8');
  restoring = { file, original };
  writeFileSync(file, original.replace(entry.fixed, entry.broken));
  try {
    let output: string;
    try {
      output = execFileSync('npx', ['vitest', 'run', entry.test, '-t', entry.pattern], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (failed) {
      output = String((failed as { stdout?: unknown }).stdout ?? '');
    }
    const counts = /Tests: (\d+) passed, (\d+) failed/.exec(output);
    if (!counts) return 'no result';
    if (Number(counts[2]) > 0) return `fails without its fix (${counts[0]})`;
    return Number(counts[1]) > 0 ? `still passes without its fix: a guard only (${counts[0]})` : 'no test matched';
  } finally {
    writeFileSync(file, original);
    restoring = undefined;
  }
}

const only = process.argv.slice(2);
for (const entry of REGRESSIONS.filter((candidate) => only.length === 0 || only.includes(candidate.name))) {
  process.stdout.write(`${entry.name}: ${run(entry)} [${entry.test} -t "${entry.pattern}"]\n`);
}
