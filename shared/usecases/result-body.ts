import { createHash } from 'node:crypto';
import type { ResultBodyRef } from '../dispatch/state.js';
import type { BlobStore, LedgerStore } from '../ledger/port.js';
import { resultBodyKey } from '../ledger/objects.js';
import { clipBytes } from '../text.js';

/**
 * A result's body (CONTRACT §10), kept before the state write that refers to it: a final event's
 * `result.body`, or what a runtime holds as its run's result (a state machine's output, §17). Its own
 * module, so what only keeps bodies (a lookup) reaches nothing else of the inbox.
 */

/** Results whose body is at most this many bytes travel inline in the claim; larger ones are spilled (CONTRACT §10). */
export const INLINE_BODY_BYTES = 8 * 1024;
export const PREVIEW_BYTES = 4 * 1024;
/** The protocol's bound on a result's body (CONTRACT §2 v2). */
export { MAX_RESULT_BODY_BYTES } from '@dispatch-ledger/protocol';

/** A body's content digest as its keys carry it: the first 16 bytes of its SHA-256, base64url (22 characters). */
export const resultBodyDigest = (json: string): string => createHash('sha256').update(json, 'utf8').digest().subarray(0, 16).toString('base64url');

/**
 * Keeps a final event's `result.body` before the state write that refers to it (a result is never
 * ready with its body missing). Above the inline limit it goes to the blob store once, and the record
 * holds a preview and the key. Throws when it cannot be stored: the event is answered 5xx, nothing recorded.
 */
export async function storeResultBody(deps: { readonly store: Pick<LedgerStore, 'putResultBody'>; readonly blobs: Pick<BlobStore, 'put'>; readonly now: () => Date }, dispatchId: string, attempt: number, seq: number, json: string): Promise<ResultBodyRef> {
  const bytes = Buffer.byteLength(json, 'utf8');
  const spilled = bytes > INLINE_BODY_BYTES;
  const at = deps.now().toISOString();
  // Keyed by its content too: a concurrent report of the same seq with another body writes its own
  // record and object, and whichever state write wins names its own (the loser's stay unreferenced).
  const digest = resultBodyDigest(json);
  if (spilled) {
    const key = resultBodyKey(dispatchId, attempt, seq, digest);
    await deps.blobs.put(key, json, 'application/json');
    await deps.store.putResultBody({ dispatchId, attempt, seq, digest, bytes, json: null, preview: clipBytes(json, PREVIEW_BYTES), bodyRef: key, at });
  } else {
    await deps.store.putResultBody({ dispatchId, attempt, seq, digest, bytes, json, preview: null, bodyRef: null, at });
  }
  return { seq, bytes, spilled, digest };
}
