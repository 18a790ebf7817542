import { createHash } from 'node:crypto';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import { STATE_ITEM } from '../../shared/adapters/item-kinds.js';
import { stateVersionOf } from '../../shared/adapters/state-item.js';
import { postRunEvent } from '../../shared/api/lifecycle-routes.js';
import { putEvidence } from '../../shared/api/evidence-routes.js';
import { eventsForStreamChange, type StateVersion } from '../../shared/events/derive.js';
import type { StoredState } from '../../shared/ledger/port.js';
import type { EvidenceCheck } from '../../shared/dispatch/records.js';
import { monitorTick } from '../../shared/usecases/monitor.js';
import { evidenceKey } from '../../shared/usecases/evidence-check.js';
import { redispatch } from '../../shared/usecases/redispatch.js';
import { overriding } from '../support/factories.js';
import { apiError } from '../support/api-error.js';
import { blobs, checkOf, clock, deps, documents, event, message, monitorDeps, open, sealedBytesOf, send, stateOf, table, tableName, tick } from '../support/ledger-fixture.js';

/** A dispatch's state item as stored: the state, the version that wrote it and what that write changed. */
const writtenOf = async (dispatchId: string): Promise<StateVersion> => {
  const { Item } = await documents.send(new GetCommand({ TableName: tableName, Key: STATE_ITEM.key(dispatchId), ConsistentRead: true }));
  if (!Item) throw new Error(`no state item for ${dispatchId}`);
  return stateVersionOf(Item);
};
const storedOf = async (dispatchId: string) => (await table.getStored(dispatchId)) as StoredState;

/** Regression tests of the evidence check on DynamoDB Local and fauxqs S3 (the ledger of test/support/ledger-fixture.ts): each names the bug it pins ("was: …"). */

