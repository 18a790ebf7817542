import { STATE_ITEM } from '../../shared/adapters/item-kinds.js';
import { ConditionalCheckFailedException, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startDemoAgent, type DemoAgent } from '../../local/demo-agent/server.js';
import { ensureBucket, ensureLedgerTable } from '../../local/resources.js';
import { HotPathTable } from '../../shared/adapters/hot-path-table.js';

import { httpTarget } from '../../shared/adapters/http-target.js';
import { statePut } from '../../shared/adapters/ledger-commands.js';
import { LedgerDueIndex } from '../../shared/adapters/due-index.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import { withDynamoDbFaults } from '../../shared/adapters/wiring.js';
import { installFaults, type ProductFault } from '../../shared/faults.js';
import { DispatchInProgressError, takeDispatchMessage } from '../../shared/usecases/intake.js';
import { stateOnly, type DispatchState, type NextState } from '../../shared/dispatch/state.js';
import { notStored, type StoredState } from '../../shared/ledger/port.js';
import { cancelledBeforeSubmission, waiting } from '../../shared/dispatch/transitions/flow.js';
import { accepted } from '../../shared/dispatch/transitions/lifecycle.js';
import { cancelDispatch } from '../../shared/usecases/flow.js';
import { redispatch } from '../../shared/usecases/redispatch.js';
import { engineClients, loopbackOnly, uniqueName, testEngines } from '../support/engines.js';
import { intakeDepsFactory, newDispatchFactory, overriding } from '../support/factories.js';

/**
 * A conditional write whose answer is lost after DynamoDB applied it (a timeout, a dropped
 * connection): the SDK sends it again, and the retry meets the write it made itself. That is the
 * writer's own success, never someone else's hold. On DynamoDB Local, with the product's own fault
 * middleware (`withDynamoDbFaults`, the census's) answering a timeout after the first apply.
 */
