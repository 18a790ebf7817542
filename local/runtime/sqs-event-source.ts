import {
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  type Message,
  type MessageAttributeValue,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent, SQSMessageAttributes, SQSRecord } from 'aws-lambda';
import { describeError, lambdaContext, withinTimeout, type InvocationListener } from './context.js';
import { PollLoop } from './poll-loop.js';

export type SqsHandler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse | void | undefined>;

export interface SqsEventSourceOptions {
  readonly functionName: string;
  readonly handler: SqsHandler;
  readonly sqs: SQSClient;
  readonly queueUrl: string;
  readonly queueArn: string;
  readonly region: string;
  /** 1..10 (one ReceiveMessage call). Default 10. */
  readonly batchSize?: number;
  /** FunctionResponseTypes: ["ReportBatchItemFailures"]. Default true. */
  readonly reportBatchItemFailures?: boolean;
  /** Long-poll wait per receive, seconds. Default 1 (keeps shutdown quick). */
  readonly waitTimeSeconds?: number;
  readonly timeoutMs?: number;
  readonly onInvocation?: InvocationListener;
  readonly onError?: (error: unknown) => void;
}

/**
 * The local Lambda event source mapping for one SQS queue, with Lambda's semantics:
 * - a batch is delivered as a real `SQSEvent`;
 * - the handler returns normally → every record is deleted, except those it lists in
 *   `batchItemFailures` (when ReportBatchItemFailures is on), which stay and come back after the
 *   visibility timeout;
 * - the handler throws, or returns a malformed response (an item identifier that is missing or not in
 *   the batch) → nothing is deleted: the whole batch comes back;
 * - what happens after `maxReceiveCount` receives is the queue's own redrive policy (the DLQ).
 */
export class SqsEventSource {
  private readonly loop: PollLoop;

  constructor(private readonly options: SqsEventSourceOptions) {
    this.loop = new PollLoop((signal) => this.pollOnce(signal), { onError: options.onError });
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Receives once and invokes the handler if anything came; returns how many records were delivered. */
  async pollOnce(signal: AbortSignal = this.loop.signal): Promise<number> {
    const { sqs, queueUrl } = this.options;
    const received = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: Math.min(10, Math.max(1, this.options.batchSize ?? 10)),
        WaitTimeSeconds: this.options.waitTimeSeconds ?? 1,
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
      { abortSignal: signal },
    );
    const messages = received.Messages ?? [];
    if (messages.length === 0) return 0;
    await this.invoke(messages);
    return messages.length;
  }

  private async invoke(messages: Message[]): Promise<void> {
    const { functionName, handler, region, sqs, queueUrl } = this.options;
    const records = messages.map((message) => toSqsRecord(message, this.options.queueArn, region));
    const context = lambdaContext(functionName, this.options.timeoutMs ?? 30_000, region);
    const started = Date.now();
    const ids = records.map((record) => record.messageId);
    let failed: Set<string>;
    let error: string | undefined;
    try {
      const response = await withinTimeout(handler({ Records: records }, context), this.options.timeoutMs ?? 30_000);
      failed = this.failedItems(response, ids);
    } catch (thrown) {
      failed = new Set(ids);
      error = describeError(thrown);
    }
    const done = messages.filter((message) => !failed.has(message.MessageId ?? ''));
    if (done.length > 0) {
      const result = await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: done.map((message, index) => ({ Id: String(index), ReceiptHandle: message.ReceiptHandle })),
        }),
      );
      if (result.Failed && result.Failed.length > 0) {
        this.options.onError?.(new Error(`could not delete ${result.Failed.length} processed message(s)`));
      }
    }
    this.options.onInvocation?.({
      at: new Date(started).toISOString(),
      function: functionName,
      requestId: context.awsRequestId,
      trigger: 'sqs',
      durationMs: Date.now() - started,
      outcome: error ? 'error' : failed.size > 0 ? 'partial' : 'ok',
      items: ids,
      failedItems: [...failed],
      ...(error ? { error } : {}),
    });
  }

  /**
   * Which records the handler's answer sends back. Lambda treats an unreadable answer as a failure
   * of the whole batch, so does this.
   */
  private failedItems(response: SQSBatchResponse | void | undefined, ids: readonly string[]): Set<string> {
    if (!(this.options.reportBatchItemFailures ?? true) || response === undefined || response === null) {
      return new Set();
    }
    const failures = response.batchItemFailures;
    if (failures === undefined || failures === null) return new Set();
    if (!Array.isArray(failures)) return new Set(ids);
    const known = new Set(ids);
    const failed = new Set<string>();
    for (const failure of failures) {
      const id = failure?.itemIdentifier;
      if (typeof id !== 'string' || !known.has(id)) return new Set(ids);
      failed.add(id);
    }
    return failed;
  }
}

function toSqsRecord(message: Message, queueArn: string, region: string): SQSRecord {
  const attributes = message.Attributes ?? {};
  return {
    messageId: message.MessageId ?? '',
    receiptHandle: message.ReceiptHandle ?? '',
    body: message.Body ?? '',
    attributes: {
      ApproximateReceiveCount: attributes.ApproximateReceiveCount ?? '1',
      SentTimestamp: attributes.SentTimestamp ?? String(Date.now()),
      SenderId: attributes.SenderId ?? 'local',
      ApproximateFirstReceiveTimestamp: attributes.ApproximateFirstReceiveTimestamp ?? String(Date.now()),
      ...(attributes.AWSTraceHeader ? { AWSTraceHeader: attributes.AWSTraceHeader } : {}),
      ...(attributes.MessageGroupId ? { MessageGroupId: attributes.MessageGroupId } : {}),
      ...(attributes.MessageDeduplicationId ? { MessageDeduplicationId: attributes.MessageDeduplicationId } : {}),
      ...(attributes.SequenceNumber ? { SequenceNumber: attributes.SequenceNumber } : {}),
    },
    messageAttributes: toLambdaAttributes(message.MessageAttributes),
    md5OfBody: message.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: queueArn,
    awsRegion: region,
  };
}

function toLambdaAttributes(attributes: Record<string, MessageAttributeValue> | undefined): SQSMessageAttributes {
  const out: SQSMessageAttributes = {};
  for (const [name, value] of Object.entries(attributes ?? {})) {
    out[name] = {
      dataType: value.DataType ?? 'String',
      ...(value.StringValue !== undefined ? { stringValue: value.StringValue } : {}),
      ...(value.BinaryValue !== undefined ? { binaryValue: Buffer.from(value.BinaryValue).toString('base64') } : {}),
      stringListValues: value.StringListValues ?? [],
      binaryListValues: (value.BinaryListValues ?? []).map((item) => Buffer.from(item).toString('base64')),
    };
  }
  return out;
}
