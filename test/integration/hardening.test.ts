import { createHash } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { InboxTable } from '../../shared/adapters/inbox-table.js';
import { LedgerFeedsTable } from '../../shared/adapters/ledger-feeds.js';
import { decodeItem, dueShardOf } from '../../shared/adapters/ledger-table.js';
import { route } from '../../shared/api/routes.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ensureBucket, ensureLedgerTable } from '../../local/resources.js';
import { LedgerDueIndex } from '../../shared/adapters/due-index.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import { postRunEvent } from '../../shared/api/lifecycle-routes.js';
import { refreshed } from '../../shared/usecases/run-events.js';
import { putEvidence } from '../../shared/api/evidence-routes.js';
import { postOperatorReceipt } from '../../shared/api/receipt-routes.js';
import { ApiError } from '../../shared/api/http.js';
import type { Caller } from '../../shared/api/caller.js';
import type { DispatchState } from '../../shared/dispatch/state.js';
import { eventsForStreamChange } from '../../shared/events/derive.js';
import type { EvidenceCheck } from '../../shared/dispatch/records.js';
import { takeDispatchMessage, type IntakeDeps } from '../../shared/usecases/intake.js';
import { FAILED_RETRY_SECONDS, monitorTick } from '../../shared/usecases/monitor.js';
import { evidenceCheckOf, evidenceKey } from '../../shared/usecases/evidence-check.js';
import { decideApproval } from '../../shared/usecases/approval.js';
import { redispatch } from '../../shared/usecases/redispatch.js';
import { engineClients, loopbackOnly, uniqueName, testEngines } from '../support/engines.js';
import { eventually } from '../support/eventually.js';
import { intakeDepsFactory, overriding } from '../support/factories.js';
import { ScriptedTarget } from '../support/scripted-target.js';
import { apiError } from '../support/api-error.js';

/**
 * Regression tests of issue 12 (hardening), by class, on DynamoDB Local and fauxqs S3, with a target
 * in hand whose answers the test chooses.
 */
const clients = engineClients();
const dynamodb = loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
let tableName: string;
let table: LedgerTable;
let blobs: S3Blobs;
let clock = new Date('2026-12-01T10:00:00Z');
const tick = (seconds: number) => {
  clock = new Date(clock.getTime() + seconds * 1000);
};

let target: ScriptedTarget;

beforeAll(async () => {
  tableName = uniqueName('hardening');
  await ensureLedgerTable(clients.dynamodb, tableName);
  const bucket = await ensureBucket(clients.s3, uniqueName('blobs'));
  table = new LedgerTable(documents, { tableName, retentionSeconds: 30 * 86_400 });
  blobs = new S3Blobs(clients.s3, bucket);
  await table.putTarget({ name: 'scripted', kind: 'http', baseUrl: 'http://127.0.0.1:9' });
});
afterAll(() => {
  clients.destroy();
  dynamodb.destroy();
});

const deps = (): IntakeDeps => intakeDepsFactory({ store: table, blobs, targetFor: () => target, principals: table, now: () => clock });
const monitorDeps = () => ({ ...deps(), dueIndex: new LedgerDueIndex(documents, tableName), pageSize: 100 });
const open: Caller = { kind: 'open', origin: undefined };
const asTarget: Caller = { kind: 'principal', principal: { role: 'target', target: 'scripted' } };

const send = (body: unknown, messageId = uniqueName('m')) => takeDispatchMessage(deps(), { messageId, body: typeof body === 'string' ? body : JSON.stringify(body), senderId: 'local' });
const message = (extra: Record<string, unknown> = {}) => ({ dispatchId: uniqueName('d'), origin: 'planner', target: 'scripted', task: { behavior: 'complete' }, ...extra });
const event = (dispatchId: string, seq: number, type: string, extra: Record<string, unknown> = {}) => Buffer.from(JSON.stringify({ dispatchId, seq, type, ...extra }));
const stateOf = async (dispatchId: string) => (await table.getState(dispatchId)) as DispatchState;
/** The attempt's settled check, wherever it is recorded (the state, or an item of its own). */
const checkOf = async (dispatchId: string) => evidenceCheckOf(table, await stateOf(dispatchId));
/** The bytes a ref's seal names (immutable under their hash): what a reader of the sealed file gets. */
const sealedBytesOf = async (dispatchId: string, ref: string) => {
  const file = (await checkOf(dispatchId))?.files.find((candidate) => candidate.ref === ref);
  return file ? Buffer.from((await blobs.getBytes(evidenceKey(dispatchId, 1, file.sha256, ref))) ?? []).toString() : undefined;
};