const clients = engineClients();
/** A transition's output as the table holds it after the write that made it version `version`: the state alone, in its envelope. */
const storedAt = (next: NextState, version: number): StoredState => ({ state: stateOnly(next), version });
const dynamodb = withDynamoDbFaults(loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } })));
const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
const hotPath = withDynamoDbFaults(loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' }, cacheMiddleware: true })));
let tableName: string;
let table: LedgerTable;
let blobs: S3Blobs;
let agent: DemoAgent;
let clock = new Date('2026-12-01T10:00:00Z');
let uninstall: (() => void) | undefined;

beforeAll(async () => {
  tableName = uniqueName('lost');
  await ensureLedgerTable(clients.dynamodb, tableName);
  table = new LedgerTable(documents, { tableName, retentionSeconds: 86_400 });
  blobs = new S3Blobs(clients.s3, await ensureBucket(clients.s3, uniqueName('blobs')));
  agent = await startDemoAgent();
  await table.putTarget({ name: 'demo-agent', kind: 'http', baseUrl: agent.url });
});
afterEach(() => uninstall?.());
afterAll(async () => {
  await agent.stop();
  clients.destroy();
  dynamodb.destroy();
  hotPath.destroy();
});

/** The `nth` next `command`'s first attempt is applied and its answer lost; every fault asked for is recorded. */
function loseTheAnswerOfNext(command: string, nth = 1): { readonly lost: () => number } {
  let lost = 0;
  let seen = 0;
  uninstall = installFaults({
    fires: (fault: ProductFault, subject: string) => {
      if (fault !== 'dynamodb_timeout' || subject !== command || lost > 0) return false;
      if ((seen += 1) < nth) return false;
      lost += 1;
      return true;
    },
  });
  return { lost: () => lost };
}

describe('a conditional write retried after its answer was lost is its own writer\'s', () => {
  it('claims a due shard: the tick works it and releases it, not left held until the invocation ends', async () => {
    const dueIndex = new LedgerDueIndex(documents, tableName);
    const [shard] = dueIndex.dueShards;
    if (!shard) throw new Error('the due index has shards');
    const now = new Date('2026-12-01T10:00:00Z');
    const until = new Date(now.getTime() + 120_000);
    const fault = loseTheAnswerOfNext('UpdateItemCommand');

    expect(await dueIndex.claimDueShard(shard, 'tick-a', now, until)).toBe(true);
    expect(fault.lost()).toBe(1);
    uninstall?.();
    // Still one holder at a time: another tick is refused while tick-a holds it…
    expect(await dueIndex.claimDueShard(shard, 'tick-b', new Date(now.getTime() + 1_000), until)).toBe(false);
    // …and takes it the moment tick-a releases it.
    await dueIndex.releaseDueShard(shard, 'tick-a');
    expect(await dueIndex.claimDueShard(shard, 'tick-b', new Date(now.getTime() + 2_000), until)).toBe(true);
  });

  it.each([
    ['LedgerTable', () => table],
    ['HotPathTable (the intake\'s: its puts on a low-level client of their own)', () => new HotPathTable(documents, { tableName, retentionSeconds: 86_400 }, hotPath)],
  ])('writes a message\'s anchor on %s: that delivery goes on to submit, not refused as in progress by its own claim', async (_name, store) => {
    const sent = { dispatchId: uniqueName('d'), origin: 'planner', target: 'demo-agent', task: { behavior: 'complete' } };
    const fault = loseTheAnswerOfNext('PutItemCommand');

    const taken = await takeDispatchMessage(intakeDepsFactory({ store: store(), blobs, targetFor: (registration) => httpTarget(registration), principals: table, now: () => clock }), { messageId: uniqueName('m'), body: JSON.stringify(sent), senderId: 'local' });

    expect(fault.lost()).toBe(1);
    expect(taken.outcome).toBe('submitted');
    expect(agent.stats().runs[sent.dispatchId]).toBe(1);
  });

  it('still hands back a concurrent delivery of the same message in the same millisecond: only a lost answer is the writer\'s own (was: both went on, by timestamps)', async () => {
    const sent = { dispatchId: uniqueName('d'), origin: 'planner', target: 'demo-agent', task: { behavior: 'complete' } };
    const record = { messageId: uniqueName('m'), body: JSON.stringify(sent), senderId: 'local' };
    // The first to record its state waits until the other delivery has answered: the other finds no state
    // to call it a duplicate by, so handing it back is its only right answer. (Were both to take the anchor
    // for their own, both would wait here: then both go on, and the second answers duplicate.)
    const signal = () => {
      let resolve = () => {};
      const promise = new Promise<void>((done) => (resolve = done));
      return { promise, resolve: () => resolve() };
    };
    const answered = [signal(), signal()] as const;
    const bothWaiting = signal();
    let waiting = 0;
    const holdingUntilTheOtherAnswers = (self: 0 | 1) =>
      overriding<LedgerTable>(table, {
        commit: async (from, next, ended) => {
          if ((waiting += 1) === 2) bothWaiting.resolve();
          await Promise.race([answered[self === 0 ? 1 : 0].promise, bothWaiting.promise]);
          return table.commit(from, next, ended);
        },
      });
    // One clock for both, as two environments reading it in the same millisecond.
    const both = await Promise.allSettled(
      ([0, 1] as const).map((self) =>
        takeDispatchMessage(intakeDepsFactory({ store: holdingUntilTheOtherAnswers(self), blobs, targetFor: (registration) => httpTarget(registration), principals: table, now: () => clock }), record).finally(() => answered[self].resolve()),
      ),
    );
    expect(both.flatMap((result) => (result.status === 'fulfilled' ? [result.value.outcome] : []))).toEqual(['submitted']);
    expect(both.flatMap((result) => (result.status === 'rejected' ? [result.reason] : []))[0]).toBeInstanceOf(DispatchInProgressError);
  });

  it('renews a lapsed claim on a message: that delivery goes on, not refused as in progress by its own renewal', async () => {
    const message = { dispatchId: uniqueName('d'), origin: 'planner', contentHash: 'h', messageId: 'm-renew', senderId: null, receivedAt: clock.toISOString(), claimUntil: clock.toISOString(), content: { valid: false as const, target: null, errors: [], bodyPreview: '{', bodyRef: null, bodyBytes: 1 } };
    expect((await table.putAcceptedMessage(message)).kind).toBe('written');
    const renewed = new Date(clock.getTime() + 30_000).toISOString();
    const fault = loseTheAnswerOfNext('UpdateItemCommand');

    expect(await table.renewClaim(message.dispatchId, message.claimUntil, renewed, 'delivery-a')).toBe(true);
    expect(fault.lost()).toBe(1);
    uninstall?.();
    // Another delivery's renewal from the claim it read is still refused, even to the same time.
    expect(await table.renewClaim(message.dispatchId, message.claimUntil, renewed, 'delivery-b')).toBe(false);
  });
});

describe('a state write retried after its answer was lost is its own writer\'s (the versioned put of every transition)', () => {
  const stores = [
    ['LedgerTable', () => table],
    ['HotPathTable', () => new HotPathTable(documents, { tableName, retentionSeconds: 86_400 }, hotPath)],
  ] as const;

  it.each(stores)('commits a create and a change on %s, and a writer from the version before still conflicts', async (_name, store) => {
    const sent = { dispatchId: uniqueName('d'), origin: 'planner', target: 'demo-agent', task: { behavior: 'complete' } };
    const start = accepted(newDispatchFactory({ dispatchId: sent.dispatchId, origin: sent.origin, target: sent.target }), clock);
    const created = waiting(start, 'not_before', clock);
    let fault = loseTheAnswerOfNext('PutItemCommand');
    expect(await store().commit(notStored(start), created)).toEqual({ kind: 'committed' });
    expect(fault.lost()).toBe(1);
    uninstall?.();
    const v1 = storedAt(created, 1);

    const changed = cancelledBeforeSubmission(v1.state, { reason: 'not needed', by: 'origin' }, new Date(clock.getTime() + 1_000));
    fault = loseTheAnswerOfNext('PutItemCommand');
    expect(await store().commit(v1, changed)).toEqual({ kind: 'committed' });
    expect(fault.lost()).toBe(1);
    uninstall?.();
    expect((await table.getState(sent.dispatchId))?.phase).toBe('cancelled');
    // Exact, not lenient: another writer that read the version before still loses.
    expect((await store().commit(v1, { ...changed, cancel: { ...changed.cancel, reason: 'another' } as DispatchState['cancel'] })).kind).toBe('conflict');
  });

  it('never puts a version back over a newer one written by an earlier release that kept the id it read (review finding)', async () => {
    const sent = { dispatchId: uniqueName('d'), origin: 'planner', target: 'demo-agent', task: { behavior: 'complete' } };
    const start = accepted(newDispatchFactory({ dispatchId: sent.dispatchId, origin: sent.origin, target: sent.target }), clock);
    const created = waiting(start, 'not_before', clock);
    expect((await table.commit(notStored(start), created)).kind).toBe('committed');
    const v1 = storedAt(created, 1);
    // A write applied, its answer still on the way back…
    const ours = cancelledBeforeSubmission(v1.state, { reason: 'not needed', by: 'origin' }, new Date(clock.getTime() + 1_000));
    const oursVersion = v1.version + 1;
    const request = statePut(tableName, v1, ours, 86_400);
    expect(request.Item.version).toBe(oursVersion);
    await documents.send(new PutCommand(request));
    // …when a function of the release before (whose codec kept unknown attributes) writes the next version
    // with the id it read.
    const stored = (await documents.send(new GetCommand({ TableName: tableName, Key: STATE_ITEM.key(sent.dispatchId), ConsistentRead: true }))).Item;
    expect(stored?.w).toBe(request.Item.w);
    await documents.send(new PutCommand({ TableName: tableName, Item: { ...stored, version: oursVersion + 1 }, ConditionExpression: 'version = :v', ExpressionAttributeValues: { ':v': oursVersion } }));
    // The retry of the first write must not put its version back.
    await expect(documents.send(new PutCommand(request))).rejects.toBeInstanceOf(ConditionalCheckFailedException);
    expect((await table.getStored(sent.dispatchId))?.version).toBe(oursVersion + 1);
  });

  it('answers an origin\'s cancel before submission "cancelled", not "already over" (409) by its own write', async () => {
    const sent = { dispatchId: uniqueName('d'), origin: 'planner', target: 'demo-agent', task: { behavior: 'complete' } };
    const start = accepted(newDispatchFactory({ dispatchId: sent.dispatchId, origin: sent.origin, target: sent.target }), clock);
    const created = waiting(start, 'not_before', clock);
    expect((await table.commit(notStored(start), created)).kind).toBe('committed');
    const fault = loseTheAnswerOfNext('PutItemCommand');

    const outcome = await cancelDispatch(intakeDepsFactory({ store: table, blobs, targetFor: (registration) => httpTarget(registration), principals: table, now: () => clock }), storedAt(created, 1), { reason: 'not needed', by: 'origin' });

    expect(fault.lost()).toBe(1);
    expect(outcome.kind).toBe('cancelled');
  });

  it.each(stores)('takes a message on %s whose state write (the second put: anchor, submission, state) lost its answer: submitted, not a duplicate', async (_name, store) => {
    const sent = { dispatchId: uniqueName('d'), origin: 'planner', target: 'demo-agent', task: { behavior: 'complete' } };
    const fault = loseTheAnswerOfNext('PutItemCommand', 2);

    const taken = await takeDispatchMessage(intakeDepsFactory({ store: store(), blobs, targetFor: (registration) => httpTarget(registration), principals: table, now: () => clock }), { messageId: uniqueName('m'), body: JSON.stringify(sent), senderId: 'local' });

    expect(fault.lost()).toBe(1);
    expect(taken.outcome).toBe('submitted');
    expect(agent.stats().runs[sent.dispatchId]).toBe(1);
    expect((await table.getState(sent.dispatchId))?.phase).toBe('submitted');
  });

  it('redispatches by force in a transaction (the state and the ended attempt\'s record) whose answer was lost: accepted once, one past attempt', async () => {
    const sent = { dispatchId: uniqueName('d'), origin: 'planner', target: 'demo-agent', task: { behavior: 'complete' } };
    const intake = intakeDepsFactory({ store: table, blobs, targetFor: (registration) => httpTarget(registration), principals: table, now: () => clock });
    expect((await takeDispatchMessage(intake, { messageId: uniqueName('m'), body: JSON.stringify(sent), senderId: 'local' })).outcome).toBe('submitted');
    const fault = loseTheAnswerOfNext('TransactWriteItemsCommand');

    const outcome = await redispatch(intake, (await table.getStored(sent.dispatchId)) as StoredState, { reason: 'run it again', force: true });

    expect(fault.lost()).toBe(1);
    expect(outcome.kind).not.toBe('conflict');
    const after = (await table.getState(sent.dispatchId)) as DispatchState;
    expect(after.attempt).toBe(2);
    expect(await table.listPastAttempts(sent.dispatchId)).toHaveLength(1);
  });
});
