import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureEventBusWithLog } from '../../local/resources.js';
import { EventLogTail } from '../../local/runtime/event-log.js';
import { engineClients, uniqueName } from '../support/engines.js';
import { eventually } from '../support/eventually.js';

const clients = engineClients();
afterAll(() => clients.destroy());

async function drainUntil(tail: EventLogTail, count: number): Promise<void> {
  let seen = 0;
  // drainOnce long-polls (1 s) itself: no pause between tries.
  await eventually(`${count} events in the log`, async () => (seen += await tail.drainOnce(1)), { intervalMs: 0, until: (n) => n >= count });
  expect(seen).toBe(count);
}

describe('the local bus and its event log (moto EventBridge)', () => {
  it('writes an event put on the bus to the event log file, as EventBridge delivers it, one per line', async () => {
    const bus = uniqueName('bus');
    const { logQueue } = await ensureEventBusWithLog(clients.eventBridge, clients.motoSqs, {
      bus,
      rule: `${bus}-all`,
      queue: `${bus}-log`,
    });
    const file = join(mkdtempSync(join(tmpdir(), 'event-log-')), 'events.jsonl');
    const tail = new EventLogTail({ sqs: clients.motoSqs, queueUrl: logQueue.url, file });

    const put = await clients.eventBridge.send(
      new PutEventsCommand({
        Entries: [
          { EventBusName: bus, Source: 'dispatch-ledger', DetailType: 'Dispatch Accepted', Detail: JSON.stringify({ eventId: 'e-1', dispatchId: 'd-1' }) },
          { EventBusName: bus, Source: 'another.source', DetailType: 'Anything', Detail: JSON.stringify({ n: 2 }) },
        ],
      }),
    );
    expect(put.FailedEntryCount).toBe(0);
    await drainUntil(tail, 2);

    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    const events = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    const accepted = events.find((event) => event['detail-type'] === 'Dispatch Accepted');
    // The EventBridge envelope, with the id EventBridge assigned at PutEvents.
    expect(accepted).toMatchObject({
      version: '0',
      source: 'dispatch-ledger',
      region: 'us-east-1',
      detail: { eventId: 'e-1', dispatchId: 'd-1' },
    });
    expect(put.Entries?.map((entry) => entry.EventId)).toContain(accepted?.id);
    expect(typeof accepted?.time).toBe('string');
    // The catch-all rule matches every source.
    expect(events.map((event) => event.source).sort()).toEqual(['another.source', 'dispatch-ledger']);
  });
});
