import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBucket, ensureLedgerTable } from '../../local/resources.js';
import { LedgerDueIndex } from '../../shared/adapters/due-index.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import { postRunEvent } from '../../shared/api/lifecycle-routes.js';
import type { Caller } from '../../shared/api/caller.js';
import type { DispatchState, NextState } from '../../shared/dispatch/state.js';
import type { StoredState } from '../../shared/ledger/port.js';
import { coalescingWindowMs } from '../../shared/dispatch/transitions/run.js';
import type { PastAttempt } from '../../shared/dispatch/records.js';
import { takeDispatchMessage, type IntakeDeps } from '../../shared/usecases/intake.js';
import { monitorTick } from '../../shared/usecases/monitor.js';
import { cancelDispatch } from '../../shared/usecases/flow.js';
import { redispatch } from '../../shared/usecases/redispatch.js';
import { engineClients, loopbackOnly, uniqueName, testEngines } from '../support/engines.js';
import { intakeDepsFactory, overriding } from '../support/factories.js';
import { ScriptedTarget } from '../support/scripted-target.js';

/**
 * An operator's or an origin's request against a run that keeps writing (found under load in
 * worker-lambda.test.ts and flow-control.test.ts), on DynamoDB Local: a write lands between the
 * request's read and its own write, and the request must neither be lost nor override it.
 */
const clients = engineClients();
const dynamodb = loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
let tableName: string;
let table: LedgerTable;
let blobs: S3Blobs;
let clock = new Date('2026-12-01T10:00:00Z');
const target = new ScriptedTarget();

beforeAll(async () => {
  tableName = uniqueName('races');
  await ensureLedgerTable(clients.dynamodb, tableName);
  table = new LedgerTable(documents, { tableName, retentionSeconds: 30 * 86_400 });
  blobs = new S3Blobs(clients.s3, await ensureBucket(clients.s3, uniqueName('blobs')));
  await table.putTarget({ name: 'scripted', kind: 'http', baseUrl: 'http://127.0.0.1:9' });
});
afterAll(() => {
  clients.destroy();
  dynamodb.destroy();
});

const deps = (): IntakeDeps => intakeDepsFactory({ store: table, blobs, targetFor: () => target, principals: table, now: () => clock });
const monitorDeps = () => ({ ...deps(), dueIndex: new LedgerDueIndex(documents, tableName), pageSize: 100 });
const open: Caller = { kind: 'open', origin: undefined };
const send = (body: unknown) => takeDispatchMessage(deps(), { messageId: uniqueName('m'), body: JSON.stringify(body), senderId: 'local' });
const message = () => ({ dispatchId: uniqueName('d'), origin: 'planner', target: 'scripted', task: { behavior: 'complete' } });
const event = (dispatchId: string, seq: number, type: string) => Buffer.from(JSON.stringify({ dispatchId, seq, type }));
const stateOf = async (dispatchId: string) => (await table.getState(dispatchId)) as DispatchState;
/** The state with the version a write is conditioned on: what a writer reads. */
const storedOf = async (dispatchId: string) => (await table.getStored(dispatchId)) as StoredState;

