import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventBridgeClient, type PutEventsCommandInput } from '@aws-sdk/client-eventbridge';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { localHandlerEnvironment } from '../../local/clients.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../../local/engines/index.js';
import { ensureEventBusWithLog, ensureLedgerTable, type QueueRef } from '../../local/resources.js';
import { EventLogTail } from '../../local/runtime/event-log.js';
import { StreamEventSource } from '../../local/runtime/stream-event-source.js';
import { EventPublishError, EventTooLargeError, publish } from '../../shared/adapters/event-bus.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import { NO_EXECUTION, stateOnly, type NextState } from '../../shared/dispatch/state.js';
import { notStored, type StoredState } from '../../shared/ledger/port.js';
import { accepted, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { blocked } from '../../shared/dispatch/transitions/core.js';
import { advance } from '../support/states.js';
import { parseDetail, type DetailType, type LedgerEvent } from '../../shared/events/catalog.js';
import { eventForRejection } from '../../shared/events/derive.js';
import { engineClients, loopbackOnly, uniqueName, testEngines } from '../support/engines.js';
import { eventually } from '../support/eventually.js';
import { newDispatchFactory, NOW } from '../support/factories.js';

type Handler = (event: DynamoDBStreamEvent) => Promise<DynamoDBBatchResponse>;

/** An event as EventBridge delivered it to the catch-all rule's queue. */
interface Delivered {
  readonly id: string;
  readonly source: string;
  readonly 'detail-type': DetailType;
  readonly detail: LedgerEvent['detail'] & { readonly dispatchId?: string };
}

const clients = engineClients();
const savedEnv = { ...process.env };
const later = (seconds: number): Date => new Date(NOW.getTime() + seconds * 1000);

let busName: string;
let logQueue: QueueRef;
let ledger: { name: string; streamArn: string };
let table: LedgerTable;
let handler: Handler;

beforeAll(async () => {
  const name = uniqueName('publisher');
  ({ busName, logQueue } = await ensureEventBusWithLog(clients.eventBridge, clients.motoSqs, { bus: name, rule: `${name}-all`, queue: `${name}-log` }));
  ledger = await ensureLedgerTable(clients.dynamodb, name);
  table = new LedgerTable(DynamoDBDocumentClient.from(clients.dynamodb, { marshallOptions: { removeUndefinedValues: true } }), {
    tableName: ledger.name,
    retentionSeconds: 86_400,
  });
  // The handler's environment, as the stack sets it; metrics go to console.log so the test can read them.
  Object.assign(process.env, localHandlerEnvironment(testEngines()), {
    EVENT_BUS_NAME: busName,
    // The counters of GET /counts, in the test's table.
    LEDGER_TABLE_NAME: ledger.name,
    POWERTOOLS_DEV: 'true',
    POWERTOOLS_METRICS_DISABLED: 'false',
    POWERTOOLS_LOG_LEVEL: 'WARN',
  });
  ({ handler } = await import('../../functions/publisher/handler.js'));
});

afterAll(() => {
  process.env = { ...savedEnv };
  clients.destroy();
});

function logTail(): { tail: EventLogTail; read: () => Delivered[] } {
  const file = join(mkdtempSync(join(tmpdir(), 'publisher-')), 'events.jsonl');
  const tail = new EventLogTail({ sqs: clients.motoSqs, queueUrl: logQueue.url, file });
  const read = (): Delivered[] => {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      return [];
    }
    return text.trimEnd().split('\n').filter(Boolean).map((line) => JSON.parse(line) as Delivered);
  };
  return { tail, read };
}

/** Drains the log queue until `count` more events arrived, then checks that no more come. */
async function drain(tail: EventLogTail, count: number): Promise<void> {
  let seen = 0;
  // drainOnce long-polls (1 s) itself: no pause between tries.
  await eventually(`${count} events in the log`, async () => (seen += await tail.drainOnce(1)), { intervalMs: 0, until: (n) => n >= count });
  seen += await tail.drainOnce(1);
  expect(seen).toBe(count);
}

/** A bus client of the test's own, on the local engine, refusing any other host. */
function busClient(): EventBridgeClient {
  return loopbackOnly(new EventBridgeClient({ region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS, endpoint: testEngines().motoEndpoint, maxAttempts: 1 }));
}

