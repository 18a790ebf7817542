import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { STATE_ITEM } from '../../shared/adapters/item-kinds.js';
import { stateVersionOf } from '../../shared/adapters/state-item.js';
import type { StateVersion } from '../../shared/events/derive.js';
import type { StoredState } from '../../shared/ledger/port.js';
import { getRunControl, getTask, postRunEvent } from '../../shared/api/lifecycle-routes.js';
import { refreshed } from '../../shared/usecases/run-events.js';
import { putEvidence } from '../../shared/api/evidence-routes.js';
import { postOperatorReceipt } from '../../shared/api/receipt-routes.js';
import { ApiError } from '../../shared/api/http.js';
import { decideApproval } from '../../shared/usecases/approval.js';
import { redispatch } from '../../shared/usecases/redispatch.js';
import { loopbackOnly, testEngines } from '../support/engines.js';
import { overriding } from '../support/factories.js';
import { ScriptedTarget } from '../support/scripted-target.js';
import { apiError } from '../support/api-error.js';
import { asTarget, clock, deps, documents, event, message, open, send, stateOf, table, tableName, target, tick } from '../support/ledger-fixture.js';

/** A dispatch's state item as stored: the state, the version that wrote it and what that write changed. */
const writtenOf = async (dispatchId: string): Promise<StateVersion> => {
  const { Item } = await documents.send(new GetCommand({ TableName: tableName, Key: STATE_ITEM.key(dispatchId), ConsistentRead: true }));
  if (!Item) throw new Error(`no state item for ${dispatchId}`);
  return stateVersionOf(Item);
};
/** A dispatch's state with the version a write is conditioned on: what a writer reads. */
const storedOf = async (dispatchId: string) => (await table.getStored(dispatchId)) as StoredState;

/** Regression tests of run callbacks on DynamoDB Local and fauxqs S3 (the ledger of test/support/ledger-fixture.ts): each names the bug it pins ("was: …"). */

describe('run callbacks that race the record: not yet recorded, never lost', () => {
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

  it('answers 409 not_yet_recorded to a control poll and a task read before the run is recorded, in AWS mode too (never 404: a Lambda reads its task, and polls, from its first moment)', async () => {
    const sent = message();
    const early: Array<ApiError | undefined> = [];
    target.onSubmit = async () => {
      early.push(await apiError(getRunControl(deps(), 'r-1', sent.dispatchId, asTarget)));
      early.push(await apiError(getTask(deps(), sent.dispatchId, 'r-1', asTarget)));
    };
    await send(sent);
    target.onSubmit = undefined;
    expect(early.map((error) => [error?.statusCode, error?.code])).toEqual([
      [409, 'not_yet_recorded'],
      [409, 'not_yet_recorded'],
    ]);
  });

  it('answers 404 to a run that is none of the dispatch’s runs while no attempt is in flight', async () => {
    const sent = message();
    await send(sent);
    expect((await apiError(postRunEvent(deps(), 'r-other', event(sent.dispatchId, 1, 'heartbeat'), open))).code).toBe('not_found');
  });
});

describe('a submission\'s answer that is already final goes through the final transition', () => {
  it('records a submission answer that is already completed through the final transition: completedAt, the event, the grace window (was: stored raw)', async () => {
    target.answer = (request) => ({ kind: 'accepted', runId: `r-${request.attempt}`, status: 'completed', requestId: 'q' });
    const sent = message({ expectedEvidence: ['out/a.md'] });
    await send(sent);
    target.answer = new ScriptedTarget().answer;
    const state = await stateOf(sent.dispatchId);
    expect(state.execution).toMatchObject({ status: 'completed', nativeStatus: 'completed', completedAt: clock.toISOString() });
    expect((await writtenOf(sent.dispatchId)).changes).toEqual(['accepted', 'submitted', 'completed']);
    expect(state.evidence).toMatchObject({ outcome: 'pending', deadline: new Date(clock.getTime() + 300_000).toISOString() });
    expect(state.dueAt).toBe(clock.toISOString());
  });
});

describe('the run event route\'s answers', () => {
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

describe('an approval decision the target accepted is recorded', () => {
  it('records the decision even when its writes lose races to other writers, round after round (was: given up after three)', async () => {
    const sent = message();
    await send(sent);
    await postRunEvent(deps(), 'r-1', event(sent.dispatchId, 1, 'approval_requested', { approvalId: 'a-1' }), open);
    const waiting = await storedOf(sent.dispatchId);
    // Just before each of the decision's first four writes, another writer changes the dispatch (a progress note).
    let seq = 1;
    const busy = overriding<LedgerTable>(table, {
      commit: async (from, next) => {
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
    const after = await writtenOf(sent.dispatchId);
    expect(after.state.execution.pendingApproval).toBeNull();
    expect(after.changes).toEqual(['approval_decided']);
  });
});

describe('run callbacks: edges the first reviews found', () => {
  it('answers late to the first run of a dispatch redispatched eleven times (was: 404 once it fell out of the last ten)', async () => {
    const sent = message();
    await send(sent);
    for (let round = 0; round < 11; round += 1) {
      const outcome = await redispatch(deps(), await storedOf(sent.dispatchId), { reason: `round ${round}`, force: true });
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

  it('records nothing on a refresh of a run waiting for approval whose lookup fails: the approval clock stands', async () => {
    const sent = message({ timeouts: { stallAfterSeconds: 60, approvalWaitSeconds: 3600 } });
    await send(sent);
    await postRunEvent(deps(), 'r-1', event(sent.dispatchId, 1, 'approval_requested', { approvalId: 'a-1' }), open);
    const waiting = await storedOf(sent.dispatchId);
    tick(600); // long past the stall deadline, well inside the approval wait
    const answered = await refreshed(deps(), waiting);
    expect(answered.execution.monitorStatus).toBe('lookup_unavailable');
    const stored = await storedOf(sent.dispatchId);
    expect(stored.version).toBe(waiting.version);
    expect(stored.state.dueAt).toBe(waiting.state.dueAt);
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
    const state = await storedOf(sent.dispatchId);
    const answer = await postRunEvent({ ...deps(), store: overlapping }, 'r-1', event(sent.dispatchId, 1, 'failed'), open);
    expect(injected).toBe(1);
    expect(answer.status).toBe(202); // the lost race was re-read and the event applied on the next round
    expect((await storedOf(sent.dispatchId)).version).toBe(state.version + 1);
    conflicting.destroy();
  });
});
