import { ConditionalCheckFailedException, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { NATIVE_STATUS } from '@dispatch-ledger/protocol';
import type { Decision, RunStatus, SubmittedFields } from './model.js';
import { RUN_STATUSES } from './model.js';
import { isPlainObject } from './parse.js';

/**
 * Run state of a Lambda worker (CONTRACT §12): one item per run, key `runId`, in the table
 * `ledger.addLambdaTarget()` creates. The ledger reads the public fields (`LambdaRunState` below, a copy
 * of the ledger's own type: this package does not import the ledger); the kit keeps its private fields
 * in the same item. Every write is conditional on the revision it read, so two invocations of one run
 * never both move it, and a seq taken by one is never taken again by another.
 */

/** What the ledger's lookup reads (the ledger's `LambdaRunState`). */
export interface LambdaRunState {
  readonly runId: string;
  readonly status: RunStatus;
  /** A final run's own word for its status when it says more (CONTRACT V3 §2): `worker_restarted`. */
  readonly nativeStatus?: string;
  readonly result?: { readonly summary: string };
  readonly pendingApproval?: { readonly approvalId: string; readonly requestedAt: string };
  /** The last event seq taken for this run (0: none yet); persisted before the event is sent. */
  readonly seq: number;
  readonly updatedAt: string;
}

/** One approval a run asked for, in the order its code asked: the n-th `requestApproval` of a re-entered run is the n-th one here. */
export interface LambdaApproval {
  readonly approvalId: string;
  readonly requestedAt: string;
  readonly note?: string;
  readonly decision?: Decision;
}

/** The whole item: the ledger's fields, then the kit's. */
export interface LambdaRunItem extends LambdaRunState, SubmittedFields {
  /** The item layout's version. */
  readonly kit: 1;
  /** Bumped by every write; a write is conditional on the one before it. */
  readonly rev: number;
  /** The submission's W3C trace context: a resumed run's `ctx.traceparent` is read back from here. */
  readonly traceparent?: string;
  readonly createdAt: string;
  /** The request id of the invocation driving the run (Lambda's retries of an invocation keep its id). */
  readonly invocation: string;
  /** When that invocation's function timeout is over: past it, that invocation is certainly gone. */
  readonly leaseUntil: string;
  /** Refs uploaded and taken by the ledger. */
  readonly evidence: readonly string[];
  readonly approvals: readonly LambdaApproval[];
  /** The final result's body, as JSON text (kept out of `result`, which the ledger reads as `{ summary }`). */
  readonly resultBodyJson?: string;
  readonly note?: string;
  readonly cancelRequestedAt?: string;
  readonly finalReport?: { readonly seq: number; readonly state: 'pending' | 'delivered' | 'refused' };
  /** DynamoDB TTL (epoch seconds): the table `addLambdaTarget` creates expires items by it. */
  readonly expiresAt?: number;
}

export type LambdaCreateOutcome = { readonly kind: 'created' } | { readonly kind: 'exists'; readonly existing: LambdaRunItem };

export interface LambdaRunStore {
  /** Writes a new item unless one exists under its runId (one run per runId). */
  create(item: LambdaRunItem): Promise<LambdaCreateOutcome>;
  /** The item, read strongly consistently, or undefined. */
  get(runId: string): Promise<LambdaRunItem | undefined>;
  /** Replaces the item if it is still at revision `item.rev - 1`; false when another write came first. */
  replace(item: LambdaRunItem): Promise<boolean>;
}

/** An item the kit cannot read as its own. */
export class LambdaItemError extends Error {
  override readonly name = 'LambdaItemError';
}

const STATUSES: ReadonlySet<string> = new Set<string>(RUN_STATUSES);
const isString = (value: unknown): value is string => typeof value === 'string';

/** Reads an item back, checked field by field (an item from another kit version is refused, not misread). */
export function decodeItem(value: unknown): LambdaRunItem {
  const no = (reason: string): never => {
    throw new LambdaItemError(`run-state item unreadable: ${reason}`);
  };
  if (!isPlainObject(value)) return no('not an object');
  if (value['kit'] !== 1) return no(`unknown kit layout ${JSON.stringify(value['kit'])}`);
  for (const field of ['runId', 'updatedAt', 'dispatchId', 'origin', 'callbackUrl', 'createdAt', 'invocation', 'leaseUntil'] as const) {
    if (!isString(value[field])) no(`${field} is not a string`);
  }
  for (const field of ['rev', 'seq', 'attempt'] as const) {
    const n = value[field];
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) no(`${field} is not a count`);
  }
  if (!isString(value['status']) || !STATUSES.has(value['status'])) no('status is not a run status');
  if (value['nativeStatus'] !== undefined && !(isString(value['nativeStatus']) && NATIVE_STATUS.test(value['nativeStatus']))) no('nativeStatus is not 1..64 of [A-Za-z0-9_.:-]');
  if (!Array.isArray(value['evidence']) || !value['evidence'].every(isString)) no('evidence is not a list of refs');
  if (!Array.isArray(value['expectedEvidence']) || !value['expectedEvidence'].every(isString)) no('expectedEvidence is not a list of refs');
  if (!Array.isArray(value['approvals']) || !value['approvals'].every((a) => isPlainObject(a) && isString(a['approvalId']) && isString(a['requestedAt']))) no('approvals is malformed');
  if (!isPlainObject(value['timeouts'])) no('timeouts is not an object');
  if (value['traceparent'] !== undefined && !isString(value['traceparent'])) no('traceparent is not a string');
  const result = value['result'];
  if (result !== undefined && !(isPlainObject(result) && isString(result['summary']))) no('result has no summary');
  const report = value['finalReport'];
  if (report !== undefined && !(isPlainObject(report) && typeof report['seq'] === 'number' && ['pending', 'delivered', 'refused'].includes(String(report['state'])))) no('finalReport is malformed');
  // Every field the kit relies on has been checked above.
  return value as unknown as LambdaRunItem;
}