/** Blanks the Detail of the entries `spoil` picks, before they are sent: moto reports them in FailedEntries. */
function spoilEntries(client: EventBridgeClient, spoil: (call: number, eventId: string) => boolean): { calls: PutEventsCommandInput[] } {
  const calls: PutEventsCommandInput[] = [];
  client.middlewareStack.add(
    (next) => async (args) => {
      const input = args.input as PutEventsCommandInput;
      const call = calls.length + 1;
      calls.push(input);
      const entries = (input.Entries ?? []).map((entry) => {
        const eventId = (JSON.parse(entry.Detail ?? '{}') as { eventId?: string }).eventId ?? '';
        return spoil(call, eventId) ? { ...entry, Detail: '' } : entry;
      });
      return next({ ...args, input: { ...input, Entries: entries } });
    },
    { step: 'initialize', name: 'spoilEntries' },
  );
  return { calls };
}

const rejected = (messageId: string): LedgerEvent =>
  eventForRejection({ messageId, at: NOW.toISOString(), reason: 'not_json', dispatchId: null, origin: null, senderId: null, bodyPreview: '{', bodyRef: null, bodyBytes: 1 });

describe('the event publisher on the ledger table stream (DynamoDB Local streams → moto EventBridge)', () => {
  /** What the table commits, version by version, and the detail-types each dispatch publishes. */
  async function writeLives(): Promise<{ expected: Record<string, DetailType[]>; records: number }> {
    const ok = { kind: 'accepted', status: 'running', requestId: 'req-1' } as const;
    /** Commits `next` over what `previous` left stored (a create when undefined); answers what it leaves stored, the next write's start. */
    const write = async (previous: StoredState | undefined, next: NextState): Promise<StoredState> => {
      const from = previous ?? notStored(stateOnly(next));
      const outcome = await table.commit(from, next);
      expect(outcome.kind).toBe('committed');
      return { state: stateOnly(next), version: from.version + 1 };
    };

    const watched = uniqueName('d');
    const w1 = await write(undefined, submitted(accepted(newDispatchFactory({ dispatchId: watched }), NOW), { ...ok, runId: 'r-1' }, DEFAULT_RETRY_POLICY, NOW));
    const w2 = await write(w1, advance(w1.state, 'activity', later(10), { execution: { ...w1.state.execution, lastActivityAt: later(10).toISOString() } }));
    const w3 = await write(w2, advance(w2.state, 'stalled', later(700), { execution: { ...w2.state.execution, status: 'unknown', monitorStatus: 'stalled' } }));
    await write(w3, advance(w3.state, 'completed', later(800), { execution: { ...w3.state.execution, status: 'completed', nativeStatus: 'completed', monitorStatus: null, completedAt: later(800).toISOString() } }));

    const refused = uniqueName('d');
    await write(undefined, blocked(accepted(newDispatchFactory({ dispatchId: refused }), NOW), 'unknown_target', 'no target "nope"', NOW));

    const redone = uniqueName('d');
    const r1 = await write(undefined, submitted(accepted(newDispatchFactory({ dispatchId: redone }), NOW), { ...ok, runId: 'r-1' }, DEFAULT_RETRY_POLICY, NOW));
    const r2 = await write(r1, advance(r1.state, 'superseded', later(60), { phase: 'accepted', attempt: 2, runId: null, execution: NO_EXECUTION, submission: { attempts: 0, nextRetryAt: null, lastError: null } }));
    await write(r2, submitted(r2.state, { ...ok, runId: 'r-2' }, DEFAULT_RETRY_POLICY, later(61)));

    const messageId = uniqueName('m');
    await table.putRejection({ messageId, at: NOW.toISOString(), reason: 'conflict', dispatchId: redone, origin: 'planner', senderId: null, bodyPreview: '{}', bodyRef: null, bodyBytes: 2 });

    return {
      expected: {
        // Created already submitted: one Dispatch Submitted stands for the acceptance (CONTRACT §3 v2).
        [watched]: ['Dispatch Submitted', 'Run Stalled', 'Run Completed'],
        // A blocked callback dispatch's origin hears back: its result is made in the same write.
        [refused]: ['Dispatch Accepted', 'Dispatch Blocked', 'Result Ready'],
        [redone]: ['Dispatch Submitted', 'Run Superseded', 'Dispatch Submitted', 'Message Rejected'],
      },
      records: 9,
    };
  }

  it('publishes each committed change once per delivery, and a redelivered batch yields duplicates but no second eventId', async () => {
    const { expected, records } = await writeLives();
    const batches: DynamoDBStreamEvent[] = [];
    const responses: DynamoDBBatchResponse[] = [];
    const source = new StreamEventSource({
      functionName: 'publisher',
      handler: async (event) => {
        batches.push(event);
        const response = await handler(event);
        responses.push(response);
        return response;
      },
      streams: clients.streams,
      streamArn: ledger.streamArn,
      region: LOCAL_REGION,
    });
    // Powertools' dev mode writes EMF to console.log: read it instead of printing it.
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    const { tail, read } = logTail();

    let handled = 0;
    for (let poll = 0; poll < 20 && handled < records; poll += 1) handled += await source.pollOnce();
    const emitted = log.mock.calls.map(([line]) => String(line)).filter((line) => line.includes('"_aws"'));
    const published = Object.values(expected).flat().length;
    await drain(tail, published);

    expect(handled).toBe(records);
    expect(responses.every((response) => response.batchItemFailures.length === 0)).toBe(true);
    const first = read();
    expect(first.every((event) => event.source === 'dispatch-ledger')).toBe(true);
    for (const [dispatchId, detailTypes] of Object.entries(expected)) {
      const mine = first.filter((event) => event.detail.dispatchId === dispatchId);
      expect(mine.map((event) => event['detail-type']).sort()).toEqual([...detailTypes].sort());
    }
    for (const event of first) {
      expect(parseDetail({ detailType: event['detail-type'], detail: event.detail } as LedgerEvent).error).toBeUndefined();
    }
    const stall = first.find((event) => event['detail-type'] === 'Run Stalled');
    expect(stall?.detail).toMatchObject({ status: 'unknown', monitorStatus: 'stalled', runId: 'r-1', at: later(700).toISOString(), lastActivityAt: later(10).toISOString() });
    const superseded = first.find((event) => event['detail-type'] === 'Run Superseded');
    expect(superseded?.detail).toMatchObject({ runId: 'r-1', attempt: 1, at: later(60).toISOString() });
    // One metric, StalledRuns, with the contract's single dimension.
    expect(emitted.map((line) => JSON.parse(line) as Record<string, unknown>)).toEqual([
      {
        _aws: { Timestamp: expect.any(Number), CloudWatchMetrics: [{ Namespace: 'DispatchLedger', Dimensions: [['Target']], Metrics: [{ Name: 'StalledRuns', Unit: 'Count' }] }] },
        Target: 'demo-agent',
        StalledRuns: 1,
      },
    ]);

    // The same stream batches again, as Lambda delivers them after a lost checkpoint.
    for (const batch of batches) expect((await handler(batch)).batchItemFailures).toEqual([]);
    log.mockRestore();
    await drain(tail, published);

    const all = read();
    expect(all).toHaveLength(2 * published);
    expect(new Set(all.map((event) => event.id)).size).toBe(2 * published);
    expect(new Set(all.map((event) => event.detail.eventId)).size).toBe(published);
    for (const event of first) {
      const copies = all.filter((other) => other.detail.eventId === event.detail.eventId);
      expect(copies.map((copy) => copy.detail)).toEqual([event.detail, event.detail]);
    }
  });

  it('reports every record for retry when the bus refuses the events', async () => {
    // A table of its own, so its stream holds only this test's records.
    const own = await ensureLedgerTable(clients.dynamodb, uniqueName('publisher'));
    const ownTable = new LedgerTable(DynamoDBDocumentClient.from(clients.dynamodb), { tableName: own.name, retentionSeconds: 86_400 });
    const first = submitted(accepted(newDispatchFactory(), NOW), { kind: 'accepted', runId: 'r-1', status: 'running', requestId: 'q' }, DEFAULT_RETRY_POLICY, NOW);
    await ownTable.commit(notStored(stateOnly(first)), first);
    await ownTable.commit({ state: stateOnly(first), version: 1 }, advance(stateOnly(first), 'activity', later(5), {}));
    const batches: DynamoDBStreamEvent[] = [];
    const source = new StreamEventSource({
      functionName: 'publisher',
      handler: async (event) => {
        batches.push(event);
      },
      streams: clients.streams,
      streamArn: own.streamArn,
      region: LOCAL_REGION,
    });
    for (let poll = 0; poll < 10 && batches.flatMap((batch) => batch.Records).length < 2; poll += 1) await source.pollOnce();
    const event: DynamoDBStreamEvent = { Records: batches.flatMap((batch) => batch.Records) };
    expect(event.Records).toHaveLength(2);

    vi.resetModules();
    process.env.EVENT_BUS_NAME = uniqueName('no-such-bus');
    process.env.POWERTOOLS_LOG_LEVEL = 'SILENT';
    try {
      const { handler: refused } = (await import('../../functions/publisher/handler.js')) as { handler: Handler };

      const response = await refused(event);

      expect(response.batchItemFailures.map((failure) => failure.itemIdentifier)).toEqual(event.Records.map((record) => record.dynamodb?.SequenceNumber));
    } finally {
      process.env.EVENT_BUS_NAME = busName;
      process.env.POWERTOOLS_LOG_LEVEL = 'WARN';
    }
  });
});