function nested(depth: number): Record<string, unknown> {
  let task: Record<string, unknown> = { leaf: true };
  for (let level = 1; level < depth; level += 1) task = { n: task };
  return task;
}

beforeAll(() => {
  target = new ScriptedTarget();
});

describe('class 1 — input that breaks the writer (through the intake on DynamoDB Local)', () => {
  it('stores and submits a task nested 40 levels deep intact (was: DynamoDB refused the anchor past 32 levels, the message went to the DLQ)', async () => {
    const sent = message({ task: nested(40) });
    const result = await send(sent);
    expect(result.outcome).toBe('submitted');
    const stored = await table.getAcceptedMessage(sent.dispatchId);
    expect(stored?.content.valid && stored.content.task).toEqual(nested(40));
    expect(target.submissions.at(-1)?.task).toEqual(nested(40));
    // CONTRACT §8 v2: the submission carries the dispatch's clocks, defaults resolved.
    expect(target.submissions.at(-1)?.timeouts).toEqual({ stallAfterSeconds: 600, approvalWaitSeconds: 1800, deliveryGraceSeconds: 300 });
  });

  it('stores a task of exactly 64 levels and blocks one of 65 as invalid_fields', async () => {
    expect((await send(message({ task: nested(64) }))).outcome).toBe('submitted');
    const deep = message({ task: nested(65) });
    const result = await send(deep);
    expect(result.outcome).toBe('blocked');
    expect((await stateOf(deep.dispatchId)).blockedCode).toBe('invalid_fields');
  });

  it('takes a message nested 200,000 levels without a stack overflow: blocked when its ids are readable, a too_deep rejection otherwise', async () => {
    const dispatchId = uniqueName('d');
    const deepTask = `${'{"n":'.repeat(200_000)}1${'}'.repeat(200_000)}`;
    const attributable = `{"dispatchId":"${dispatchId}","origin":"planner","target":"scripted","task":${deepTask}}`;
    expect((await send(attributable)).outcome).toBe('blocked');
    const anonymous = `{"task":${deepTask}}`;
    expect(await send(anonymous)).toMatchObject({ outcome: 'rejected', reason: 'too_deep' });
  });

  it('keeps every item small for a message with 5,000 unknown keys (was: the error text listed them all)', async () => {
    const sent: Record<string, unknown> = message();
    for (let index = 0; index < 5_000; index += 1) sent[`unknown_key_${index}_${'x'.repeat(40)}`] = index;
    expect((await send(sent)).outcome).toBe('blocked');
    const state = await stateOf(String(sent.dispatchId));
    expect(Buffer.byteLength(state.blockedReason ?? '')).toBeLessThanOrEqual(1024);
    const anchor = await documents.send(new GetCommand({ TableName: tableName, Key: { pk: `D#${String(sent.dispatchId)}`, sk: 'MSG' } }));
    expect(Buffer.byteLength(JSON.stringify(anchor.Item))).toBeLessThan(400 * 1024);
    const errors = anchor.Item?.content?.errors as Array<{ field: string; message: string }>;
    expect(Buffer.byteLength(errors.map((error) => `${error.field}: ${error.message}`).join('; '))).toBeLessThanOrEqual(1024 + 64);
  });
});

describe('class 1 — the v2 fields of the message', () => {
  it('keeps resultDelivery, notBefore, priority and traceparent with the accepted message (was: refused as unknown fields, so the dispatch was blocked)', async () => {
    const notBefore = new Date(clock.getTime() + 3600_000).toISOString();
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const sent = message({ resultDelivery: 'inject', notBefore, priority: 9, traceparent });
    expect((await send(sent)).outcome).not.toBe('blocked');
    const stored = await table.getAcceptedMessage(sent.dispatchId);
    expect(stored?.content.valid && stored.content).toMatchObject({ resultDelivery: 'inject', notBefore, priority: 9, traceparent });
  });

  it('blocks a notBefore more than 30 days ahead as invalid_fields, with the field named', async () => {
    const sent = message({ notBefore: new Date(clock.getTime() + 31 * 86_400_000).toISOString() });
    expect((await send(sent)).outcome).toBe('blocked');
    const state = await stateOf(sent.dispatchId);
    expect(state.blockedCode).toBe('invalid_fields');
    expect(state.blockedReason).toContain('notBefore');
  });
});

