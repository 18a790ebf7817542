import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBRecord } from 'aws-lambda';
import type { StreamChange } from '../events/derive.js';
import { decodeItem } from './ledger-items.js';

type Image = NonNullable<DynamoDBRecord['dynamodb']>['NewImage'];
// Lambda delivers images as AttributeValue JSON (binary as base64, which no ledger item holds).
const decode = (image: Image) => decodeItem(image ? unmarshall(image as Record<string, AttributeValue>) : undefined);

/** A DynamoDB stream record as Lambda delivers it (and as its on-failure record keeps it), decoded. */
export const streamChangeOf = (record: DynamoDBRecord): StreamChange => ({
  sequenceNumber: record.dynamodb?.SequenceNumber ?? '',
  eventName: record.eventName ?? 'MODIFY',
  oldItem: decode(record.dynamodb?.OldImage),
  newItem: decode(record.dynamodb?.NewImage),
});