describe('the evidence check: the hashes it seals and the uploads it refuses', () => {
  it('records the SHA-256 of each file found, refuses a later upload as evidence_sealed, and re-checks a late upload within a tick', async () => {
    const sent = message({ expectedEvidence: ['out/a.md', 'out/b.md'], timeouts: { deliveryGraceSeconds: 3600 } });
    await send(sent);
    const upload = (ref: string, bytes: string) => putEvidence(deps(), sent.dispatchId, ref, { method: 'PUT', rawPath: '', query: { runId: 'r-1' }, headers: {}, body: Buffer.from(bytes), iamUserId: undefined }, open);
    await upload('out/a.md', 'alpha');
    await postRunEvent(deps(), 'r-1', event(sent.dispatchId, 1, 'completed'), open);
    // b is missing: the completion leaves it pending until the grace deadline, an hour away.
    tick(1);
    await monitorTick(monitorDeps());
    expect((await stateOf(sent.dispatchId)).dueAt).toBe(new Date(clock.getTime() - 1000 + 3600_000).toISOString());

    await upload('out/b.md', 'beta');
    expect(Date.parse((await stateOf(sent.dispatchId)).dueAt ?? '')).toBeLessThanOrEqual(clock.getTime());
    tick(1);
    await monitorTick(monitorDeps());
    const settled = await stateOf(sent.dispatchId);
    expect(settled.evidence.outcome).toBe('handled');
    const check = await checkOf(sent.dispatchId);
    const sha = (text: string) => createHash('sha256').update(text).digest('hex');
    expect(check?.files.map((file) => [file.ref, file.sha256, file.bytes])).toEqual([
      ['out/a.md', sha('alpha'), 5],
      ['out/b.md', sha('beta'), 4],
    ]);
    const sealed = await apiError(upload('out/a.md', 'tampered'));
    expect(sealed.code).toBe('evidence_sealed');
    expect(sha((await sealedBytesOf(sent.dispatchId, 'out/a.md')) ?? '')).toBe(check?.files[0]?.sha256);
    // Refused before anything was written: the ref still points at the checked upload.
    expect((await table.listEvidenceUploads(sent.dispatchId, 1)).find((upload) => upload.ref === 'out/a.md')?.sha256).toBe(sha('alpha'));
  });

  it('never publishes Dispatch Handled for a completion fenced by a concurrent redispatch, its check carried by the fenced state write', async () => {
    // Detached: no result rides on the state, so the check's record fits in the settling write.
    const sent = message({ expectedEvidence: ['out/a.md'], delivery: { mode: 'detached' } });
    await send(sent);
    await putEvidence(deps(), sent.dispatchId, 'out/a.md', { method: 'PUT', rawPath: '', query: { runId: 'r-1' }, headers: {}, body: Buffer.from('a'), iamUserId: undefined }, open);
    // The completion's check reads the file; a forced redispatch commits before the completion's own
    // state write (which carries the check): that write meets the fence, and nothing is recorded.
    let raced = 0;
    const racing = overriding<S3Blobs>(blobs, {
      getBytes: async (key: string) => {
        const bytes = await blobs.getBytes(key);
        if ((raced += 1) === 1) expect((await redispatch(deps(), await storedOf(sent.dispatchId), { reason: 'operator forced it', force: true })).kind).toBe('redispatched');
        return bytes;
      },
    });
    const answer = await postRunEvent({ ...deps(), blobs: racing }, 'r-1', event(sent.dispatchId, 1, 'completed'), open);
    expect(answer.body).toEqual({ applied: false, late: true });
    expect(raced).toBe(1);
    const after = await writtenOf(sent.dispatchId);
    expect(after.state.attempt).toBe(2);
    expect(after.changes).not.toContain('handled');
    expect(after.state.evidence.check).toBeUndefined();
    expect(await table.getEvidenceCheck(sent.dispatchId, 1)).toBeUndefined();
  });

  it('never publishes Dispatch Handled for a fenced completion whose check is too large for the state (was: published from the check item written before the fenced state write)', async () => {
    // Long refs: the check's record does not fit the hot item, so it is an item of its own, written first.
    const refs = ['a', 'b', 'c'].map((name) => `out/${name.repeat(120)}.md`);
    const sent = message({ expectedEvidence: refs });
    await send(sent);
    for (const ref of refs) await putEvidence(deps(), sent.dispatchId, ref, { method: 'PUT', rawPath: '', query: { runId: 'r-1' }, headers: {}, body: Buffer.from(ref), iamUserId: undefined }, open);
    const recordedChecks: EvidenceCheck[] = [];
    const racing = overriding<LedgerTable>(table, {
      putEvidenceCheck: async (check: EvidenceCheck) => {
        const outcome = await table.putEvidenceCheck(check);
        recordedChecks.push(check);
        expect((await redispatch(deps(), await storedOf(sent.dispatchId), { reason: 'operator forced it', force: true })).kind).toBe('redispatched');
        return outcome;
      },
    });
    const answer = await postRunEvent({ ...deps(), store: racing }, 'r-1', event(sent.dispatchId, 1, 'completed'), open);
    expect(answer.body).toEqual({ applied: false, late: true });
    expect(recordedChecks).toHaveLength(1);
    expect(recordedChecks[0]?.files.map((file) => file.ref)).toEqual(refs);
    const after = await writtenOf(sent.dispatchId);
    expect(after.state.attempt).toBe(2);
    expect(after.changes).not.toContain('handled');
    // What the stream carries for the check item publishes nothing; only a committed 'handled' change does.
    const published = eventsForStreamChange({ sequenceNumber: '1', eventName: 'INSERT', oldItem: { kind: 'other' }, newItem: { kind: 'check', check: recordedChecks[0] as EvidenceCheck } });
    expect(published).toEqual([]);
  });
});