describe('class 2 — callbacks that race the record', () => {
  it('answers 409 not_yet_recorded to the target in AWS mode before the state exists (was: 404 — the event was lost)', async () => {
    const sent = message();
    let early: ApiError | undefined;
    target.onSubmit = async () => {
      early = await apiError(postRunEvent(deps(), 'r-1', event(sent.dispatchId, 1, 'heartbeat'), asTarget));
    };
    await send(sent);
    target.onSubmit = undefined;
    expect(early?.code).toBe('not_yet_recorded');
    expect(early?.statusCode).toBe(409);
  });

  it('answers 409 not_yet_recorded to an evidence upload before the run is recorded, in AWS mode too (was: 404 — the evidence was lost)', async () => {
    const sent = message({ expectedEvidence: ['out/a.md'] });
    let early: ApiError | undefined;
    target.onSubmit = async () => {
      early = await apiError(putEvidence(deps(), sent.dispatchId, 'out/a.md', { method: 'PUT', rawPath: '', query: { runId: 'r-1' }, headers: {}, body: Buffer.from('x'), iamUserId: undefined }, asTarget));
    };
    await send(sent);
    target.onSubmit = undefined;
    expect(early?.code).toBe('not_yet_recorded');
  });

  it('answers 404 to a run that is none of the dispatch’s runs while no attempt is in flight', async () => {
    const sent = message();
    await send(sent);
    expect((await apiError(postRunEvent(deps(), 'r-other', event(sent.dispatchId, 1, 'heartbeat'), open))).code).toBe('not_found');
  });
});

describe('class 3 — terminal answers outside the event route', () => {
  it('records a submission answer that is already completed through the final transition: completedAt, the event, the grace window (was: stored raw)', async () => {
    target.answer = (request) => ({ kind: 'accepted', runId: `r-${request.attempt}`, status: 'completed', requestId: 'q' });
    const sent = message({ expectedEvidence: ['out/a.md'] });
    await send(sent);
    target.answer = new ScriptedTarget().answer;
    const state = await stateOf(sent.dispatchId);
    expect(state.execution).toMatchObject({ status: 'completed', nativeStatus: 'completed', completedAt: clock.toISOString() });
    expect(state.changes).toEqual(['accepted', 'submitted', 'completed']);
    expect(state.evidence).toMatchObject({ outcome: 'pending', deadline: new Date(clock.getTime() + 300_000).toISOString() });
    expect(state.dueAt).toBe(clock.toISOString());
  });
});

describe('class 5 — evidence', () => {
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
        if ((raced += 1) === 1) expect((await redispatch(deps(), await stateOf(sent.dispatchId), { reason: 'operator forced it', force: true })).kind).toBe('redispatched');
        return bytes;
      },
    });
    const answer = await postRunEvent({ ...deps(), blobs: racing }, 'r-1', event(sent.dispatchId, 1, 'completed'), open);
    expect(answer.body).toEqual({ applied: false, late: true });
    expect(raced).toBe(1);
    const after = await stateOf(sent.dispatchId);
    expect(after.attempt).toBe(2);
    expect(after.changes).not.toContain('handled');
    expect(after.evidence.check).toBeUndefined();
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
        expect((await redispatch(deps(), await stateOf(sent.dispatchId), { reason: 'operator forced it', force: true })).kind).toBe('redispatched');
        return outcome;
      },
    });
    const answer = await postRunEvent({ ...deps(), store: racing }, 'r-1', event(sent.dispatchId, 1, 'completed'), open);
    expect(answer.body).toEqual({ applied: false, late: true });
    expect(recordedChecks).toHaveLength(1);
    expect(recordedChecks[0]?.files.map((file) => file.ref)).toEqual(refs);
    const after = await stateOf(sent.dispatchId);
    expect(after.attempt).toBe(2);
    expect(after.changes).not.toContain('handled');
    // What the stream carries for the check item publishes nothing; only a committed 'handled' change does.
    const published = eventsForStreamChange({ sequenceNumber: '1', eventName: 'INSERT', oldItem: { kind: 'other' }, newItem: { kind: 'check', check: recordedChecks[0] as EvidenceCheck } });
    expect(published).toEqual([]);
  });
});

