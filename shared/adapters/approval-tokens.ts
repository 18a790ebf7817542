import { GetCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { ApprovalTokenRecord } from '../dispatch/records.js';
import { APPROVAL_TOKEN_ITEM } from './item-kinds.js';
import { approvalTokenOf } from './ledger-items.js';

/**
 * The task tokens state machines' approvals wait on (CONTRACT §17), as the stepfunctions target adapter
 * reads them to answer a decision and erases them once it is sent. (The orchestrators function keeps
 * them: `LedgerWrites.putApprovalToken`.) Nothing else reads this partition.
 */
export interface ApprovalTokens {
  /** The record of an approval the ledger chose the id of, strongly consistent. */
  tokenOf(dispatchId: string, approvalId: string): Promise<ApprovalTokenRecord | undefined>;
  /** The decision was sent with it: the token is erased, and the record says when. */
  used(dispatchId: string, approvalId: string, at: Date): Promise<void>;
}

export function approvalTokens(db: Pick<DynamoDBDocumentClient, 'send'>, tableName: string): ApprovalTokens {
  return {
    async tokenOf(dispatchId, approvalId) {
      const { Item } = await db.send(new GetCommand({ TableName: tableName, Key: APPROVAL_TOKEN_ITEM.key(dispatchId, approvalId), ConsistentRead: true }));
      return Item ? approvalTokenOf(Item) : undefined;
    },
    async used(dispatchId, approvalId, at) {
      await db.send(
        new UpdateCommand({
          TableName: tableName,
          Key: APPROVAL_TOKEN_ITEM.key(dispatchId, approvalId),
          UpdateExpression: 'REMOVE taskToken SET decidedAt = :at',
          ConditionExpression: 'attribute_exists(pk)',
          ExpressionAttributeValues: { ':at': at.toISOString() },
        }),
      );
    },
  };
}
