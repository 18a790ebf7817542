import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBRecord } from 'aws-lambda';
import type { StreamChange } from '../events/derive.js';
import { decodeItem } from './ledger-items.js';
import { PUBLISHED_KEY_PREFIXES, TTL_REMOVER } from './stream-keys.js';

export { PUBLISHED_KEY_PREFIXES, TTL_REMOVER };

type Image = NonNullable<DynamoDBRecord['dynamodb']>['NewImage'];
// Lambda delivers images as AttributeValue JSON (binary as base64, which no ledger item holds).
const decode = (image: Image) => decodeItem(image ? unmarshall(image as Record<string, AttributeValue>) : undefined);

/** True for a REMOVE record made by DynamoDB's TTL (as Lambda delivers it: `userIdentity.type`, `userIdentity.principalId`). */
export function isTtlRemoval(record: DynamoDBRecord): boolean {
  // `userIdentity` is typed `any` by @types/aws-lambda: read it as unknown.
  const identity: unknown = record.userIdentity;
  if (record.eventName !== 'REMOVE' || typeof identity !== 'object' || identity === null) return false;
  return 'type' in identity && identity.type === TTL_REMOVER.type && 'principalId' in identity && identity.principalId === TTL_REMOVER.principalId;
}

/** True for a record of an item the publisher reads (`PUBLISHED_KEY_PREFIXES`), as the filter decides it. */
export function isPublishedRecord(record: DynamoDBRecord): boolean {
  const pk = record.dynamodb?.Keys?.pk?.S;
  return pk !== undefined && PUBLISHED_KEY_PREFIXES.some((prefix) => pk.startsWith(prefix));
}

/** A DynamoDB stream record as Lambda delivers it (and as its on-failure record keeps it), decoded. */
export const streamChangeOf = (record: DynamoDBRecord): StreamChange => ({
  sequenceNumber: record.dynamodb?.SequenceNumber ?? '',
  eventName: record.eventName ?? 'MODIFY',
  oldItem: decode(record.dynamodb?.OldImage),
  newItem: decode(record.dynamodb?.NewImage),
  removedByTtl: isTtlRemoval(record),
});
