import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureLedgerTable } from '../../local/resources.js';
import { HotPathTable } from '../../shared/adapters/hot-path-table.js';
import { dueShardOf } from '../../shared/adapters/ledger-table.js';
import { LedgerDueIndex } from '../../shared/adapters/due-index.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import { stateOnly, type DispatchState, type NextState } from '../../shared/dispatch/state.js';
import { admitted, cancelledBeforeSubmission, waiting } from '../../shared/dispatch/transitions/flow.js';
import { applyRunEvent, reconcileLookup } from '../../shared/dispatch/transitions/run.js';
import { accepted, submitted, type NewDispatch } from '../../shared/dispatch/transitions/lifecycle.js';
import { blocked } from '../../shared/dispatch/transitions/core.js';
import { IllegalTransitionError } from '../../shared/dispatch/transitions/legal.js';
import { slotShardCaps } from '../../shared/dispatch/slots.js';
import { manualAttestation } from '../../shared/dispatch/manual.js';
import { operatorReceipt } from '../../shared/dispatch/receipts.js';
import { notStored, type DueIndex, type LedgerStoreWithWrites, type StoredState } from '../../shared/ledger/port.js';
import type { EvidenceCheck, EvidenceUpload, PastAttempt } from '../../shared/dispatch/records.js';
import { engineClients, loopbackOnly, uniqueName, testEngines } from '../support/engines.js';
import { newDispatchFactory, NOW } from '../support/factories.js';
import { MemoryStore } from '../support/memory-store.js';
import { advance } from '../support/states.js';

/**
 * The ledger store's contract, run against the DynamoDB table and against the in-memory fake the pure
 * tests use: the fake may only stand in for what it does exactly as the table does.
 */
const clients = engineClients();
const dynamodb = loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
/** A table of its own for each test, so what one lists is only what it wrote. */
const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
const tableNames = new WeakMap<LedgerStoreWithWrites, string>();
/** The intake's puts go out on a low-level client of their own (cacheMiddleware), marshalled by the table. */
const hotPath = loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' }, cacheMiddleware: true }));
async function freshTable(kind: 'table' | 'hot path' = 'table'): Promise<LedgerTable> {
  const tableName = uniqueName('contract');
  await ensureLedgerTable(clients.dynamodb, tableName);
  const options = { tableName, retentionSeconds: 86_400 };
  const table = kind === 'hot path' ? new HotPathTable(documents, options, hotPath) : new LedgerTable(documents, options);
  tableNames.set(table, tableName);
  return table;
}
/** The due index over the same items as `store` (the monitor's own adapter for the table). */
function dueIndexOf(store: LedgerStoreWithWrites): DueIndex {
  if (store instanceof MemoryStore) return store;
  const tableName = tableNames.get(store);
  if (!tableName) throw new Error('a store of this suite');
  return new LedgerDueIndex(documents, tableName);
}
afterAll(() => {
  clients.destroy();
  dynamodb.destroy();
  hotPath.destroy();
});

const stores: Array<[string, () => Promise<LedgerStoreWithWrites>]> = [
  ['the DynamoDB table', () => freshTable()],
  ["the DynamoDB table with the intake's hot path", () => freshTable('hot path')],
  ['the in-memory fake', async () => new MemoryStore()],
];