describe('a request whose write loses to another landing between its read and its write', () => {
  /** A table whose `nth` state write lets `first` land before it (the run's write between the operator's read and write). */
  const losingOnceTo = (first: () => Promise<unknown>, nth = 1) => {
    let writes = 0;
    return overriding<LedgerTable>(table, {
      commit: async (from: StoredState, next: NextState, ended?: PastAttempt) => {
        if ((writes += 1) === nth) await first();
        return table.commit(from, next, ended);
      },
    });
  };

  it('redispatches with force though the run\'s progress landed between its read and its write (was: 409 "changed concurrently", under load in worker-lambda.test.ts)', async () => {
    const sent = message();
    await send(sent);
    // Past the coalescing window, so the progress is written (a coalesced one writes nothing).
    clock = new Date(clock.getTime() + coalescingWindowMs(await stateOf(sent.dispatchId)) + 1000);
    const progress = async () => expect((await postRunEvent(deps(), 'r-1', event(sent.dispatchId, 1, 'progress'), open)).body).toEqual({ applied: true });
    const outcome = await redispatch({ ...deps(), store: losingOnceTo(progress) }, await storedOf(sent.dispatchId), { reason: 'the run looks stuck', force: true });
    expect(outcome.kind).toBe('redispatched');
    const after = await stateOf(sent.dispatchId);
    expect(after.attempt).toBe(2);
    expect(after.supersededRuns).toContain('r-1');
  });

  it('does not redispatch twice when the write it lost to was another redispatch of the run (two operators at once): the second answers conflict', async () => {
    const sent = message();
    await send(sent);
    const other = async () => expect((await redispatch(deps(), await storedOf(sent.dispatchId), { reason: 'first operator', force: true })).kind).toBe('redispatched');
    const outcome = await redispatch({ ...deps(), store: losingOnceTo(other) }, await storedOf(sent.dispatchId), { reason: 'second operator', force: true });
    expect(outcome.kind).toBe('conflict');
    expect((await stateOf(sent.dispatchId)).attempt).toBe(2);
  });

  it('leaves an origin\'s cancel that landed between the operator\'s read and write standing: conflict, no new attempt (review finding)', async () => {
    for (const submittedFirst of [true, false]) {
      const sent = message();
      if (!submittedFirst) target.answer = () => ({ kind: 'unavailable', reason: 'HTTP 503' });
      await send(sent);
      target.answer = new ScriptedTarget().answer;
      expect((await stateOf(sent.dispatchId)).phase).toBe(submittedFirst ? 'submitted' : 'accepted');
      const cancel = async () => expect((await cancelDispatch(deps(), await storedOf(sent.dispatchId), { reason: 'not needed', by: 'origin' })).kind).toBe(submittedFirst ? 'requested' : 'cancelled');
      const outcome = await redispatch({ ...deps(), store: losingOnceTo(cancel) }, await storedOf(sent.dispatchId), { reason: 'retry it', force: true });
      expect(outcome.kind, submittedFirst ? 'a submitted run' : 'before submission').toBe('conflict');
      const after = await stateOf(sent.dispatchId);
      expect(after.attempt).toBe(1);
      expect(after.cancel?.requestedAt).toBeDefined();
    }
  });

  it('does not fence a redispatch of a dispatch with no run twice (two operators at once on the same attempt): the second answers conflict (review finding)', async () => {
    const sent = message();
    target.answer = () => ({ kind: 'unavailable', reason: 'HTTP 503' });
    await send(sent);
    target.answer = new ScriptedTarget().answer;
    const before = await storedOf(sent.dispatchId);
    expect(before.state.runId).toBeNull();
    const other = async () => expect((await redispatch(deps(), await storedOf(sent.dispatchId), { reason: 'first operator', force: true })).kind).toBe('redispatched');
    const outcome = await redispatch({ ...deps(), store: losingOnceTo(other) }, before, { reason: 'second operator', force: true });
    expect(outcome.kind).toBe('conflict');
    expect(await table.listPastAttempts(sent.dispatchId)).toHaveLength(1);
  });

  it('records the target\'s answer to a cancel though the run\'s progress landed before it (was: dropped, and the monitor asked the target again: flow-control.test.ts under load)', async () => {
    const sent = message();
    await send(sent);
    clock = new Date(clock.getTime() + coalescingWindowMs(await stateOf(sent.dispatchId)) + 1000);
    const progress = async () => expect((await postRunEvent(deps(), 'r-1', event(sent.dispatchId, 1, 'progress'), open)).body).toEqual({ applied: true });
    let asked = 0;
    const cancel = target.cancel.bind(target);
    target.cancel = async () => {
      asked += 1;
      return cancel();
    };
    try {
      // The first write records the request, the second the target's answer: the progress lands between.
      const outcome = await cancelDispatch({ ...deps(), store: losingOnceTo(progress, 2) }, await storedOf(sent.dispatchId), { reason: 'stop', by: 'origin' });
      expect(outcome.kind).toBe('requested');
    } finally {
      target.cancel = cancel;
    }
    const after = await stateOf(sent.dispatchId);
    expect(asked).toBe(1);
    expect(after.cancel?.asks).toBe(1);
    expect(after.execution.status).toBe('cancelled');
    // Nothing left for the monitor to ask.
    clock = new Date(clock.getTime() + 3_600_000);
    await monitorTick(monitorDeps());
    expect(asked).toBe(1);
  });
});