describe('class 6 — nothing forgotten', () => {
  it('answers late to the first run of a dispatch redispatched eleven times (was: 404 once it fell out of the last ten)', async () => {
    const sent = message();
    await send(sent);
    for (let round = 0; round < 11; round += 1) {
      const outcome = await redispatch(deps(), await stateOf(sent.dispatchId), { reason: `round ${round}`, force: true });
      expect(outcome.kind).toBe('redispatched');
    }
    const state = await stateOf(sent.dispatchId);
    expect(state.attempt).toBe(12);
    expect(state.supersededRuns).not.toContain('r-1');
    expect((await postRunEvent(deps(), 'r-1', event(sent.dispatchId, 9, 'completed'), open)).body).toEqual({ applied: false, late: true });
    // …its evidence upload is refused as superseded (409), and a receipt about it is still recorded.
    const upload = await apiError(putEvidence(deps(), sent.dispatchId, 'out/a.md', { method: 'PUT', rawPath: '', query: { runId: 'r-1' }, headers: {}, body: Buffer.from('x'), iamUserId: undefined }, open));
    expect(upload.statusCode).toBe(409);
    const receipt = Buffer.from(JSON.stringify({ receiptId: 'rc-old', runId: 'r-1', kind: 'artifact_acceptance', state: 'rejected', verifiedBy: 'alice' }));
    expect((await postOperatorReceipt(deps(), state, receipt, { caller: { kind: 'open', origin: 'planner' }, principalId: undefined })).status).toBe(201);
    // Every attempt's receipts are kept, none in the hot state but the current attempt's.
    const past = await table.listPastAttempts(sent.dispatchId);
    expect(past.map((attempt) => attempt.runId)).toEqual(Array.from({ length: 11 }, (_, index) => `r-${index + 1}`));
    expect(state.receipts.every((receipt) => receipt.attempt === 12)).toBe(true);
  });

  it('sets an expiry on the accepted-message anchor (was: none — kept forever)', async () => {
    const sent = message();
    await send(sent);
    const anchor = await documents.send(new GetCommand({ TableName: tableName, Key: { pk: `D#${sent.dispatchId}`, sk: 'MSG' } }));
    expect(anchor.Item?.expiresAt).toBe(Math.floor(clock.getTime() / 1000) + 2 * 30 * 86_400);
  });
});

describe('class 7 — resuming taken-in work', () => {
  it('resumes a redelivery of a message whose anchor is two days old and has no state (was: dropped as an expired duplicate)', async () => {
    const sent = message();
    const crashing = overriding<LedgerTable>(table, {
      commit: async (): Promise<never> => {
        throw new Error('injected crash before the state write');
      },
    });
    await expect(takeDispatchMessage({ ...deps(), store: crashing }, { messageId: 'm-old', body: JSON.stringify(sent), senderId: 'local' })).rejects.toThrow('injected crash');
    tick(2 * 86_400);
    const resumed = await send(sent, 'm-old');
    expect(resumed.outcome).toBe('submitted');
    expect((await stateOf(sent.dispatchId)).phase).toBe('submitted');
  });
});

describe('the shape — stored items decode through checks, never casts', () => {
  it('answers 500 audit_failure for a state item that fails decoding, naming it (was: cast, and answered from garbage)', async () => {
    const dispatchId = uniqueName('d');
    await documents.send(new PutCommand({ TableName: tableName, Item: { pk: `D#${dispatchId}`, sk: 'STATE', originKey: 'O#planner', phase: 'bogus', version: 'three' } }));
    const feeds = new LedgerFeedsTable(documents, { tableName, retentionSeconds: 86_400 });
    const error = await apiError(route({ ...deps(), feeds, inbox: new InboxTable(documents, { tableName, retentionSeconds: 86_400 }) }, { method: 'GET', rawPath: `/dispatches/${dispatchId}`, query: {}, headers: { 'x-ledger-origin': 'planner' }, body: undefined, iamUserId: undefined }));
    expect(error.code).toBe('audit_failure');
    expect(error.statusCode).toBe(500);
    expect(decodeItem({ pk: `D#${dispatchId}`, sk: 'STATE', phase: 'bogus' })).toMatchObject({ kind: 'corrupt' });
  });
});

