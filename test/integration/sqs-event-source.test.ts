import { GetQueueAttributesCommand, ReceiveMessageCommand, SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureQueueWithDlq } from '../../local/resources.js';
import type { InvocationReport } from '../../local/runtime/context.js';
import { SqsEventSource, type SqsHandler } from '../../local/runtime/sqs-event-source.js';
import { engineClients, uniqueName } from '../support/engines.js';
import { eventually } from '../support/eventually.js';

const clients = engineClients();
afterAll(() => clients.destroy());

/** A queue whose messages come back 1 s after a failed receive and go to the DLQ on the 3rd. */
async function queueWithDlq() {
  const name = uniqueName('esm');
  return ensureQueueWithDlq(clients.sqs, name, { dlqName: `${name}-dlq`, maxReceiveCount: 3, visibilityTimeoutSeconds: 1 });
}

async function sendTen(queueUrl: string): Promise<string[]> {
  const sent = await clients.sqs.send(
    new SendMessageBatchCommand({
      QueueUrl: queueUrl,
      Entries: Array.from({ length: 10 }, (_, index) => ({ Id: String(index), MessageBody: JSON.stringify({ n: index }) })),
    }),
  );
  expect(sent.Failed ?? []).toHaveLength(0);
  return (sent.Successful ?? []).map((entry) => entry.MessageId ?? '');
}

/** An event source whose handler is scripted per invocation; every event it gets is kept. */
function recordingSource(queue: { url: string; arn: string }, respond: (event: SQSEvent, call: number) => SQSBatchResponse | void | Promise<void>, options: { readonly timeoutMs?: number } = {}) {
  const events: SQSEvent[] = [];
  const reports: InvocationReport[] = [];
  const handler: SqsHandler = async (event) => {
    events.push(event);
    return (await respond(event, events.length)) ?? undefined;
  };
  const source = new SqsEventSource({
    functionName: 'test',
    handler,
    sqs: clients.sqs,
    queueUrl: queue.url,
    queueArn: queue.arn,
    region: 'us-east-1',
    batchSize: 10,
    waitTimeSeconds: 2,
    ...options,
    onInvocation: (report) => reports.push(report),
  });
  return { source, events, reports };
}

/** Polls until a batch arrives (the visibility timeout has to run out first). */
function nextBatch(source: SqsEventSource): Promise<number> {
  // pollOnce long-polls (2 s) itself: no pause between tries.
  return eventually('a batch from the queue', () => source.pollOnce(), { intervalMs: 0, until: (received) => received > 0 });
}

const ids = (event: SQSEvent | undefined) => (event?.Records ?? []).map((record) => record.messageId).sort();

describe('SqsEventSource on fauxqs', () => {
  it('delivers a real SQSEvent batch of 10 and redelivers only the one record the handler reports as failed', async () => {
    const { queue } = await queueWithDlq();
    const sent = await sendTen(queue.url);
    const failing = sent[3] ?? '';
    const { source, events, reports } = recordingSource(queue, (_event, call) =>
      call === 1 ? { batchItemFailures: [{ itemIdentifier: failing }] } : { batchItemFailures: [] },
    );

    expect(await nextBatch(source)).toBe(10);
    const first = events[0]?.Records[0];
    expect(first?.eventSource).toBe('aws:sqs');
    expect(first?.eventSourceARN).toBe(queue.arn);
    expect(first?.attributes.ApproximateReceiveCount).toBe('1');
    expect(ids(events[0])).toEqual([...sent].sort());
    expect(reports[0]).toMatchObject({ outcome: 'partial', failedItems: [failing] });

    expect(await nextBatch(source)).toBe(1);
    expect(ids(events[1])).toEqual([failing]);
    expect(events[1]?.Records[0]?.attributes.ApproximateReceiveCount).toBe('2');

    const empty = await clients.sqs.send(new ReceiveMessageCommand({ QueueUrl: queue.url, WaitTimeSeconds: 2 }));
    expect(empty.Messages ?? []).toHaveLength(0);
  });

  it('redelivers the whole batch when the handler throws', async () => {
    const { queue } = await queueWithDlq();
    const sent = await sendTen(queue.url);
    const { source, events, reports } = recordingSource(queue, (_event, call) => {
      if (call === 1) throw new Error('handler crashed');
    });

    expect(await nextBatch(source)).toBe(10);
    expect(reports[0]).toMatchObject({ outcome: 'error', error: 'Error: handler crashed' });
    expect(await nextBatch(source)).toBe(10);
    expect(ids(events[1])).toEqual([...sent].sort());
  });

  it("ends a handler that never returns at its function's timeout, as Lambda does, and the batch comes back (regression: the source awaited it for ever, its loop and its stop with it)", async () => {
    const { queue } = await queueWithDlq();
    const sent = await sendTen(queue.url);
    // The first invocation hangs: never resolves (a call with no timeout of its own).
    const { source, events, reports } = recordingSource(queue, (_event, call) => (call === 1 ? new Promise<void>(() => undefined) : undefined), { timeoutMs: 200 });
    expect(await nextBatch(source)).toBe(10);
    expect(reports[0]).toMatchObject({ outcome: 'error', error: expect.stringMatching(/Task timed out after 0\.20 seconds/) });
    expect(await nextBatch(source)).toBe(10);
    expect(ids(events[1])).toEqual([...sent].sort());
  });

  it('redelivers the whole batch when the handler names an item that is not in it (as Lambda does)', async () => {
    const { queue } = await queueWithDlq();
    await sendTen(queue.url);
    const { source, events } = recordingSource(queue, (_event, call) =>
      call === 1 ? { batchItemFailures: [{ itemIdentifier: 'not-in-this-batch' }] } : undefined,
    );

    expect(await nextBatch(source)).toBe(10);
    expect(await nextBatch(source)).toBe(10);
    expect(ids(events[1])).toEqual(ids(events[0]));
  });

  it('lets the queue move a record that fails every time to the DLQ after maxReceiveCount', async () => {
    const { queue, dlq } = await queueWithDlq();
    const sent = await sendTen(queue.url);
    const poison = sent[7] ?? '';
    const { source, events } = recordingSource(queue, (event) => ({
      batchItemFailures: event.Records.filter((record) => record.messageId === poison).map((record) => ({ itemIdentifier: record.messageId })),
    }));

    await nextBatch(source);
    await nextBatch(source);
    await nextBatch(source);
    expect(events.map((event) => event.Records.length)).toEqual([10, 1, 1]);
    expect(events[2]?.Records[0]?.attributes.ApproximateReceiveCount).toBe('3');

    // The receive that would be the 4th exceeds maxReceiveCount: the queue itself moves the message
    // to the DLQ instead of delivering it, so the handler never sees it again.
    expect(await source.pollOnce()).toBe(0);
    expect(await source.pollOnce()).toBe(0);
    expect(events).toHaveLength(3);
    const fromDlq = await clients.sqs.send(new ReceiveMessageCommand({ QueueUrl: dlq.url, WaitTimeSeconds: 2, MaxNumberOfMessages: 10 }));
    expect((fromDlq.Messages ?? []).map((message) => message.MessageId)).toEqual([poison]);
    const attributes = await clients.sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: queue.url, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] }),
    );
    expect(attributes.Attributes?.ApproximateNumberOfMessages).toBe('0');
  });
});
