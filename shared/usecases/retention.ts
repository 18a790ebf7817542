import { dispatchFolders } from '../ledger/objects.js';
import type { AcceptedMessage } from '../dispatch/records.js';
import { DISPATCH_ID } from '../dispatch/ids.js';
import type { StreamChange } from '../events/derive.js';

/**
 * What goes from the evidence bucket when DynamoDB's TTL removes a ledger record (CONTRACT §7: the
 * objects of a dispatch are kept as long as its records, and no longer). A bucket rule only knows an
 * object's age — a spilled task would go while the anchor that names it lives on — so objects follow
 * the TTL REMOVE records of the table's stream instead (the bucket's age rule is only a backstop,
 * backstop.ts):
 *
 * | record removed by TTL            | objects deleted                                                       |
 * | -------------------------------- | --------------------------------------------------------------------- |
 * | accepted message (the anchor)    | its `taskRef` and `bodyRef`, and every object under the dispatch's     |
 * |                                  | folders (`dispatchFolders`, objects.ts): payloads (a conflicting       |
 * |                                  | message's spill too), evidence of every attempt, the sealed copies the |
 * |                                  | evidence check made, spilled result bodies of every attempt            |
 * | rejection                        | its `bodyRef`                                                         |
 * | anything else, or any REMOVE not made by TTL (a person's DeleteItem) | nothing                         |
 *
 * The anchor is the dispatch's longest-lived record (its state expires first, see ledger-items.ts),
 * so its removal is the moment nothing readable names the objects any more.
 */
export type RetentionPlan =
  | { readonly kind: 'nothing' }
  | {
      readonly kind: 'delete';
      /** Whose objects, for the log: `dispatch d-1`, `rejection m-1`. */
      readonly of: string;
      /** Objects the record names. */
      readonly keys: readonly string[];
      /** Folders (key prefixes ending in `/`) whose every object goes. */
      readonly folders: readonly string[];
    }
  /** A TTL-removed record that failed decoding: nothing is deleted on its word; the bucket's backstop rule ages its objects out. */
  | { readonly kind: 'corrupt'; readonly key: string; readonly problem: string };

const NOTHING: RetentionPlan = { kind: 'nothing' };

export { dispatchFolders } from '../ledger/objects.js';

/**
 * The objects to delete for one decoded stream change: only for a REMOVE made by TTL of an anchor
 * or a rejection (see {@link RetentionPlan}).
 *
 * @example
 * retentionPlanOf({ eventName: 'REMOVE', removedByTtl: true, oldItem: { kind: 'message', message }, … })
 * // { kind: 'delete', of: 'dispatch d-1', keys: ['payloads/d-1/…/task.json'], folders: ['payloads/d-1/', 'evidence/d-1/', 'sealed/d-1/', 'results/d-1/'] }
 */
export function retentionPlanOf(change: StreamChange): RetentionPlan {
  if (change.eventName !== 'REMOVE' || change.removedByTtl !== true) return NOTHING;
  const item = change.oldItem;
  switch (item.kind) {
    case 'message': {
      const { dispatchId, content } = item.message;
      // A folder is only safe for an id that cannot hold a `/` or be empty: anything else is not an anchor this ledger wrote.
      if (!DISPATCH_ID.test(dispatchId)) return { kind: 'corrupt', key: `anchor of ${JSON.stringify(dispatchId)}`, problem: 'dispatchId is not a dispatch id' };
      const named = content.valid ? content.taskRef : content.bodyRef;
      return { kind: 'delete', of: `dispatch ${dispatchId}`, keys: named ? [named] : [], folders: dispatchFolders(dispatchId) };
    }
    case 'rejection': {
      const { messageId, bodyRef } = item.rejection;
      return bodyRef ? { kind: 'delete', of: `rejection ${messageId}`, keys: [bodyRef], folders: [] } : NOTHING;
    }
    case 'corrupt':
      return { kind: 'corrupt', key: item.key, problem: item.problem };
    default:
      return NOTHING;
  }
}

/** The evidence bucket, as the retention function needs it. Deleting an object that is already gone succeeds. */
export interface ObjectSweeper {
  /** Deletes these objects; resolves to how many were asked to go. */
  deleteKeys(keys: readonly string[]): Promise<number>;
  /** Deletes every object whose key starts with `folder`, page by page; resolves to how many were listed and deleted. */
  deleteFolder(folder: string): Promise<number>;
}

/**
 * The table, as the retention function needs it: an anchor may expire while its dispatch still lives
 * (a run unknown for months, an approval never answered, a redispatch long after the first run), and
 * an id may be taken again once a dispatch's records are gone.
 */
export interface LiveDispatches {
  /** True while the dispatch's state exists and its own expiry (if any) has not passed. */
  stateLives(dispatchId: string, now: Date): Promise<boolean>;
  /** True when an anchor holds the id now (the id was taken again after the old one expired). */
  anchorHeld(dispatchId: string): Promise<boolean>;
  /** Puts an expired anchor back with a later expiry, unless another anchor holds the id by then. */
  restoreAnchor(message: AcceptedMessage, until: Date): Promise<void>;
}

export type RetentionOutcome =
  | { readonly kind: 'nothing' }
  /** The anchor expired while its dispatch lives on (put back), or its id was taken again: nothing deleted. */
  | { readonly kind: 'kept'; readonly of: string; readonly why: 'dispatch_lives' | 'id_taken_again' }
  | { readonly kind: 'deleted'; readonly of: string; readonly keys: number; readonly inFolders: number }
  | { readonly kind: 'corrupt'; readonly key: string; readonly problem: string };

/**
 * Deletes the objects of one TTL-removed record. Idempotent: a retried record (the stream retries a
 * failed batch) deletes what is left and finds the rest already gone. Named keys go first, so a folder
 * listing does not count them again.
 */
export async function removeExpiredObjects(change: StreamChange, objects: ObjectSweeper, live: LiveDispatches, options: { readonly now: Date; readonly anchorSeconds: number }): Promise<RetentionOutcome> {
  const plan = retentionPlanOf(change);
  if (plan.kind !== 'delete') return plan;
  if (change.oldItem.kind === 'message') {
    // Only a dispatch whose records are gone loses its objects.
    const { message } = change.oldItem;
    if (await live.stateLives(message.dispatchId, options.now)) {
      await live.restoreAnchor(message, new Date(options.now.getTime() + options.anchorSeconds * 1000));
      return { kind: 'kept', of: plan.of, why: 'dispatch_lives' };
    }
    // A new dispatch under the same id (its folders are the same): its objects are not this record's to delete.
    if (await live.anchorHeld(message.dispatchId)) return { kind: 'kept', of: plan.of, why: 'id_taken_again' };
  }
  const keys = await objects.deleteKeys(plan.keys);
  let inFolders = 0;
  for (const folder of plan.folders) inFolders += await objects.deleteFolder(folder);
  return { kind: 'deleted', of: plan.of, keys, inFolders };
}
