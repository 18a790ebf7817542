import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { ensureLedgerTable } from '../../local/resources.js';
import { dueShardOf, LedgerTable } from '../../shared/adapters/ledger-table.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import type { DispatchState } from '../../shared/dispatch/state.js';
import { accepted, blocked, IllegalTransitionError, submitted } from '../../shared/dispatch/transitions.js';
import type { EvidenceCheck, LedgerStore, PastAttempt } from '../../shared/ledger/port.js';
import { engineClients, loopbackOnly, uniqueName } from '../support/engines.js';
import { newDispatchFactory, NOW } from '../support/factories.js';
import { MemoryStore } from '../support/memory-store.js';
import { advance } from '../support/states.js';

/**
 * The ledger store's contract, run against the DynamoDB table and against the in-memory fake the pure
 * tests use: the fake may only stand in for what it does exactly as the table does.
 */
const clients = engineClients();
const dynamodb = loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: inject('engines').dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
/** A table of its own for each test, so what one lists is only what it wrote. */
async function freshTable(): Promise<LedgerTable> {
  const tableName = uniqueName('contract');
  await ensureLedgerTable(clients.dynamodb, tableName);
  return new LedgerTable(DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } }), { tableName, retentionSeconds: 86_400 });
}
afterAll(() => {
  clients.destroy();
  dynamodb.destroy();
});

const stores: Array<[string, () => Promise<LedgerStore>]> = [
  ['the DynamoDB table', freshTable],
  ['the in-memory fake', async () => new MemoryStore()],
];

const fresh = () => accepted(newDispatchFactory({ dispatchId: uniqueName('d') }), NOW);
const running = (start: DispatchState) => submitted(start, { kind: 'accepted', runId: 'r-1', status: 'running', requestId: 'q' }, DEFAULT_RETRY_POLICY, NOW);
const later = (seconds: number) => new Date(NOW.getTime() + seconds * 1000);
const past = (state: DispatchState, stateVersion: number, receipts = state.receipts): PastAttempt => ({
  dispatchId: state.dispatchId,
  attempt: state.attempt,
  runId: state.runId,
  receipts,
  execution: state.execution,
  endedAt: later(60).toISOString(),
  reason: 'retry it',
  superseded: true,
  stateVersion,
});

