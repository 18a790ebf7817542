import { appendFile } from 'node:fs/promises';
import { PollLoop } from './poll-loop.js';
import { DeleteMessageBatchCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';

/**
 * Appends every event the local bus delivers to its catch-all rule's queue (in moto) to a JSONL file,
 * one event per line, exactly as EventBridge delivered it. Messages are deleted only after the append.
 */
export class EventLogTail {
  private readonly loops: PollLoop[];

  constructor(
    private readonly options: {
      readonly sqs: SQSClient;
      readonly queueUrl: string;
      readonly file: string;
      readonly onError?: (error: unknown) => void;
      /**
       * Receive loops at once. moto's SQS slows down with its backlog (each call scans the queue), so a
       * tail that falls behind a busy bus stays behind: several loops keep the backlog near zero. Lines
       * of different loops may interleave (a standard queue promises no order anyway). Default 1.
       */
      readonly receivers?: number;
    },
  ) {
    this.loops = Array.from({ length: Math.max(1, options.receivers ?? 1) }, () => new PollLoop((signal) => this.drainOnce(1, signal), { onError: options.onError }));
  }

  start(): void {
    for (const loop of this.loops) loop.start();
  }

  async stop(): Promise<void> {
    await Promise.all(this.loops.map((loop) => loop.stop()));
  }

  /** Moves what is waiting into the file; returns how many events were appended. */
  async drainOnce(waitTimeSeconds = 1, signal: AbortSignal = (this.loops[0] as PollLoop).signal): Promise<number> {
    const { sqs, queueUrl, file } = this.options;
    const received = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: waitTimeSeconds }),
      { abortSignal: signal },
    );
    const messages = received.Messages ?? [];
    if (messages.length === 0) return 0;
    const lines = messages.map((message) => `${oneLine(message.Body ?? '')}\n`).join('');
    await appendFile(file, lines);
    await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: messages.map((message, index) => ({ Id: String(index), ReceiptHandle: message.ReceiptHandle })),
      }),
    );
    return messages.length;
  }
}

/** EventBridge delivers JSON; it is re-serialised so each event is exactly one line. */
function oneLine(body: string): string {
  try {
    return JSON.stringify(JSON.parse(body));
  } catch {
    return JSON.stringify({ unparsableEventBody: body });
  }
}