describe('class 9 — API answers', () => {
  it('accepts seq 2^53 − 1 and refuses 2^53 with 422', async () => {
    const sent = message();
    await send(sent);
    expect((await postRunEvent(deps(), 'r-1', event(sent.dispatchId, Number.MAX_SAFE_INTEGER, 'failed'), open)).status).toBe(202);
    const body = Buffer.from(`{"dispatchId":"${sent.dispatchId}","seq":9007199254740992,"type":"progress"}`);
    expect((await apiError(postRunEvent(deps(), 'r-1', body, open))).statusCode).toBe(422);
  });

  it('answers a coalesced heartbeat and its repeat 200 applied:false, coalesced:true (was: 202 applied:true for a write never made)', async () => {
    const sent = message();
    await send(sent);
    const first = await postRunEvent(deps(), 'r-1', event(sent.dispatchId, 1, 'heartbeat'), open);
    expect(first).toEqual({ status: 200, body: { applied: false, coalesced: true } });
    const repeat = await postRunEvent(deps(), 'r-1', event(sent.dispatchId, 1, 'heartbeat'), open);
    expect(repeat.status).toBe(200);
    expect(repeat.body.applied).toBe(false);
  });
});

describe('class 8 — verdict timing (the monitor)', () => {
  it('takes a retry claim with the clock at the write, not the tick start (was: a claim already lapsed when a tick ran long)', async () => {
    target.answer = () => ({ kind: 'unavailable', reason: 'HTTP 503' });
    const sent = message();
    await send(sent);
    target.answer = new ScriptedTarget().answer;
    clock = new Date(Date.parse((await stateOf(sent.dispatchId)).dueAt ?? '') + 1000);
    const tickStart = clock;
    let calls = 0;
    // The tick's first reads happen at its start; by the claim, two minutes have gone by (a long tick).
    const slowClock = () => (calls++ < 1 ? tickStart : new Date(tickStart.getTime() + 120_000));
    let dueDuringSubmit: number | undefined;
    target.onSubmit = async () => {
      dueDuringSubmit = Date.parse((await stateOf(sent.dispatchId)).dueAt ?? '');
    };
    await monitorTick({ ...monitorDeps(), now: slowClock });
    target.onSubmit = undefined;
    expect(dueDuringSubmit).toBeGreaterThan(tickStart.getTime() + 120_000);
  });

  it('never submits the same Idempotency-Key concurrently from overlapping ticks', async () => {
    target.answer = () => ({ kind: 'unavailable', reason: 'HTTP 503' });
    const sent = message();
    await send(sent);
    target.answer = new ScriptedTarget().answer;
    clock = new Date(Date.parse((await stateOf(sent.dispatchId)).dueAt ?? '') + 1000);
    let inFlight = 0;
    let most = 0;
    let overlapping: Array<Awaited<ReturnType<typeof monitorTick>>> | undefined;
    const before = target.submissions.length;
    // While the first tick's submission is in flight, two more ticks run to their end.
    target.onSubmit = async () => {
      inFlight += 1;
      most = Math.max(most, inFlight);
      if (!overlapping) {
        overlapping = [];
        overlapping = await Promise.all([monitorTick(monitorDeps()), monitorTick(monitorDeps())]);
      }
      inFlight -= 1;
    };
    await monitorTick(monitorDeps());
    target.onSubmit = undefined;
    // They ran (two reports) and left it alone: its shard was claimed by the first tick, its claim took it off the due list, or the re-read showed it claimed.
    expect(overlapping).toHaveLength(2);
    for (const report of overlapping ?? []) expect(report.actions.submitted ?? 0).toBe(0);
    expect(most).toBe(1);
    expect(target.submissions.length - before).toBe(1);
  });

  it('looks an unobservable run up with backoff doubling from stallAfterSeconds, capped at 6 h (was: every stall window, forever)', async () => {
    const sent = message({ timeouts: { stallAfterSeconds: 600 } });
    await send(sent);
    const delays: number[] = [];
    for (let round = 0; round < 9; round += 1) {
      const due = Date.parse((await stateOf(sent.dispatchId)).dueAt ?? '');
      clock = new Date(due + 1000);
      await monitorTick(monitorDeps());
      const next = Date.parse((await stateOf(sent.dispatchId)).dueAt ?? '');
      delays.push(Math.round((next - clock.getTime()) / 1000));
    }
    const state = await stateOf(sent.dispatchId);
    expect(state.execution).toMatchObject({ status: 'unknown', monitorStatus: 'lookup_unavailable', nativeStatus: 'running' });
    // First the stall deadline (the coalescing window after the stall window), then the lookups.
    expect(delays).toEqual([119, 600, 1200, 2400, 4800, 9600, 19200, 21600, 21600]);
  });
});

