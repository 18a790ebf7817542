import { appendFile } from 'node:fs/promises';
import { DeleteMessageBatchCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';

/**
 * Appends every event the local bus delivers to its catch-all rule's queue (in moto) to a JSONL file,
 * one event per line, exactly as EventBridge delivered it. Messages are deleted only after the append.
 */
export class EventLogTail {
  private running = false;
  private loop: Promise<void> | undefined;
  private readonly abort = new AbortController();

  constructor(
    private readonly options: {
      readonly sqs: SQSClient;
      readonly queueUrl: string;
      readonly file: string;
      readonly onError?: (error: unknown) => void;
    },
  ) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.abort.abort();
    await this.loop;
  }

  /** Moves what is waiting into the file; returns how many events were appended. */
  async drainOnce(waitTimeSeconds = 1): Promise<number> {
    const { sqs, queueUrl, file } = this.options;
    const received = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: waitTimeSeconds }),
      { abortSignal: this.abort.signal },
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

  private async run(): Promise<void> {
    while (this.running) {
      try {
        await this.drainOnce();
      } catch (error) {
        if (!this.running) break;
        this.options.onError?.(error);
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
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
