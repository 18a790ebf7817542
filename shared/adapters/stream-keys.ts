import { REJECTION_ITEM, STATE_ITEM } from './item-kinds.js';


// What the stack's event source filters are built from and the stream handlers check: plain values, no
// SDK, so the construct (`@dispatch-ledger/cdk`) carries them without the stream decoding.

/**
 * Who DynamoDB names as the remover of an item its TTL deleted: the `userIdentity` of that REMOVE
 * record. A DeleteItem by anyone else carries no userIdentity. The retention function's event source
 * filter is built from it too.
 */
export const TTL_REMOVER = { type: 'Service', principalId: 'dynamodb.amazonaws.com' } as const;

/**
 * The partition-key prefixes of the items the publisher reads: a dispatch's items (its state, receipts
 * and attestations: events and counts) and rejections (events). The publisher's event source passes
 * only these (the stack's filter criteria are built from this list): the counter, slot, registry and
 * settings items publish nothing, and without the filter each write to the counters — the publisher's
 * own, once per batch — would wake the publisher again for nothing.
 */
export const PUBLISHED_KEY_PREFIXES: readonly string[] = [STATE_ITEM.key('').pk, REJECTION_ITEM.key('').pk];