describe('class 4 — an approval decision the target accepted is recorded', () => {
  it('records the decision even when its writes lose races to other writers, round after round (was: given up after three)', async () => {
    const sent = message();
    await send(sent);
    await postRunEvent(deps(), 'r-1', event(sent.dispatchId, 1, 'approval_requested', { approvalId: 'a-1' }), open);
    const waiting = await stateOf(sent.dispatchId);
    // Just before each of the decision's first four writes, another writer changes the dispatch (a progress note).
    let seq = 1;
    const busy = overriding<LedgerTable>(table, {
      commit: async (from: DispatchState, next: DispatchState) => {
        if (next.changes.includes('approval_decided') && seq < 5) {
          seq += 1;
          tick(200);
          await postRunEvent(deps(), 'r-1', event(sent.dispatchId, seq, 'progress'), open);
        }
        return table.commit(from, next);
      },
    });
    const outcome = await decideApproval({ ...deps(), store: busy }, waiting, { approvalId: 'a-1', decision: 'approve' });
    expect(seq).toBe(5);
    expect(outcome).toMatchObject({ kind: 'decided', recorded: true });
    const after = await stateOf(sent.dispatchId);
    expect(after.execution.pendingApproval).toBeNull();
    expect(after.changes).toEqual(['approval_decided']);
  });
});

describe('class 9 — the attention feed', () => {
  it('orders by when the problem began, stable while later writes touch a dispatch (was: by its last write, so pages shifted)', async () => {
    const own = await ensureLedgerTable(clients.dynamodb, uniqueName('attention'));
    const ownTable = new LedgerTable(documents, { tableName: own.name, retentionSeconds: 86_400 });
    await ownTable.putTarget({ name: 'scripted', kind: 'http', baseUrl: 'http://127.0.0.1:9' });
    const ownDeps = () => ({ ...deps(), store: ownTable, dueIndex: new LedgerDueIndex(documents, own.name), pageSize: 100 });
    const first = message({ timeouts: { stallAfterSeconds: 60 } });
    const second = message({ timeouts: { stallAfterSeconds: 60 } });
    await takeDispatchMessage(ownDeps(), { messageId: uniqueName('m'), body: JSON.stringify(first), senderId: 'local' });
    tick(30);
    await takeDispatchMessage(ownDeps(), { messageId: uniqueName('m'), body: JSON.stringify(second), senderId: 'local' });
    tick(60);
    await monitorTick(ownDeps()); // first is lost (lookup 503): unknown since now
    tick(30);
    await monitorTick(ownDeps()); // second: unknown since now
    // The first is looked up again later (a write), still unknown: its place must not move.
    clock = new Date(Date.parse((await ownTable.getState(first.dispatchId))?.dueAt ?? '') + 1000);
    await monitorTick(ownDeps());
    const feeds = new LedgerFeedsTable(documents, { tableName: own.name, retentionSeconds: 86_400 });
    const order = async () => {
      const ids: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await eventuallyPage(() => feeds.listAttention({ kind: 'unknown', limit: 1, cursor }));
        ids.push(...page.items.map((state) => state.dispatchId));
        cursor = page.cursor ?? undefined;
      } while (cursor);
      return ids;
    };
    expect(await order()).toEqual([second.dispatchId, first.dispatchId]);
  });
});

/** The feed index is eventually consistent on DynamoDB Local too: read until the page is there. */
async function eventuallyPage<T>(read: () => Promise<T>): Promise<T> {
  return eventually('the attention page', read, 5_000);
}