// Both places a seal is recorded: the settled state (detached: it fits one write unit) and an item of
// its own (callback: the result out leaves the state no room).
describe.each([
  ['detached', 'the settled state'],
  ['callback', 'its own check item'],
] as const)('the evidence check: sealing and an upload cannot interleave (racing PUTs; %s, the seal in %s)', (mode, _recordedThere) => {
  const recordedIn = async (dispatchId: string) => ({ state: (await stateOf(dispatchId)).evidence.check !== undefined, item: (await table.getEvidenceCheck(dispatchId, 1)) !== undefined });
  const where = mode === 'detached' ? { state: true, item: false } : { state: false, item: true };
  const uploadTo = (dispatchId: string, bytes: string, store = table) =>
    putEvidence({ ...deps(), store }, dispatchId, 'out/a.md', { method: 'PUT', rawPath: '', query: { runId: 'r-1' }, headers: {}, body: Buffer.from(bytes), iamUserId: undefined }, open);
  const sha = (text: string) => createHash('sha256').update(text).digest('hex');

  it('keeps the sealed bytes when an upload lands between the check\'s last look and its record', async () => {
    const sent = message({ expectedEvidence: ['out/a.md'], delivery: { mode } });
    await send(sent);
    await uploadTo(sent.dispatchId, 'original');
    // The checker hashed the file and looked at the pointers a last time (its first look came with the
    // state: getStateWithUploads); before its state write records the seal, a second upload (which saw
    // no seal) lands and is answered 201.
    let looks = 0;
    let raced = false;
    const racing = overriding<LedgerTable>(table, {
      listEvidenceUploads: async (dispatchId: string, attempt: number) => {
        const uploads = await table.listEvidenceUploads(dispatchId, attempt);
        if ((looks += 1) === 1) {
          raced = true;
          expect((await uploadTo(sent.dispatchId, 'tampered')).status).toBe(201);
        }
        return uploads;
      },
    });
    await postRunEvent({ ...deps(), store: racing }, 'r-1', event(sent.dispatchId, 1, 'completed'), open);
    expect(raced).toBe(true);
    expect((await checkOf(sent.dispatchId))?.files[0]?.sha256).toBe(sha('original'));
    expect(await recordedIn(sent.dispatchId)).toEqual(where);
    // The seal names immutable bytes: the ones it hashed, whatever the racing upload pointed the ref at.
    expect(await sealedBytesOf(sent.dispatchId, 'out/a.md')).toBe('original');
    expect((await table.listEvidenceUploads(sent.dispatchId, 1))[0]?.sha256).toBe(sha('tampered'));
    expect((await apiError(uploadTo(sent.dispatchId, 'tampered'))).code).toBe('evidence_sealed');
  });

  it('refuses an upload that saw no seal and wrote after the check: 409 evidence_sealed, the sealed bytes stand', async () => {
    const sent = message({ expectedEvidence: ['out/a.md'], delivery: { mode } });
    await send(sent);
    await uploadTo(sent.dispatchId, 'original');
    // The upload reads "not sealed"; the completion's check then seals; then the upload writes.
    let first = true;
    const slowToWrite = overriding<LedgerTable>(table, {
      getEvidenceCheck: async (dispatchId: string, attempt: number) => {
        const found = await table.getEvidenceCheck(dispatchId, attempt);
        if (first) {
          first = false;
          await postRunEvent(deps(), 'r-1', event(sent.dispatchId, 1, 'completed'), open);
        }
        return found;
      },
    });
    const refused = await apiError(uploadTo(sent.dispatchId, 'tampered', slowToWrite));
    expect(first).toBe(false);
    expect(refused.code).toBe('evidence_sealed');
    expect(await recordedIn(sent.dispatchId)).toEqual(where);
    expect((await checkOf(sent.dispatchId))?.files[0]?.sha256).toBe(sha('original'));
    expect(await sealedBytesOf(sent.dispatchId, 'out/a.md')).toBe('original');
    expect((await stateOf(sent.dispatchId)).evidence.outcome).toBe('handled');
  });
});

