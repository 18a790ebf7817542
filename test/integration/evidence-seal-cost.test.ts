import { createHash } from 'node:crypto';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBucket, ensureLedgerTable } from '../../local/resources.js';
import { CapacityMeter } from '../../bench/capacity-meter.js';
import { watchCommands } from '../../bench/command-watch.js';
import { LedgerDueIndex } from '../../shared/adapters/due-index.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import { putEvidence } from '../../shared/api/evidence-routes.js';
import { postRunEvent } from '../../shared/api/lifecycle-routes.js';
import type { Caller } from '../../shared/api/caller.js';
import type { DispatchState } from '../../shared/dispatch/state.js';
import type { StoredState } from '../../shared/ledger/port.js';
import { takeDispatchMessage, type IntakeDeps } from '../../shared/usecases/intake.js';
import { evidenceCheckOf, evidenceKey } from '../../shared/usecases/evidence-check.js';
import { DUE_PAGE_SIZE, monitorTick } from '../../shared/usecases/monitor.js';
import { legacyEvidenceKey } from '../../shared/ledger/objects.js';
import { redispatch } from '../../shared/usecases/redispatch.js';
import type { SubmitRequest, TargetPort } from '../../shared/targets/port.js';
import { engineClients, uniqueName } from '../support/engines.js';
import { intakeDepsFactory } from '../support/factories.js';

/**
 * Issue 18 ("Cost"): a seal is the hash the check records of immutable, hash-named bytes — no copy.
 * On DynamoDB Local and fauxqs S3, counting the S3 requests each step sends and the write units
 * DynamoDB reports for it.
 */
const clients = engineClients();
const meter = new CapacityMeter();
meter.attach(clients.dynamodb);
const documents = DynamoDBDocumentClient.from(clients.dynamodb, { marshallOptions: { removeUndefinedValues: true } });
let tableName: string;
const s3Requests = { put: 0, get: 0, other: 0 };
watchCommands(clients.s3, (command) => {
  if (command === 'PutObject') s3Requests.put += 1;
  else if (command === 'GetObject') s3Requests.get += 1;
  else s3Requests.other += 1;
});

let table: LedgerTable;
let blobs: S3Blobs;
let clock = new Date('2026-12-01T10:00:00Z');
const target: TargetPort = {
  submit: async (request: SubmitRequest) => ({ kind: 'accepted', runId: `r-${request.attempt}`, status: 'running', requestId: `q-${request.attempt}` }),
  lookup: async () => ({ kind: 'unavailable', reason: 'HTTP 503' }),
  decideApproval: async () => ({ kind: 'unavailable', reason: 'unused' }),
  cancel: async () => ({ kind: 'unavailable', reason: 'unused' }),
};
const open: Caller = { kind: 'open', origin: undefined };
const deps = (): IntakeDeps => intakeDepsFactory({ store: table, blobs, targetFor: () => target, principals: table, now: () => clock });

beforeAll(async () => {
  tableName = uniqueName('seal-cost');
  await ensureLedgerTable(clients.dynamodb, tableName);
  table = new LedgerTable(documents, { tableName, retentionSeconds: 30 * 86_400 });
  blobs = new S3Blobs(clients.s3, await ensureBucket(clients.s3, uniqueName('seal-cost')));
  await table.putTarget({ name: 'scripted', kind: 'http', baseUrl: 'http://127.0.0.1:9' });
});
afterAll(() => clients.destroy());

/** What `work` sent: S3 requests by kind and DynamoDB write units. */
async function costOf(work: () => Promise<unknown>): Promise<{ readonly s3: { put: number; get: number; other: number }; readonly writeUnits: number }> {
  const before = { ...s3Requests };
  const units = meter.snapshot();
  await work();
  return { s3: { put: s3Requests.put - before.put, get: s3Requests.get - before.get, other: s3Requests.other - before.other }, writeUnits: meter.since(units).writeUnits };
}

/** What `work` read from DynamoDB: read units and requests. */
async function readsOf(work: () => Promise<unknown>): Promise<{ readonly readUnits: number; readonly requests: number }> {
  const units = meter.snapshot();
  await work();
  const spent = meter.since(units);
  return { readUnits: spent.readUnits, requests: spent.requests };
}

async function detachedDispatch(expectedEvidence: readonly string[]): Promise<string> {
  const dispatchId = uniqueName('d');
  const body = JSON.stringify({ dispatchId, origin: 'planner', target: 'scripted', task: { goal: 'g' }, expectedEvidence, delivery: { mode: 'detached' } });
  expect((await takeDispatchMessage(deps(), { messageId: uniqueName('m'), body, senderId: 'local' })).outcome).toBe('submitted');
  return dispatchId;
}
const upload = (dispatchId: string, ref: string, bytes: string) =>
  putEvidence(deps(), dispatchId, ref, { method: 'PUT', rawPath: '', query: { runId: 'r-1' }, headers: {}, body: Buffer.from(bytes), iamUserId: undefined }, open);