describe('class 6 — the view stays bounded, nothing is dropped', () => {
  it('carries the newest 50 receipts and runs, with cursors to every older one (was: one growing item and list)', async () => {
    const sent = message();
    await send(sent);
    for (let round = 0; round < 55; round += 1) {
      expect((await redispatch(deps(), await stateOf(sent.dispatchId), { reason: `round ${round}`, force: true })).kind).toBe('redispatched');
    }
    const feeds = new LedgerFeedsTable(documents, { tableName, retentionSeconds: 86_400 });
    const get = (path: string, cursor?: string) =>
      route({ ...deps(), feeds, inbox: new InboxTable(documents, { tableName, retentionSeconds: 86_400 }) }, { method: 'GET', rawPath: path, query: cursor ? { cursor } : {}, headers: { 'x-ledger-origin': 'planner' }, body: undefined, iamUserId: undefined });
    const answer = await get(`/dispatches/${sent.dispatchId}`);
    expect(answer.body.length).toBeLessThan(1024 * 1024);
    const view = JSON.parse(answer.body) as { receipts: Array<{ attempt: number }>; runs: Array<{ runId: string }>; more: { receipts: string | null; runs: string | null } };
    expect(view.receipts).toHaveLength(50);
    expect(view.runs).toHaveLength(50);
    expect(view.runs.at(-1)?.runId).toBe('r-56');
    const older = JSON.parse((await get(`/dispatches/${sent.dispatchId}/runs`, view.more.runs ?? '')).body) as { items: Array<{ runId: string }>; cursor: string | null };
    expect(older.items.map((run) => run.runId)).toEqual(['r-1', 'r-2', 'r-3', 'r-4', 'r-5', 'r-6']);
    expect(older.cursor).toBeNull();
    const olderReceipts = JSON.parse((await get(`/dispatches/${sent.dispatchId}/receipts`, view.more.receipts ?? '')).body) as { items: Array<{ event: string; attempt: number }> };
    expect(olderReceipts.items[0]).toMatchObject({ event: 'dispatch_written', attempt: 1 });
    expect(olderReceipts.items.length + view.receipts.length).toBe(57);
    const forged = await apiError(get(`/dispatches/${sent.dispatchId}/runs`, Buffer.from('receipts:3').toString('base64url')));
    expect(forged.statusCode).toBe(400);
  });
});

// Both places a seal is recorded: the settled state (detached: it fits one write unit) and an item of
// its own (callback: the result out leaves the state no room).
describe.each([
  ['detached', 'the settled state'],
  ['callback', 'its own check item'],
] as const)('class 5 — sealing and an upload cannot interleave (racing PUTs; %s, the seal in %s)', (mode, _recordedThere) => {
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

describe('review findings — edges the first pass missed', () => {
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

  it('records nothing on a refresh of a run waiting for approval whose lookup fails: the approval clock stands', async () => {
    const sent = message({ timeouts: { stallAfterSeconds: 60, approvalWaitSeconds: 3600 } });
    await send(sent);
    await postRunEvent(deps(), 'r-1', event(sent.dispatchId, 1, 'approval_requested', { approvalId: 'a-1' }), open);
    const waiting = await stateOf(sent.dispatchId);
    tick(600); // long past the stall deadline, well inside the approval wait
    const answered = await refreshed(deps(), waiting);
    expect(answered.execution.monitorStatus).toBe('lookup_unavailable');
    const stored = await stateOf(sent.dispatchId);
    expect(stored.version).toBe(waiting.version);
    expect(stored.dueAt).toBe(waiting.dueAt);
  });

  it('moves a due record that fails decoding out of the way, and acts on the healthy ones of the tick', async () => {
    const corrupt = uniqueName('d');
    await documents.send(new PutCommand({ TableName: tableName, Item: { pk: `D#${corrupt}`, sk: 'STATE', originKey: 'O#planner', phase: 'bogus', dueShard: dueShardOf(corrupt), dueAt: new Date(clock.getTime() - 1000).toISOString() } }));
    target.answer = () => ({ kind: 'unavailable', reason: 'HTTP 503' });
    const healthy = message();
    await send(healthy);
    target.answer = new ScriptedTarget().answer;
    clock = new Date(Date.parse((await stateOf(healthy.dispatchId)).dueAt ?? '') + 1000);
    const report = await monitorTick(monitorDeps());
    expect(report.failures.map((failure) => failure.subject)).toContain(corrupt);
    expect(report.failures.map((failure) => failure.subject)).not.toContain(healthy.dispatchId);
    expect((await stateOf(healthy.dispatchId)).phase).toBe('submitted');
    const raw = await documents.send(new GetCommand({ TableName: tableName, Key: { pk: `D#${corrupt}`, sk: 'STATE' } }));
    expect(Date.parse(String(raw.Item?.dueAt))).toBe(clock.getTime() + FAILED_RETRY_SECONDS * 1000);
  });

  it('makes a completed run due again on an expected upload even when it is due already (a check in flight must not reschedule it to the deadline)', async () => {
    const sent = message({ expectedEvidence: ['out/a.md', 'out/b.md'], timeouts: { deliveryGraceSeconds: 3600 } });
    await send(sent);
    await postRunEvent(deps(), 'r-1', event(sent.dispatchId, 1, 'completed'), open);
    const due = await stateOf(sent.dispatchId);
    expect(Date.parse(due.dueAt ?? '')).toBeLessThanOrEqual(clock.getTime());
    await uploadTo(sent.dispatchId, 'out/a.md', 'a');
    const after = await stateOf(sent.dispatchId);
    expect(after.version).toBe(due.version + 1);
    expect(after.changes).toEqual(['evidence_recheck']);
  });
});

describe('second review findings', () => {
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

  it('answers a state write that overlapped a transaction as a conflict to re-read, not a 500', async () => {
    const conflicting = new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
    let injected = 0;
    conflicting.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'PutItemCommand' && injected === 0) {
          injected += 1;
          throw Object.assign(new Error('Transaction is ongoing for the item'), { name: 'TransactionConflictException' });
        }
        return next(args);
      },
      { step: 'initialize', name: 'injectTransactionConflict' },
    );
    const overlapping = new LedgerTable(DynamoDBDocumentClient.from(loopbackOnly(conflicting), { marshallOptions: { removeUndefinedValues: true } }), { tableName, retentionSeconds: 86_400 });
    const sent = message();
    await send(sent);
    const state = await stateOf(sent.dispatchId);
    const answer = await postRunEvent({ ...deps(), store: overlapping }, 'r-1', event(sent.dispatchId, 1, 'failed'), open);
    expect(injected).toBe(1);
    expect(answer.status).toBe(202); // the lost race was re-read and the event applied on the next round
    expect((await stateOf(sent.dispatchId)).version).toBe(state.version + 1);
    conflicting.destroy();
  });
});