/** Drops undefined members: an item's stored form and its object agree. */
export function compact<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, member]) => member !== undefined)) as T;
}

/** A store for tests and for trying a handler out: lives as long as the process. */
export function memoryLambdaStore(): LambdaRunStore {
  const items = new Map<string, string>();
  const read = (runId: string): LambdaRunItem | undefined => {
    const text = items.get(runId);
    return text === undefined ? undefined : decodeItem(JSON.parse(text));
  };
  return {
    async create(item) {
      const existing = read(item.runId);
      if (existing) return { kind: 'exists', existing };
      items.set(item.runId, JSON.stringify(compact(item)));
      return { kind: 'created' };
    },
    async get(runId) {
      return read(runId);
    },
    async replace(item) {
      const current = read(item.runId);
      if (!current || current.rev !== item.rev - 1) return false;
      items.set(item.runId, JSON.stringify(compact(item)));
      return true;
    },
  };
}

export interface DynamoRunStoreOptions {
  /** The run-state table (`ledger.addLambdaTarget()` returns it; pass its name as `KIT_RUN_TABLE`). */
  readonly tableName: string;
  /** @default a DynamoDBClient from the environment */
  readonly client?: DynamoDBClient | DynamoDBDocumentClient;
}

/**
 * The DynamoDB store of a Lambda worker: `create` is a put on `attribute_not_exists(runId)`, `replace` a
 * put on `rev = :previous`; reads are strongly consistent.
 *
 * @example
 * const store = dynamoRunStore({ tableName: process.env.KIT_RUN_TABLE ?? '' });
 */
export function dynamoRunStore(options: DynamoRunStoreOptions): LambdaRunStore {
  const { tableName } = options;
  if (!tableName) throw new RangeError('dynamoRunStore needs a tableName (KIT_RUN_TABLE)');
  const raw = options.client ?? new DynamoDBClient({});
  const documents = raw instanceof DynamoDBDocumentClient ? raw : DynamoDBDocumentClient.from(raw, { marshallOptions: { removeUndefinedValues: true } });
  const get = async (runId: string): Promise<LambdaRunItem | undefined> => {
    const { Item } = await documents.send(new GetCommand({ TableName: tableName, Key: { runId }, ConsistentRead: true }));
    return Item === undefined ? undefined : decodeItem(Item);
  };
  return {
    async create(item) {
      try {
        await documents.send(new PutCommand({ TableName: tableName, Item: compact(item), ConditionExpression: 'attribute_not_exists(runId)' }));
        return { kind: 'created' };
      } catch (error) {
        if (!(error instanceof ConditionalCheckFailedException)) throw error;
        const existing = await get(item.runId);
        if (!existing) throw new LambdaItemError(`run ${item.runId} exists but could not be read back`);
        return { kind: 'exists', existing };
      }
    },
    get,
    async replace(item) {
      try {
        await documents.send(
          new PutCommand({ TableName: tableName, Item: compact(item), ConditionExpression: '#rev = :previous', ExpressionAttributeNames: { '#rev': 'rev' }, ExpressionAttributeValues: { ':previous': item.rev - 1 } }),
        );
        return true;
      } catch (error) {
        if (error instanceof ConditionalCheckFailedException) return false;
        throw error;
      }
    },
  };
}
