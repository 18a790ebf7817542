import { MESSAGE_ITEM, STATE_ITEM } from './item-kinds.js';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { AcceptedMessage } from '../dispatch/records.js';
import type { LiveDispatches } from '../usecases/retention.js';
import { messageItem } from './ledger-items.js';
import { TTL_ATTRIBUTE } from './ledger-keys.js';

/**
 * What the retention function asks of the ledger table before it deletes a dispatch's objects (items
 * by key; kept apart from LedgerTable so its bundle carries only these three calls).
 */
export class LiveDispatchesTable implements LiveDispatches {
  constructor(
    private readonly db: DynamoDBDocumentClient,
    private readonly options: { readonly tableName: string; readonly retentionSeconds: number },
  ) {}

  /** The state exists and its own expiry (if it has one) is still ahead: TTL deletes lag, the attribute decides. */
  async stateLives(dispatchId: string, now: Date): Promise<boolean> {
    const { Item } = await this.db.send(
      new GetCommand({ TableName: this.options.tableName, Key: STATE_ITEM.key(dispatchId), ConsistentRead: true, ProjectionExpression: 'pk, #expires', ExpressionAttributeNames: { '#expires': TTL_ATTRIBUTE } }),
    );
    if (!Item) return false;
    const expiresAt = Item[TTL_ATTRIBUTE];
    return typeof expiresAt !== 'number' || expiresAt * 1000 > now.getTime();
  }

  async anchorHeld(dispatchId: string): Promise<boolean> {
    const { Item } = await this.db.send(new GetCommand({ TableName: this.options.tableName, Key: MESSAGE_ITEM.key(dispatchId), ConsistentRead: true, ProjectionExpression: 'pk' }));
    return Item !== undefined;
  }

  /** The anchor back, expiring `until`; an anchor that holds the id by then stands. */
  async restoreAnchor(message: AcceptedMessage, until: Date): Promise<void> {
    try {
      await this.db.send(
        new PutCommand({
          TableName: this.options.tableName,
          Item: { ...messageItem(message, this.options.retentionSeconds), [TTL_ATTRIBUTE]: Math.floor(until.getTime() / 1000) },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
    }
  }
}