describe('the evidence check: edges the first reviews found', () => {
  const uploadTo = (dispatchId: string, ref: string, bytes: string) =>
    putEvidence(deps(), dispatchId, ref, { method: 'PUT', rawPath: '', query: { runId: 'r-1' }, headers: {}, body: Buffer.from(bytes), iamUserId: undefined }, open);

  it('refuses a retried upload when the first died between its write and its look back, and the sealed bytes stand', async () => {
    const sent = message({ expectedEvidence: ['out/a.md'] });
    await send(sent);
    await uploadTo(sent.dispatchId, 'out/a.md', 'original');
    await postRunEvent(deps(), 'r-1', event(sent.dispatchId, 1, 'completed'), open);
    const sealed = await checkOf(sent.dispatchId);
    // The upload that died: its bytes and its pointer landed after the seal, and nobody looked back.
    const tampered = createHash('sha256').update('tampered').digest('hex');
    await blobs.put(evidenceKey(sent.dispatchId, 1, tampered, 'out/a.md'), 'tampered', 'text/plain');
    await table.putEvidenceUpload({ dispatchId: sent.dispatchId, attempt: 1, ref: 'out/a.md', sha256: tampered, bytes: 8, at: clock.toISOString() });
    expect((await apiError(uploadTo(sent.dispatchId, 'out/a.md', 'tampered'))).code).toBe('evidence_sealed');
    expect(await checkOf(sent.dispatchId)).toEqual(sealed);
    expect(await sealedBytesOf(sent.dispatchId, 'out/a.md')).toBe('original');
  });

  it.each([
    ['an upload pointer', 'UPLOAD#000001#out/a.md'],
    ['an evidence mark', 'MARK#000001#out/a.md'],
  ])('records a completion when %s of its attempt is corrupt, and settles the check unverified at the deadline, never handled (review fix: read with the state or the message)', async (_what, sk) => {
    const sent = message({ expectedEvidence: ['out/a.md'], timeouts: { deliveryGraceSeconds: 5 } });
    await send(sent);
    await documents.send(new PutCommand({ TableName: tableName, Item: { pk: `D#${sent.dispatchId}`, sk, ref: 'out/a.md' } }));
    expect((await postRunEvent(deps(), 'r-1', event(sent.dispatchId, 1, 'completed'), open)).status).toBe(202);
    expect((await stateOf(sent.dispatchId)).execution.status).toBe('completed');
    expect((await stateOf(sent.dispatchId)).evidence.outcome).toBe('pending');
    tick(10);
    await monitorTick(monitorDeps());
    expect((await stateOf(sent.dispatchId)).evidence.outcome).toBe('unverified');
    expect((await table.getEvidenceCheck(sent.dispatchId, 1))?.error).toMatch(/CorruptItemError/);
  });

  it('never settles a check as handled when the accepted message cannot be read: unverified at the deadline', async () => {
    const sent = message({ expectedEvidence: ['out/a.md'], timeouts: { deliveryGraceSeconds: 5 } });
    await send(sent);
    const anchorless = overriding<LedgerTable>(table, {
      getAcceptedMessage: async () => undefined,
      // The check reads the message with its other inputs, in one query.
      getEvidenceBasis: async (dispatchId: string, attempt: number) => ({ ...(await table.getEvidenceBasis(dispatchId, attempt)), message: undefined }),
    });
    await postRunEvent({ ...deps(), store: anchorless }, 'r-1', event(sent.dispatchId, 1, 'completed'), open);
    expect((await stateOf(sent.dispatchId)).evidence.outcome).toBe('pending');
    tick(10);
    await monitorTick({ ...monitorDeps(), store: anchorless });
    const state = await stateOf(sent.dispatchId);
    expect(state.evidence.outcome).toBe('unverified');
    expect(state.receipts.map((receipt) => receipt.event)).not.toContain('dispatch_completed');
  });

  it('makes a completed run due again on an expected upload even when it is due already (a check in flight must not reschedule it to the deadline)', async () => {
    const sent = message({ expectedEvidence: ['out/a.md', 'out/b.md'], timeouts: { deliveryGraceSeconds: 3600 } });
    await send(sent);
    await postRunEvent(deps(), 'r-1', event(sent.dispatchId, 1, 'completed'), open);
    const due = await writtenOf(sent.dispatchId);
    expect(Date.parse(due.state.dueAt ?? '')).toBeLessThanOrEqual(clock.getTime());
    await uploadTo(sent.dispatchId, 'out/a.md', 'a');
    const after = await writtenOf(sent.dispatchId);
    expect(after.version).toBe(due.version + 1);
    expect(after.changes).toEqual(['evidence_recheck']);
  });

  it('leaves a check undecided when a file changed between its hash and its seal, and seals what is there on the next look', async () => {
    const sent = message({ expectedEvidence: ['out/a.md'] });
    await send(sent);
    const upload = (bytes: string) => putEvidence(deps(), sent.dispatchId, 'out/a.md', { method: 'PUT', rawPath: '', query: { runId: 'r-1' }, headers: {}, body: Buffer.from(bytes), iamUserId: undefined }, open);
    await upload('first');
    let reads = 0;
    const changing = overriding<S3Blobs>(blobs, {
      getBytes: async (key: string) => {
        const bytes = await blobs.getBytes(key);
        if (key === evidenceKey(sent.dispatchId, 1, createHash('sha256').update('first').digest('hex'), 'out/a.md') && (reads += 1) === 1) await upload('second');
        return bytes;
      },
    });
    await postRunEvent({ ...deps(), blobs: changing }, 'r-1', event(sent.dispatchId, 1, 'completed'), open);
    expect(reads).toBe(1);
    expect((await stateOf(sent.dispatchId)).evidence.outcome).toBe('pending');
    expect(await checkOf(sent.dispatchId)).toBeUndefined();
    tick(1);
    await monitorTick(monitorDeps());
    const check = await checkOf(sent.dispatchId);
    expect(check?.files[0]?.sha256).toBe(createHash('sha256').update('second').digest('hex'));
    expect((await stateOf(sent.dispatchId)).evidence.outcome).toBe('handled');
  });
});