describe('publish (event-bus adapter, moto EventBridge)', () => {
  it('puts more than ten events in calls of at most ten', async () => {
    const client = busClient();
    const { calls } = spoilEntries(client, () => false);
    const { tail, read } = logTail();
    const events = Array.from({ length: 23 }, (_, n) => rejected(uniqueName(`m${n}`)));

    await publish(events, { client, busName });
    await drain(tail, 23);

    expect(calls.map((call) => call.Entries?.length)).toEqual([10, 10, 3]);
    expect(new Set(read().map((event) => event.detail.eventId))).toEqual(new Set(events.map((event) => event.detail.eventId)));
    client.destroy();
  });

  it('sends again only the entries EventBridge reported as failed', async () => {
    const client = busClient();
    const events = [rejected(uniqueName('m')), rejected(uniqueName('m'))];
    const flaky = events[0]?.detail.eventId;
    const { calls } = spoilEntries(client, (call, eventId) => call === 1 && eventId === flaky);
    const { tail, read } = logTail();

    await publish(events, { client, busName, backoffMs: 1 });
    await drain(tail, 2);

    expect(calls.map((call) => call.Entries?.length)).toEqual([2, 1]);
    expect(read().map((event) => event.detail.eventId).sort()).toEqual(events.map((event) => event.detail.eventId).sort());
    client.destroy();
  });

  it('throws an EventPublishError naming the first unpublished event when entries keep failing', async () => {
    const client = busClient();
    const events = [rejected(uniqueName('m')), rejected(uniqueName('m')), rejected(uniqueName('m'))];
    const poisoned = events[1]?.detail.eventId;
    const { calls } = spoilEntries(client, (_call, eventId) => eventId === poisoned);
    const { tail } = logTail();

    const error = await publish(events, { client, busName, maxAttempts: 3, backoffMs: 1 }).catch((thrown: unknown) => thrown);
    await drain(tail, 2);

    expect(error).toBeInstanceOf(EventPublishError);
    expect(error).toMatchObject({ firstUnpublishedIndex: 1, failedEntries: [{ index: 1, eventId: poisoned, errorCode: 'InvalidArgument' }] });
    expect(calls).toHaveLength(3);
    client.destroy();
  });

  it('puts the events before an oversized one, then throws an EventTooLargeError for it', async () => {
    const client = busClient();
    const small = rejected(uniqueName('m'));
    const base = blocked(accepted(newDispatchFactory({ dispatchId: uniqueName('d') }), NOW), 'invalid_fields', 'x', NOW);
    const huge: LedgerEvent = {
      detailType: 'Dispatch Blocked',
      detail: { eventId: 'f'.repeat(32), at: NOW.toISOString(), dispatchId: base.dispatchId, origin: base.origin, target: base.target, attempt: 1, reason: 'x'.repeat(300_000) },
    };
    const { tail, read } = logTail();

    const error = await publish([small, huge], { client, busName }).catch((thrown: unknown) => thrown);
    await drain(tail, 1);

    expect(error).toBeInstanceOf(EventTooLargeError);
    expect(error).toMatchObject({ index: 1, firstUnpublishedIndex: 1, detailType: 'Dispatch Blocked' });
    expect(read().map((event) => event.detail.eventId)).toEqual([small.detail.eventId]);
    client.destroy();
  });
});
