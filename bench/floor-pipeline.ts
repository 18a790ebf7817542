import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import { GetItemCommand, PutItemCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { httpTarget } from '../shared/adapters/http-target.js';
import { MESSAGE_ITEM, STATE_ITEM } from '../shared/adapters/item-kinds.js';
import { DEFAULT_TIMEOUTS } from '../shared/dispatch/message.js';
import type { TargetRegistration } from '../shared/targets/port.js';
import { createKeyTable } from './reference-pipeline.js';

/**
 * The bare floor: the intake's three sequential round trips with no logic around them — per record a
 * conditional PutItem of a small anchor item, the same submission (`httpTarget(...).submit`, the
 * request ours sends) to the same target, an unconditional PutItem of a small state item — driven the
 * way ours and the reference are (a Powertools `BatchProcessor` processing a batch's records
 * concurrently, the handler invoked one batch at a time). No validation, hashing, state machine,
 * index entries, principals or registrations: what any three-round-trip intake costs at least on
 * these engines. Its table is keyed by `pk` alone and has no indexes (as the reference's record table).
 *
 * Run against a table made as the ledger's (`sortKey: true`: its key schema, six indexes, stream), the
 * same small items, none of which enters an index, show what the table's definition alone costs on
 * DynamoDB Local, apart from the ledger's items and logic. Given `items` (copies of the anchor and the
 * state item our intake wrote for one dispatch), it writes those instead, with only the ids swapped:
 * the ledger's own items, index entries and all, behind no logic at all — the fastest any intake
 * writing what the ledger writes could go on these engines.
 */

export interface FloorPipelineOptions {
  /**
   * Built with `cacheMiddleware: true`, as the intake's hot-path client is (HotPathTable): the floor's
   * puts are low-level PutItems on it, so no client of ours is cheaper per request than the floor's.
   */
  readonly dynamodb: DynamoDBClient;
  readonly tableName: string;
  readonly target: TargetRegistration;
  readonly callbackUrl: string;
  readonly targetTimeoutMs: number;
  /** The table is keyed by `pk` and `sk` (the ledger's): the items carry an `sk` too. */
  readonly sortKey?: boolean;
  /** Write these items (wire format) instead of the small ones, every `sampleDispatchId` and `sampleRunId` in them swapped for the message's. */
  readonly items?: LedgerItemTemplates;
}

/** The anchor and the state item our intake wrote for one dispatch, as DynamoDB returned them. */
export interface LedgerItemTemplates {
  readonly anchor: Record<string, AttributeValue>;
  readonly state: Record<string, AttributeValue>;
  readonly sampleDispatchId: string;
  readonly sampleRunId: string;
}

/** Reads back raw the anchor and the state item our intake wrote for `sampleDispatchId` (submitted). */
export async function readLedgerItemTemplates(dynamodb: DynamoDBClient, tableName: string, sampleDispatchId: string): Promise<LedgerItemTemplates> {
  const read = async (key: Record<string, string>): Promise<Record<string, AttributeValue>> => {
    const { Item } = await dynamodb.send(new GetItemCommand({ TableName: tableName, Key: { pk: { S: key.pk as string }, sk: { S: key.sk as string } }, ConsistentRead: true }));
    if (!Item) throw new Error(`no item ${key.pk} ${key.sk} after the sample message`);
    return Item;
  };
  const [anchor, state] = await Promise.all([read(MESSAGE_ITEM.key(sampleDispatchId)), read(STATE_ITEM.key(sampleDispatchId))]);
  const sampleRunId = state.runId?.S;
  if (sampleRunId === undefined || state.phase?.S !== 'submitted') throw new Error('the sample dispatch was not recorded submitted');
  return { anchor, state, sampleDispatchId, sampleRunId };
}

/** A template's copy for another dispatch (and run): the ids swapped wherever they occur, sizes unchanged when the ids are as long. */
function copyOf(template: Record<string, AttributeValue>, swaps: ReadonlyArray<readonly [string, string]>): Record<string, AttributeValue> {
  let json = JSON.stringify(template);
  for (const [from, to] of swaps) json = json.replaceAll(from, to);
  return JSON.parse(json) as Record<string, AttributeValue>;
}

/** The floor's items: the anchor and the state of a dispatch (with an `sk` on a table keyed by both). */
export const floorAnchorKey = (dispatchId: string, sortKey = false): Record<string, string> => ({ pk: `A#${dispatchId}`, ...(sortKey ? { sk: 'A' } : {}) });
export const floorStateKey = (dispatchId: string, sortKey = false): Record<string, string> => ({ pk: `S#${dispatchId}`, ...(sortKey ? { sk: 'S' } : {}) });

export async function createFloorTable(dynamodb: DynamoDBClient, tableName: string): Promise<void> {
  await createKeyTable(dynamodb, tableName, 'pk');
}

export function floorPipeline(options: FloorPipelineOptions): { readonly intake: (event: SQSEvent, context: Context) => Promise<SQSBatchResponse> } {
  const target = httpTarget(options.target, { timeoutMs: options.targetTimeoutMs });
  const processor = new BatchProcessor(EventType.SQS);
  const recordHandler = async (record: SQSRecord): Promise<void> => {
    const message = JSON.parse(record.body) as { dispatchId: string; origin: string; task: Record<string, unknown> };
    const at = new Date().toISOString();
    const items = options.items;
    await options.dynamodb.send(
      new PutItemCommand({
        TableName: options.tableName,
        Item: items ? copyOf(items.anchor, [[items.sampleDispatchId, message.dispatchId]]) : marshall({ ...floorAnchorKey(message.dispatchId, options.sortKey), messageId: record.messageId, at }),
        ConditionExpression: 'attribute_not_exists(pk)',
      }),
    );
    const outcome = await target.submit({
      dispatchId: message.dispatchId,
      attempt: 1,
      origin: message.origin,
      task: message.task,
      expectedEvidence: [],
      callbackUrl: options.callbackUrl,
      timeouts: DEFAULT_TIMEOUTS,
    });
    if (outcome.kind !== 'accepted') throw new Error(`target answered ${outcome.kind}`);
    await options.dynamodb.send(
      new PutItemCommand({
        TableName: options.tableName,
        Item: items
          ? copyOf(items.state, [
              [items.sampleDispatchId, message.dispatchId],
              [items.sampleRunId, outcome.runId],
            ])
          : marshall({ ...floorStateKey(message.dispatchId, options.sortKey), phase: 'submitted', runId: outcome.runId, at }),
      }),
    );
  };
  return { intake: (event, context) => processPartialResponse(event, recordHandler, processor, { context }) };
}