describe.each(stores)('the ledger store contract: %s', (_name, storeOf) => {
  it('creates a state once: a second create is a conflict carrying the one stored', async () => {
    const store = await storeOf();
    const start = fresh();
    const first = running(start);
    expect(await store.commit(start, first)).toEqual({ kind: 'committed' });
    const again = await store.commit(start, blocked(start, 'unknown_target', 'x', NOW));
    expect(again.kind).toBe('conflict');
    expect(again.kind === 'conflict' && again.existing?.runId).toBe('r-1');
    expect((await store.getState(start.dispatchId))?.version).toBe(1);
  });

  it('replaces a state only from the version and phase stored', async () => {
    const store = await storeOf();
    const start = fresh();
    const first = running(start);
    await store.commit(start, first);
    const second = advance(first, 'activity', later(5));
    expect(await store.commit(first, second)).toEqual({ kind: 'committed' });
    // A writer still holding the first version loses.
    expect((await store.commit(first, advance(first, 'activity', later(6)))).kind).toBe('conflict');
    expect((await store.getState(start.dispatchId))?.updatedAt).toBe(later(5).toISOString());
  });

  it('refuses an illegal transition before writing anything', async () => {
    const store = await storeOf();
    const start = fresh();
    const first = blocked(start, 'unknown_target', 'x', NOW);
    await store.commit(start, first);
    await expect(store.commit(first, advance(first, 'completed', later(1), { phase: 'submitted' }))).rejects.toThrow(IllegalTransitionError);
    expect((await store.getState(start.dispatchId))?.phase).toBe('blocked');
  });

  it('commits a redispatch and the record of the attempt it ended together: both or neither', async () => {
    const store = await storeOf();
    const start = fresh();
    const first = running(start);
    await store.commit(start, first);
    const fenced = advance(first, 'superseded', later(60), { phase: 'accepted', attempt: 2, runId: null, receipts: [] });
    // A writer that read the state before another change loses: and no record of an ended attempt is left.
    const changed = advance(first, 'activity', later(30));
    await store.commit(first, changed);
    expect((await store.commit(first, fenced, past(first, first.version))).kind).toBe('conflict');
    expect(await store.listPastAttempts(start.dispatchId)).toEqual([]);
    // From the state stored, both land.
    const refenced = advance(changed, 'superseded', later(61), { phase: 'accepted', attempt: 2, runId: null, receipts: [] });
    expect(await store.commit(changed, refenced, past(changed, changed.version))).toEqual({ kind: 'committed' });
    expect((await store.listPastAttempts(start.dispatchId)).map((attempt) => [attempt.attempt, attempt.runId, attempt.stateVersion])).toEqual([[1, 'r-1', changed.version]]);
    expect((await store.getState(start.dispatchId))?.attempt).toBe(2);
  });

  it('keeps one record per redispatch, oldest attempt first, then by the version it ended', async () => {
    const store = await storeOf();
    const state = running(fresh());
    await store.archiveAttempt({ ...past(state, 7), attempt: 2 });
    await store.archiveAttempt(past(state, 5));
    await store.archiveAttempt(past(state, 3, []));
    await store.archiveAttempt(past(state, 5)); // the same record again: still one
    const kept = await store.listPastAttempts(state.dispatchId);
    expect(kept.map((attempt) => [attempt.attempt, attempt.stateVersion])).toEqual([
      [1, 3],
      [1, 5],
      [2, 7],
    ]);
  });

  it('lists what is due: at most the limit per shard, the longest due first, nothing not yet due', async () => {
    const store = await storeOf();
    // Dispatches that land in one shard of the due index.
    const shard = dueShardOf('d-shard-probe');
    const ids: string[] = [];
    for (let index = 0; ids.length < 4; index += 1) if (dueShardOf(`d-due-${index}`) === shard) ids.push(`d-due-${index}`);
    for (const [index, dispatchId] of ids.entries()) {
      const start = accepted(newDispatchFactory({ dispatchId }), NOW);
      const first = running(start);
      await store.commit(start, { ...first, dueAt: later(100 - index * 10).toISOString() });
    }
    const idsOf = (entries: ReadonlyArray<{ dispatchId: string }>) => entries.map((entry) => entry.dispatchId);
    expect(await store.listDue(later(95), 2)).toEqual([
      { dispatchId: ids[3], dueAt: later(70).toISOString() },
      { dispatchId: ids[2], dueAt: later(80).toISOString() },
    ]); // three are due: the two longest due
    expect(idsOf(await store.listDue(later(200), 10)).sort()).toEqual([...ids].sort());
    expect(await store.listDue(later(60), 10)).toEqual([]);
    // A deferral moves only the due time it saw.
    await store.deferDue({ dispatchId: ids[3] as string, dueAt: later(1).toISOString() }, later(500));
    await store.deferDue({ dispatchId: ids[2] as string, dueAt: later(80).toISOString() }, later(500));
    expect(idsOf(await store.listDue(later(95), 10))).toEqual([ids[3], ids[1]]);
  });

  it('records the first evidence check of an attempt and returns it to later writers', async () => {
    const store = await storeOf();
    const check: EvidenceCheck = { dispatchId: uniqueName('d'), origin: 'planner', target: 'demo-agent', runId: 'r-1', attempt: 1, outcome: 'handled', expected: ['a'], found: ['a'], missing: [], invalid: [], files: [{ ref: 'a', sha256: 'f'.repeat(64), bytes: 1, checkedAt: NOW.toISOString() }], checkedAt: NOW.toISOString(), error: null };
    expect(await store.putEvidenceCheck(check)).toEqual({ kind: 'written' });
    const second = await store.putEvidenceCheck({ ...check, outcome: 'orphan_no_delivery', files: [] });
    expect(second).toEqual({ kind: 'exists', existing: check });
    expect(await store.getEvidenceCheck(check.dispatchId, 1)).toEqual(check);
  });

  it('renews a claim only from the claim it read', async () => {
    const store = await storeOf();
    const message = { dispatchId: uniqueName('d'), origin: 'planner', contentHash: 'sha256:x', messageId: 'm', senderId: null, receivedAt: NOW.toISOString(), claimUntil: later(60).toISOString(), content: { valid: false as const, target: null, errors: [], bodyPreview: '{}', bodyRef: null, bodyBytes: 2 } };
    expect(await store.putAcceptedMessage(message)).toEqual({ kind: 'written' });
    expect((await store.putAcceptedMessage({ ...message, messageId: 'm-2' })).kind).toBe('exists');
    expect(await store.renewClaim(message.dispatchId, later(60).toISOString(), later(120).toISOString())).toBe(true);
    expect(await store.renewClaim(message.dispatchId, later(60).toISOString(), later(180).toISOString())).toBe(false);
    expect((await store.getAcceptedMessage(message.dispatchId))?.claimUntil).toBe(later(120).toISOString());
  });
});