const fresh = () => accepted(newDispatchFactory({ dispatchId: uniqueName('d') }), NOW);
const running = (start: DispatchState) => submitted(start, { kind: 'accepted', runId: 'r-1', status: 'running', requestId: 'q' }, DEFAULT_RETRY_POLICY, NOW);
const later = (seconds: number) => new Date(NOW.getTime() + seconds * 1000);
/** A transition's output as a store holds it after the write that made it version `version`: the state alone, in its envelope. */
const storedAt = (next: NextState, version: number): StoredState => ({ state: stateOnly(next), version });
/** A dispatch built in memory, not stored yet: what its first write (a create) starts from. */
const unstored = (start: DispatchState): StoredState => notStored(stateOnly(start));
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
    expect(await store.commit(unstored(start), first)).toEqual({ kind: 'committed' });
    const again = await store.commit(unstored(start), blocked(start, 'unknown_target', 'x', NOW));
    expect(again.kind).toBe('conflict');
    expect(again.kind === 'conflict' && again.existing?.runId).toBe('r-1');
    expect((await store.getStored(start.dispatchId))?.version).toBe(1);
  });

  it('replaces a state only from the version and phase stored', async () => {
    const store = await storeOf();
    const start = fresh();
    const first = running(start);
    await store.commit(unstored(start), first);
    const v1 = storedAt(first, 1);
    const second = advance(v1.state, 'activity', later(5));
    expect(await store.commit(v1, second)).toEqual({ kind: 'committed' });
    // A writer still holding the first version loses.
    expect((await store.commit(v1, advance(v1.state, 'activity', later(6)))).kind).toBe('conflict');
    expect((await store.getState(start.dispatchId))?.updatedAt).toBe(later(5).toISOString());
  });

  it('refuses an illegal transition before writing anything', async () => {
    const store = await storeOf();
    const start = fresh();
    const first = blocked(start, 'unknown_target', 'x', NOW);
    await store.commit(unstored(start), first);
    const v1 = storedAt(first, 1);
    await expect(store.commit(v1, advance(v1.state, 'completed', later(1), { phase: 'submitted' }))).rejects.toThrow(IllegalTransitionError);
    expect((await store.getState(start.dispatchId))?.phase).toBe('blocked');
  });

  it('commits a redispatch and the record of the attempt it ended together: both or neither', async () => {
    const store = await storeOf();
    const start = fresh();
    const first = running(start);
    await store.commit(unstored(start), first);
    const v1 = storedAt(first, 1);
    const fenced = advance(v1.state, 'superseded', later(60), { phase: 'accepted', attempt: 2, runId: null, receipts: [] });
    // A writer that read the state before another change loses: and no record of an ended attempt is left.
    const changed = advance(v1.state, 'activity', later(30));
    await store.commit(v1, changed);
    expect((await store.commit(v1, fenced, past(v1.state, v1.version))).kind).toBe('conflict');
    expect(await store.listPastAttempts(start.dispatchId)).toEqual([]);
    // From the state stored, both land.
    const v2 = storedAt(changed, 2);
    expect((await store.getStored(start.dispatchId))?.version).toBe(v2.version);
    const refenced = advance(v2.state, 'superseded', later(61), { phase: 'accepted', attempt: 2, runId: null, receipts: [] });
    expect(await store.commit(v2, refenced, past(v2.state, v2.version))).toEqual({ kind: 'committed' });
    expect((await store.listPastAttempts(start.dispatchId)).map((attempt) => [attempt.attempt, attempt.runId, attempt.stateVersion])).toEqual([[1, 'r-1', v2.version]]);
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

  it('pages through what is due in one shard: the longest due first, a page at a time, nothing not yet due', async () => {
    const store = await storeOf();
    const dueIndex = dueIndexOf(store);
    // Dispatches that land in one shard of the due index.
    const shard = dueShardOf('d-shard-probe');
    const ids: string[] = [];
    for (let index = 0; ids.length < 4; index += 1) if (dueShardOf(`d-due-${index}`) === shard) ids.push(`d-due-${index}`);
    for (const [index, dispatchId] of ids.entries()) {
      const start = accepted(newDispatchFactory({ dispatchId }), NOW);
      const first = running(start);
      await store.commit(unstored(start), { ...first, dueAt: later(100 - index * 10).toISOString() });
    }
    const idsOf = (entries: ReadonlyArray<{ dispatchId: string }>) => entries.map((entry) => entry.dispatchId);
    const pagesOf = async (now: Date, pageSize: number) => {
      const pages: Array<Array<{ dispatchId: string; dueAt: string }>> = [];
      for await (const page of dueIndex.duePages(shard, now, pageSize)) pages.push(page);
      return pages.filter((page) => page.length > 0);
    };
    // Three are due: the two longest due, then the third.
    expect(await pagesOf(later(95), 2)).toEqual([
      [
        { dispatchId: ids[3], dueAt: later(70).toISOString() },
        { dispatchId: ids[2], dueAt: later(80).toISOString() },
      ],
      [{ dispatchId: ids[1], dueAt: later(90).toISOString() }],
    ]);
    expect(idsOf((await pagesOf(later(200), 10)).flat()).sort()).toEqual([...ids].sort());
    expect(await pagesOf(later(60), 10)).toEqual([]);
    // The next page starts where the last ended, though an entry of it moved meanwhile: nothing skipped, nothing again.
    const pages = dueIndex.duePages(shard, later(95), 1);
    expect(idsOf((await pages.next()).value ?? [])).toEqual([ids[3]]);
    await store.deferDue({ dispatchId: ids[3] as string, dueAt: later(70).toISOString() }, later(100)); // out of the range, as the monitor moves what it acts on
    expect(idsOf((await pages.next()).value ?? [])).toEqual([ids[2]]);
    expect(idsOf((await pages.next()).value ?? [])).toEqual([ids[1]]);
    await pages.return(undefined);
    // A deferral moves only the due time it saw.
    await store.deferDue({ dispatchId: ids[3] as string, dueAt: later(1).toISOString() }, later(500));
    await store.deferDue({ dispatchId: ids[2] as string, dueAt: later(80).toISOString() }, later(500));
    expect(idsOf((await pagesOf(later(95), 10)).flat())).toEqual([ids[1]]);
  });

  it('lets one holder at a time claim a due shard: released, or lapsed on the clock of the claim, it is taken again', async () => {
    const store = await storeOf();
    const dueIndex = dueIndexOf(store);
    const [shard, other] = dueIndex.dueShards;
    if (!shard || !other) throw new Error('the due index has shards');
    expect(await dueIndex.claimDueShard(shard, 'tick-a', NOW, later(60))).toBe(true);
    expect(await dueIndex.claimDueShard(shard, 'tick-a', NOW, later(60))).toBe(true); // its own claim, sent again (the answer lost)
    expect(await dueIndex.claimDueShard(shard, 'tick-b', later(30), later(90))).toBe(false); // held
    expect(await dueIndex.claimDueShard(other, 'tick-b', later(30), later(90))).toBe(true); // a claim per shard
    await dueIndex.releaseDueShard(shard, 'tick-b'); // not its claim: nothing happens
    expect(await dueIndex.claimDueShard(shard, 'tick-b', later(59), later(90))).toBe(false);
    await dueIndex.releaseDueShard(shard, 'tick-a');
    expect(await dueIndex.claimDueShard(shard, 'tick-b', later(1), later(90))).toBe(true); // released
    // tick-b dies holding it: its lease lapses, and a claim whose clock is past it takes over.
    expect(await dueIndex.claimDueShard(shard, 'tick-c', later(90), later(150))).toBe(false);
    expect(await dueIndex.claimDueShard(shard, 'tick-c', later(91), later(150))).toBe(true);
    await dueIndex.releaseDueShard(shard, 'tick-b'); // the dead tick's late release leaves tick-c's claim
    expect(await dueIndex.claimDueShard(shard, 'tick-d', later(100), later(160))).toBe(false);
  });

  it('records the first evidence check of an attempt and returns it to later writers', async () => {
    const store = await storeOf();
    const check: EvidenceCheck = { dispatchId: uniqueName('d'), origin: 'planner', target: 'demo-agent', runId: 'r-1', attempt: 1, outcome: 'handled', expected: ['a'], found: ['a'], missing: [], invalid: [], files: [{ ref: 'a', sha256: 'f'.repeat(64), bytes: 1, checkedAt: NOW.toISOString() }], checkedAt: NOW.toISOString(), error: null };
    expect(await store.putEvidenceCheck(check)).toEqual({ kind: 'written' });
    const second = await store.putEvidenceCheck({ ...check, outcome: 'orphan_no_delivery', files: [] });
    expect(second).toEqual({ kind: 'exists', existing: check });
    expect(await store.getEvidenceCheck(check.dispatchId, 1)).toEqual(check);
  });

  it('points each evidence ref of an attempt at its latest upload, and lists an attempt\'s pointers alone', async () => {
    const store = await storeOf();
    const dispatchId = uniqueName('d');
    const upload = (attempt: number, ref: string, sha: string) => ({ dispatchId, attempt, ref, sha256: sha.repeat(64), bytes: 3, at: NOW.toISOString() });
    await store.putEvidenceUpload(upload(1, 'out/a.md', 'a'));
    await store.putEvidenceUpload(upload(1, 'out/b.md', 'b'));
    await store.putEvidenceUpload(upload(1, 'out/a.md', 'c'));
    await store.putEvidenceUpload(upload(2, 'out/a.md', 'd'));
    // A mark of the same ref is an item of another kind: never listed as an upload.
    await store.putEvidenceMark({ dispatchId, attempt: 1, ref: 'out/a.md', status: 'invalid', reason: 'r', at: NOW.toISOString() });
    const byRef = (uploads: readonly EvidenceUpload[]) => [...uploads].sort((x, y) => x.ref.localeCompare(y.ref));
    expect(byRef(await store.listEvidenceUploads(dispatchId, 1))).toEqual([upload(1, 'out/a.md', 'c'), upload(1, 'out/b.md', 'b')]);
    expect(await store.listEvidenceUploads(dispatchId, 2)).toEqual([upload(2, 'out/a.md', 'd')]);
    expect(await store.listEvidenceUploads(dispatchId, 3)).toEqual([]);
  });

  it('reads a check\'s basis and a completion\'s state with its pointers in one read each: what the separate reads give, whatever else the partition holds', async () => {
    const store = await storeOf();
    const start = fresh();
    const { dispatchId } = start;
    const state = running(start);
    expect(await store.commit(unstored(start), state)).toEqual({ kind: 'committed' });
    const message = { dispatchId, origin: 'planner', contentHash: 'sha256:x', messageId: 'm', senderId: null, receivedAt: NOW.toISOString(), claimUntil: later(60).toISOString(), content: { valid: false as const, target: null, errors: [], bodyPreview: '{}', bodyRef: null, bodyBytes: 2 } };
    expect(await store.putAcceptedMessage(message)).toEqual({ kind: 'written' });
    const at = NOW.toISOString();
    for (const attempt of [1, 2]) {
      await store.putEvidenceMark({ dispatchId, attempt, ref: `out/${attempt}.md`, status: 'invalid', reason: 'r', at });
      await store.putEvidenceUpload({ dispatchId, attempt, ref: `out/${attempt}.md`, sha256: String(attempt).repeat(64), bytes: 3, at });
    }
    const check: EvidenceCheck = { dispatchId, origin: 'planner', target: 'demo-agent', runId: 'r-1', attempt: 1, outcome: 'handled', expected: ['a'], found: ['a'], missing: [], invalid: [], files: [], checkedAt: at, error: null };
    await store.putEvidenceCheck(check);
    await store.putEvidenceCheck({ ...check, attempt: 2, outcome: 'orphan_no_delivery' });
    // Every other kind of a dispatch's items, in and around the ranges read: never taken for one of these.
    await store.recordLateEvent({ dispatchId, runId: 'r-0', seq: 3, type: 'heartbeat', at });
    await store.putLambdaFailure({ dispatchId, attempt: 1, runId: 'r-1', errorType: 'E', errorMessage: 'm', requestId: 'q', condition: 'RetriesExhausted', at });
    await store.putManualAttestation(manualAttestation(state, { attestationId: 'ma-1', kind: 'manual_result_attested', note: 'n' }, NOW, 'local:planner'));
    await store.putOperatorReceipt(operatorReceipt(state, { receiptId: 'or-1', runId: 'r-1', kind: 'artifact_acceptance', state: 'accepted', verifiedBy: 'v', evidenceRef: null, note: null }, NOW));
    await store.putResultBody({ dispatchId, attempt: 1, seq: 4, bytes: 2, json: '{}', preview: '{}', bodyRef: null, at });
    await store.archiveAttempt(past({ ...state, attempt: 1 }, 2));

    for (const attempt of [1, 2, 3]) {
      const separately = { message: await store.getAcceptedMessage(dispatchId), check: await store.getEvidenceCheck(dispatchId, attempt), marks: await store.listEvidenceMarks(dispatchId, attempt) };
      expect(await store.getEvidenceBasis(dispatchId, attempt)).toEqual(separately);
    }
    expect((await store.getEvidenceBasis(dispatchId, 1)).check).toEqual(check);
    expect(await store.getStateWithUploads(dispatchId)).toEqual({ stored: await store.getStored(dispatchId), uploads: await store.listEvidenceUploads(dispatchId, 1) });
    expect((await store.getStateWithUploads(dispatchId)).uploads?.map((upload) => upload.ref)).toEqual(['out/1.md']);
    expect(await store.getStateWithUploads(uniqueName('d'))).toEqual({ stored: undefined, uploads: [] });
    // A state at its second attempt: that attempt's pointers only.
    const again = { ...running(fresh()), attempt: 2 };
    await store.commit(unstored(again), again);
    for (const attempt of [1, 2]) await store.putEvidenceUpload({ dispatchId: again.dispatchId, attempt, ref: 'out/a.md', sha256: String(attempt).repeat(64), bytes: 3, at });
    expect((await store.getStateWithUploads(again.dispatchId)).uploads).toEqual(await store.listEvidenceUploads(again.dispatchId, 2));
    expect((await store.getStateWithUploads(again.dispatchId)).uploads?.map((upload) => upload.sha256)).toEqual(['2'.repeat(64)]);
    expect(await store.peekState(dispatchId)).toEqual(await store.getState(dispatchId));
  });

  it('renews a claim only from the claim it read', async () => {
    const store = await storeOf();
    const message = { dispatchId: uniqueName('d'), origin: 'planner', contentHash: 'sha256:x', messageId: 'm', senderId: null, receivedAt: NOW.toISOString(), claimUntil: later(60).toISOString(), content: { valid: false as const, target: null, errors: [], bodyPreview: '{}', bodyRef: null, bodyBytes: 2 } };
    expect(await store.putAcceptedMessage(message)).toEqual({ kind: 'written' });
    expect((await store.putAcceptedMessage({ ...message, messageId: 'm-2' })).kind).toBe('exists');
    expect(await store.renewClaim(message.dispatchId, later(60).toISOString(), later(120).toISOString(), 'delivery-2')).toBe(true);
    expect(await store.renewClaim(message.dispatchId, later(60).toISOString(), later(120).toISOString(), 'delivery-2')).toBe(true); // the same renewal, sent again (the answer lost)
    // Another delivery from the claim it read is refused, even one that read the same millisecond.
    expect(await store.renewClaim(message.dispatchId, later(60).toISOString(), later(120).toISOString(), 'delivery-3')).toBe(false);
    expect(await store.renewClaim(message.dispatchId, later(60).toISOString(), later(180).toISOString(), 'delivery-3')).toBe(false);
    expect((await store.getAcceptedMessage(message.dispatchId))?.claimBy).toBe('delivery-2');
    expect((await store.getAcceptedMessage(message.dispatchId))?.claimUntil).toBe(later(120).toISOString());
  });

  // ——— flow control (CONTRACT §11): the slot counters and the wait index ————————————————————————

  /** A dispatch of `target`, stored waiting for a slot (or, with `start`, only built). */
  const waitingOne = async (store: LedgerStoreWithWrites, target: string, overrides: Partial<NewDispatch> = {}, at = NOW): Promise<StoredState> => {
    const start = accepted(newDispatchFactory({ dispatchId: uniqueName('d'), target, writtenAt: at.toISOString(), ...overrides }), at);
    const next = waiting(start, 'capacity', at);
    expect(await store.commit(unstored(start), next)).toEqual({ kind: 'committed' });
    return storedAt(next, 1);
  };

  it('takes a slot only under its shard\'s own cap (limit 1 works): the write past it is slot_full and writes nothing; a final status gives it back', async () => {
    const store = await storeOf();
    const target = uniqueName('limited');
    await store.syncSlotCaps(target, 1);
    expect(await store.slotShards(target)).toEqual([{ shard: 0, cap: 1, limit: 1, held: 0, unknownHeld: 0, lastOrigin: null, allottedAt: expect.any(String) }]);
    const [first, second] = [await waitingOne(store, target), await waitingOne(store, target, { origin: 'other' })] as [StoredState, StoredState];
    const firstHeld = admitted(first.state, 0, later(1), 60);
    expect(await store.commit(first, firstHeld)).toEqual({ kind: 'committed' });
    expect(await store.commit(second, admitted(second.state, 0, later(1), 60))).toEqual({ kind: 'slot_full' });
    const untouched = await store.getStored(second.state.dispatchId);
    expect(untouched?.version).toBe(second.version);
    expect(untouched?.state.slot ?? null).toBeNull();
    expect((await store.slotShards(target))[0]).toEqual({ shard: 0, cap: 1, limit: 1, held: 1, unknownHeld: 0, lastOrigin: 'planner', allottedAt: expect.any(String), takenAt: firstHeld.slot?.at });

    // Submitted, it keeps the slot; stalled, the slot is one an unknown run holds; completed, it is given back.
    const held = storedAt(firstHeld, first.version + 1);
    const run = submitted(held.state, { kind: 'accepted', runId: 'r-1', status: 'running', requestId: 'q' }, DEFAULT_RETRY_POLICY, later(2));
    expect(run.slot).toEqual(firstHeld.slot);
    expect(await store.commit(held, run)).toEqual({ kind: 'committed' });
    const live = storedAt(run, held.version + 1);
    const lost = reconcileLookup(live.state, { kind: 'found', run: { runId: 'r-1', status: 'running' } }, later(700), true);
    if (!lost) throw new Error('the lookup is reconciled');
    expect(await store.commit(live, lost)).toEqual({ kind: 'committed' });
    expect((await store.slotShards(target))[0]).toMatchObject({ held: 1, unknownHeld: 1 });
    const unknown = storedAt(lost, live.version + 1);
    const done = applyRunEvent(unknown.state, { seq: 5, type: 'completed' }, later(800));
    if (done.kind !== 'apply') throw new Error('the completion applies');
    expect(done.next.slot).toBeUndefined();
    expect(await store.commit(unknown, done.next)).toEqual({ kind: 'committed' });
    expect((await store.slotShards(target))[0]).toMatchObject({ held: 0, unknownHeld: 0 });
    // The slot given back is the second one's now.
    expect(await store.commit(second, admitted(second.state, 0, later(801), 60))).toEqual({ kind: 'committed' });
  });

  it('splits a limit over shards whose caps sum exactly to it; a lower limit keeps the old shards draining (cap 0)', async () => {
    const store = await storeOf();
    const target = uniqueName('limited');
    await store.syncSlotCaps(target, 20);
    const shards = await store.slotShards(target);
    expect(shards.map((shard) => shard.cap)).toEqual(slotShardCaps(20));
    expect(shards.reduce((sum, shard) => sum + shard.cap, 0)).toBe(20);
    await store.syncSlotCaps(target, 2);
    expect((await store.slotShards(target)).map((shard) => shard.cap)).toEqual([1, 1, 0]);
    expect(await store.limitedTargets()).toContain(target);
  });

  it('allots a changed limit from what each shard holds (raised: caps ≥ held, summing to it); lowered under it: drains, none takes, until a settle finds it under', async () => {
    const store = await storeOf();
    const target = uniqueName('limited');
    await store.syncSlotCaps(target, 8);
    const held: StoredState[] = [];
    for (let index = 0; index < 8; index += 1) {
      const one = await waitingOne(store, target);
      const next = admitted(one.state, 0, later(1), 60);
      expect(await store.commit(one, next)).toEqual({ kind: 'committed' });
      held.push(storedAt(next, one.version + 1));
    }
    await store.syncSlotCaps(target, 9);
    expect((await store.slotShards(target)).map((shard) => [shard.cap, shard.held])).toEqual([[8, 8], [1, 0]]);
    // Lowered under the 8 held: every cap 0, the limit kept beside them; a settle changes nothing while over it.
    await store.syncSlotCaps(target, 3);
    expect((await store.slotShards(target)).map((shard) => [shard.cap, shard.limit])).toEqual([[0, 3], [0, 3]]);
    const late = await waitingOne(store, target);
    expect(await store.commit(late, admitted(late.state, 1, later(2), 60))).toEqual({ kind: 'slot_full' });
    for (const run of held.slice(0, 6)) expect(await store.commit(run, cancelledBeforeSubmission(run.state, { reason: 'r', by: 'p' }, later(3)))).toEqual({ kind: 'committed' });
    await store.settleSlotCaps(target);
    // 2 held now: allotted again, each cap ≥ its held, summing to 3 — one slot free.
    const settled = await store.slotShards(target);
    expect(settled.map((shard) => shard.held)).toEqual([2, 0]);
    expect(settled.reduce((sum, shard) => sum + shard.cap, 0)).toBe(3);
    expect(settled.every((shard) => shard.cap >= shard.held)).toBe(true);
    expect(await store.commit(late, admitted(late.state, settled.findIndex((shard) => shard.cap > shard.held), later(4), 60))).toEqual({ kind: 'committed' });
  });

  it('orders the waiting: highest priority first, round-robin across origins from the last one admitted, oldest first within an origin', async () => {
    const store = await storeOf();
    const target = uniqueName('limited');
    const a1 = await waitingOne(store, target, { origin: 'alpha' }, later(1));
    const a2 = await waitingOne(store, target, { origin: 'alpha' }, later(2));
    const b1 = await waitingOne(store, target, { origin: 'beta' }, later(3));
    const low = await waitingOne(store, target, { origin: 'gamma', priority: 1 }, later(0));
    const high = await waitingOne(store, target, { origin: 'gamma', priority: 9 }, later(9));
    expect(await store.countWaiting(target, 100)).toBe(5);
    const next = async (lastOrigin: string | null, exclude: string[] = []) => (await store.nextWaiting(target, lastOrigin, new Set(exclude)))?.dispatchId;
    // Whatever the rotation, priority 9 goes first.
    expect(await next(null)).toBe(high.state.dispatchId);
    expect(await next('alpha')).toBe(high.state.dispatchId);
    const done = [high.state.dispatchId];
    expect(await next(null, done)).toBe(a1.state.dispatchId);
    expect(await next('alpha', done)).toBe(b1.state.dispatchId);
    expect(await next('beta', done)).toBe(a1.state.dispatchId); // wraps past the last origin of the band
    expect(await next('alpha', [...done, b1.state.dispatchId])).toBe(a1.state.dispatchId);
    expect(await next('beta', [...done, a1.state.dispatchId])).toBe(a2.state.dispatchId);
    expect(await next(null, [high.state.dispatchId, a1.state.dispatchId, a2.state.dispatchId, b1.state.dispatchId])).toBe(low.state.dispatchId);
    // Admitted, it leaves the index.
    await store.syncSlotCaps(target, 5);
    expect(await store.commit(high, admitted(high.state, 0, later(10), 60))).toEqual({ kind: 'committed' });
    expect(await store.countWaiting(target, 100)).toBe(4);
  });
});
