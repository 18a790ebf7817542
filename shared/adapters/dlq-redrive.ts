import {
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type Message,
  type MessageAttributeValue,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { REDRIVEN_FOR, resolvePrincipal, type PrincipalRegistry } from '../principals/principals.js';

export interface RedriveReport {
  /** Messages now back on the queue the DLQ feeds and gone from the DLQ. */
  readonly moved: number;
  /** Messages that could not be sent back; they stay in the DLQ (visible again after the visibility timeout). */
  readonly failed: ReadonlyArray<{ readonly messageId: string; readonly reason: string }>;
}

export interface RedriveOptions {
  readonly deadLetterQueueUrl: string;
  readonly queueUrl: string;
  /** Stop after this many messages (a bounded run for a large DLQ). @default unlimited */
  readonly limit?: number;
  /** Seconds a received message stays hidden while it is moved. @default 60 */
  readonly visibilityTimeoutSeconds?: number;
  /**
   * The principal registry, to tell whether a DLQ copy's SenderId is a registered operator (an earlier
   * redrive that dead-lettered again). @default none: no sender is taken for an operator, so every
   * message carries its DLQ copy's own SenderId
   */
  readonly principals?: PrincipalRegistry;
  /** Told of each message moved: its id in the DLQ and its copy's on the queue (whoever tracks a message through the redrive). */
  readonly onMoved?: (moved: { readonly from: string; readonly to: string }) => void;
}

/**
 * `ledger dlq redrive`: moves every message of a DLQ back to the queue it feeds (the dispatch queue's,
 * the lambda failures queue's or the orchestrator queue's), body and
 * attributes unchanged, each deleted from the DLQ only once SQS accepted its copy.
 *
 * Idempotent: a second run finds nothing to move; a crash between send and delete leaves a copy in
 * both queues, and the intake takes the second delivery as the duplicate it is (same dispatchId, same
 * content). SQS stamps the mover as the copy's `SenderId`, so the first sender travels in the
 * `LedgerRedrivenFor` attribute — honoured by the intake, failures and orchestrators functions only when
 * the mover is a registered operator.
 *
 * What it carries is never laundered (CONTRACT §8 v2): it is the DLQ copy's own `SenderId`, whatever
 * `LedgerRedrivenFor` the message already has — a sender may set that attribute itself, and a
 * redrive must not turn an origin's claim to speak for another origin into the operator's word. Only
 * when that SenderId is itself a registered operator (a message an operator redrove before, which
 * dead-lettered again) does the carried value stand: that one an operator wrote.
 */
export async function redriveDeadLetters(sqs: SQSClient, options: RedriveOptions): Promise<RedriveReport> {
  let moved = 0;
  const failed: Array<{ messageId: string; reason: string }> = [];
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  const seen = new Set<string>();
  while (moved + failed.length < limit) {
    const { Messages: messages = [] } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: options.deadLetterQueueUrl,
        MaxNumberOfMessages: Math.min(10, limit - moved - failed.length),
        WaitTimeSeconds: 1,
        VisibilityTimeout: options.visibilityTimeoutSeconds ?? 60,
        MessageAttributeNames: ['All'],
        MessageSystemAttributeNames: ['SenderId'],
      }),
    );
    // A message we failed to move comes back after its visibility timeout: do not loop on it.
    const fresh = messages.filter((message) => message.MessageId && !seen.has(message.MessageId));
    if (fresh.length === 0) break;
    fresh.forEach((message) => seen.add(message.MessageId ?? ''));
    const entries = await Promise.all(
      fresh.map(async (message, index) => ({ Id: String(index), MessageBody: message.Body ?? '', MessageAttributes: await attributesFor(message, options.principals) })),
    );
    const sent = await sqs.send(new SendMessageBatchCommand({ QueueUrl: options.queueUrl, Entries: entries }));
    for (const failure of sent.Failed ?? []) {
      failed.push({ messageId: fresh[Number(failure.Id)]?.MessageId ?? '', reason: failure.Message ?? failure.Code ?? 'send failed' });
    }
    const movedNow = (sent.Successful ?? []).map((entry) => fresh[Number(entry.Id)]).filter((message): message is Message => message !== undefined);
    if (movedNow.length > 0) {
      const deleted = await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: options.deadLetterQueueUrl,
          Entries: movedNow.map((message, index) => ({ Id: String(index), ReceiptHandle: message.ReceiptHandle ?? '' })),
        }),
      );
      // Not deleted: it will be moved (and taken as a duplicate) again on the next run.
      for (const failure of deleted.Failed ?? []) failed.push({ messageId: movedNow[Number(failure.Id)]?.MessageId ?? '', reason: `copied but not deleted: ${failure.Message ?? failure.Code ?? ''}` });
      moved += movedNow.length - (deleted.Failed?.length ?? 0);
      if (options.onMoved) {
        const notDeleted = new Set((deleted.Failed ?? []).map((failure) => Number(failure.Id)));
        const copies = new Map((sent.Successful ?? []).map((entry) => [fresh[Number(entry.Id)], entry.MessageId]));
        movedNow.forEach((message, index) => {
          const copy = copies.get(message);
          if (!notDeleted.has(index) && message.MessageId && copy) options.onMoved?.({ from: message.MessageId, to: copy });
        });
      }
    }
  }
  return { moved, failed };
}

async function attributesFor(message: Message, principals: PrincipalRegistry | undefined): Promise<Record<string, MessageAttributeValue>> {
  const attributes = { ...(message.MessageAttributes ?? {}) };
  const sender = message.Attributes?.SenderId;
  const carried = attributes[REDRIVEN_FOR];
  // An operator's own earlier redrive named the first sender: keep it. Anyone else's claim is dropped.
  const senderIsOperator = sender !== undefined && principals !== undefined && (await resolvePrincipal(principals, sender))?.role === 'operator';
  if (carried && senderIsOperator) return attributes;
  if (sender) attributes[REDRIVEN_FOR] = { DataType: 'String', StringValue: sender };
  // No SenderId to carry (SQS always gives one): then nothing is carried, rather than a claim nobody vouches for.
  else delete attributes[REDRIVEN_FOR];
  return attributes;
}
