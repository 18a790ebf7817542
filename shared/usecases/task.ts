import type { BlobStore, LedgerStore } from '../ledger/port.js';
import type { AcceptedMessage } from '../dispatch/records.js';

/** The task as sent: inline, from the message in hand, or read back from the blob store. */
export async function taskOf(blobs: BlobStore, message: AcceptedMessage, inHand?: Record<string, unknown>): Promise<Record<string, unknown>> {
  if (!message.content.valid) throw new Error(`dispatch ${message.dispatchId} has no valid task`);
  if (inHand) return inHand;
  if (message.content.task) return { ...message.content.task };
  if (!message.content.taskRef) throw new Error(`dispatch ${message.dispatchId} has neither task nor taskRef`);
  return JSON.parse(await blobs.getText(message.content.taskRef)) as Record<string, unknown>;
}

/** The task of a dispatch as its run asks for it (`GET /dispatches/{id}/task`): undefined when it has no valid one. */
export async function taskOfDispatch(deps: { readonly store: Pick<LedgerStore, 'getAcceptedMessage'>; readonly blobs: BlobStore }, dispatchId: string): Promise<Record<string, unknown> | undefined> {
  const message = await deps.store.getAcceptedMessage(dispatchId);
  return message?.content.valid ? taskOf(deps.blobs, message) : undefined;
}