const complete = (dispatchId: string) => postRunEvent(deps(), 'r-1', Buffer.from(JSON.stringify({ dispatchId, seq: 1, type: 'completed' })), open);
const stateOf = async (dispatchId: string) => (await table.getState(dispatchId)) as DispatchState;
const storedOf = async (dispatchId: string) => (await table.getStored(dispatchId)) as StoredState;
const sha = (text: string) => createHash('sha256').update(text).digest('hex');

describe('sealing evidence without an S3 copy (issue 18)', () => {
  it('stores an upload once, under its hash: 1 S3 PUT and the 1 write unit of its pointer', async () => {
    const dispatchId = await detachedDispatch(['out/report.md']);
    const cost = await costOf(() => upload(dispatchId, 'out/report.md', '# report'));
    expect(cost).toEqual({ s3: { put: 1, get: 0, other: 0 }, writeUnits: 1 });
    expect(Buffer.from((await blobs.getBytes(evidenceKey(dispatchId, 1, sha('# report'), 'out/report.md'))) ?? []).toString()).toBe('# report');
    expect(await table.listEvidenceUploads(dispatchId, 1)).toMatchObject([{ ref: 'out/report.md', sha256: sha('# report'), bytes: 8 }]);
  });

  it('settles a completion whose evidence is delivered with no S3 PUT, one GET, and 2 write units: the state and its due entry, no check item (was 1 PUT, 3 GETs, 3 write units)', async () => {
    const dispatchId = await detachedDispatch(['out/report.md']);
    await upload(dispatchId, 'out/report.md', '# report');
    const cost = await costOf(() => complete(dispatchId));
    expect(cost).toEqual({ s3: { put: 0, get: 1, other: 0 }, writeUnits: 2 });
    const state = await stateOf(dispatchId);
    expect(state.evidence.outcome).toBe('handled');
    expect(await table.getEvidenceCheck(dispatchId, 1)).toBeUndefined();
    expect((await evidenceCheckOf(table, state))?.files.map((file) => [file.ref, file.sha256, file.bytes])).toEqual([['out/report.md', sha('# report'), 8]]);
  });

  it('reads 3 units for a completion that settles its evidence in the same write (was 6): the state with its pointers, the message with the check\'s other inputs, the pointers\' last look', async () => {
    const dispatchId = await detachedDispatch(['out/report.md']);
    await upload(dispatchId, 'out/report.md', '# report');
    const reads = await readsOf(() => complete(dispatchId));
    expect((await stateOf(dispatchId)).evidence.outcome).toBe('handled');
    // Three reads and the settling write (was six reads: state, message, check item, marks, pointers twice).
    expect(reads).toEqual({ readUnits: 3, requests: 4 });
  });

  it('reads half a unit for a heartbeat inside the coalescing window (an eventually consistent look), and writes nothing', async () => {
    const dispatchId = await detachedDispatch(['out/report.md']);
    const before = await storedOf(dispatchId);
    const heartbeat = (seq: number) => postRunEvent(deps(), 'r-1', Buffer.from(JSON.stringify({ dispatchId, seq, type: 'heartbeat' })), open);
    let answer: Awaited<ReturnType<typeof heartbeat>> | undefined;
    expect(await readsOf(async () => (answer = await heartbeat(1)))).toEqual({ readUnits: 0.5, requests: 1 });
    expect(answer?.body).toEqual({ applied: false, coalesced: true });
    expect((await storedOf(dispatchId)).version).toBe(before.version);
    // Past the window the look is not enough: the state is read again, strongly, and the activity written.
    clock = new Date(clock.getTime() + 3_600_000);
    expect((await readsOf(async () => (answer = await heartbeat(2)))).readUnits).toBe(1.5);
    expect(answer?.status).toBe(202);
    expect((await stateOf(dispatchId)).execution.lastActivityAt).toBe(clock.toISOString());
  });

  it('reads each found file once: two files, two GETs, no S3 PUT (the record, too large for the state, is its own item)', async () => {
    const dispatchId = await detachedDispatch(['out/report.md', 'out/data.csv']);
    await upload(dispatchId, 'out/report.md', '# report');
    await upload(dispatchId, 'out/data.csv', 'a,b');
    const cost = await costOf(() => complete(dispatchId));
    expect(cost.s3).toEqual({ put: 0, get: 2, other: 0 });
    expect((await table.getEvidenceCheck(dispatchId, 1))?.files.map((file) => file.sha256)).toEqual([sha('# report'), sha('a,b')]);
  });

  it('counts a file uploaded before the upgrade (under the old key, no pointer): the monitor adopts it under its hash by the grace deadline and seals it — never a false orphan (review fix)', async () => {
    const dispatchId = await detachedDispatch(['out/report.md']);
    await blobs.put(legacyEvidenceKey(dispatchId, 1, 'out/report.md'), '# before the upgrade', 'text/markdown');
    expect(await table.listEvidenceUploads(dispatchId, 1)).toEqual([]);

    await complete(dispatchId);
    // The API's completion finds no pointer and leaves it to the monitor, which looks at the old key by the grace deadline.
    expect((await stateOf(dispatchId)).evidence.outcome).toBe('pending');
    clock = new Date(Date.parse((await stateOf(dispatchId)).evidence.deadline ?? '') + 1000);
    await monitorTick({ ...deps(), dueIndex: new LedgerDueIndex(documents, tableName), pageSize: DUE_PAGE_SIZE });

    const state = await stateOf(dispatchId);
    expect(state.evidence.outcome).toBe('handled');
    expect((await evidenceCheckOf(table, state))?.files.map((file) => [file.ref, file.sha256])).toEqual([['out/report.md', sha('# before the upgrade')]]);
    expect(Buffer.from((await blobs.getBytes(evidenceKey(dispatchId, 1, sha('# before the upgrade'), 'out/report.md'))) ?? []).toString()).toBe('# before the upgrade');
    expect(await table.listEvidenceUploads(dispatchId, 1)).toMatchObject([{ ref: 'out/report.md', sha256: sha('# before the upgrade') }]);
  });

  it('re-checks a late upload on the next tick with one GET and no S3 PUT', async () => {
    const dispatchId = await detachedDispatch(['out/report.md']);
    await complete(dispatchId);
    expect((await stateOf(dispatchId)).evidence.outcome).toBe('pending');
    clock = new Date(clock.getTime() + 1000);
    await upload(dispatchId, 'out/report.md', 'late');
    clock = new Date(clock.getTime() + 1000);
    const cost = await costOf(() => monitorTick({ ...deps(), dueIndex: new LedgerDueIndex(documents, tableName), pageSize: DUE_PAGE_SIZE }));
    expect(cost.s3).toEqual({ put: 0, get: 1, other: 0 });
    expect((await stateOf(dispatchId)).evidence).toMatchObject({ outcome: 'handled', check: { files: [{ ref: 'out/report.md', sha256: sha('late'), bytes: 4 }] } });
  });

  it('records a check too large for the state in an item of its own, and refuses a later upload from that seal', async () => {
    const refs = ['a', 'b', 'c'].map((name) => `out/${name.repeat(150)}.md`);
    const dispatchId = await detachedDispatch(refs);
    for (const ref of refs) await upload(dispatchId, ref, ref);
    const cost = await costOf(() => complete(dispatchId));
    expect(cost.s3).toEqual({ put: 0, get: 3, other: 0 });
    const state = await stateOf(dispatchId);
    expect(state.evidence.outcome).toBe('handled');
    expect(state.evidence.check).toBeUndefined();
    expect((await table.getEvidenceCheck(dispatchId, 1))?.files.map((file) => file.sha256)).toEqual(refs.map(sha));
    const refused = await upload(dispatchId, refs[0] as string, 'tampered').then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toMatchObject({ code: 'evidence_sealed' });
  });

  it('keeps the hashes a settled state carried with the attempt a redispatch ends', async () => {
    const dispatchId = await detachedDispatch(['out/report.md']);
    await upload(dispatchId, 'out/report.md', '# report');
    await complete(dispatchId);
    const settled = await storedOf(dispatchId);
    expect(settled.state.evidence.check).toBeDefined();
    expect((await redispatch(deps(), settled, { reason: 'run it again', force: true })).kind).toBe('redispatched');
    expect((await stateOf(dispatchId)).evidence.check).toBeUndefined();
    expect((await table.listPastAttempts(dispatchId)).map((past) => past.check)).toEqual([settled.state.evidence.check]);
  });

  it('leaves a check undecided when an upload\'s bytes do not hash to what its pointer says: the platform hashes the bytes itself', async () => {
    const dispatchId = await detachedDispatch(['out/report.md']);
    // A pointer naming bytes that are not there under that hash (never written by the API's route).
    const claimed = sha('claimed');
    await blobs.put(evidenceKey(dispatchId, 1, claimed, 'out/report.md'), 'other bytes', 'text/plain');
    await table.putEvidenceUpload({ dispatchId, attempt: 1, ref: 'out/report.md', sha256: claimed, bytes: 7, at: clock.toISOString() });
    await complete(dispatchId);
    const state = await stateOf(dispatchId);
    expect(state.evidence.outcome).toBe('pending');
    expect(await evidenceCheckOf(table, state)).toBeUndefined();
  });
});