describe('census findings', () => {
  it('tries a dispatch the monitor failed on again one schedule period later, not a fixed minute (a 1 s local tick waited 60 ticks)', async () => {
    const sent = message();
    target.answer = () => ({ kind: 'unavailable', reason: 'HTTP 503' });
    await send(sent);
    target.answer = new ScriptedTarget().answer;
    clock = new Date(Date.parse((await stateOf(sent.dispatchId)).dueAt ?? '') + 1000);
    // The store fails the claim once: the action throws, as a crash between two steps would.
    const failing = overriding<LedgerTable>(table, {
      commit: () => Promise.reject(new Error('the table timed out')),
    });
    const report = await monitorTick({ ...monitorDeps(), store: failing, periodSeconds: 2 });
    expect(report.failures.map((failure) => failure.subject)).toContain(sent.dispatchId);
    expect((await stateOf(sent.dispatchId)).dueAt).toBe(new Date(clock.getTime() + 2000).toISOString());
  });
  it('counts that period from the tick\'s start, so a long tick still retries on the next one, not the one after', async () => {
    const sent = message();
    target.answer = () => ({ kind: 'unavailable', reason: 'HTTP 503' });
    await send(sent);
    target.answer = new ScriptedTarget().answer;
    const tickStart = new Date(Date.parse((await stateOf(sent.dispatchId)).dueAt ?? '') + 1000);
    // Each read of the clock is 700 ms later: the tick runs for a while before its failure is deferred.
    let reads = 0;
    const slowClock = () => new Date(tickStart.getTime() + 700 * reads++);
    const failing = overriding<LedgerTable>(table, { commit: () => Promise.reject(new Error('the table timed out')) });
    const report = await monitorTick({ ...monitorDeps(), store: failing, now: slowClock, periodSeconds: 2 });
    expect(report.failures.map((failure) => failure.subject)).toContain(sent.dispatchId);
    expect(reads).toBeGreaterThan(1);
    expect((await stateOf(sent.dispatchId)).dueAt).toBe(new Date(tickStart.getTime() + 2000).toISOString());
  });
});
