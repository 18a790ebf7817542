import { noTargetWork } from './factories.js';
import { BatchWriteItemCommand, type AttributeValue, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { ROUTES, routePath } from '@dispatch-ledger/protocol';
import { join } from 'node:path';
import { projectRoot } from '../../local/paths.js';
import { InboxTable } from '../../shared/adapters/inbox-table.js';
import { LedgerFeedsTable } from '../../shared/adapters/ledger-feeds.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { ApiError, errorResponse } from '../../shared/api/http.js';
import { route, type ApiDeps } from '../../shared/api/routes.js';
import { MemoryBlobs } from './memory-blobs.js';

/**
 * Data a released ledger wrote, and what its API answered from it (issue 33: a restructuring must read
 * the previous release's data as that release did). `scripts/record-release-data.ts` fills a table by
 * running the local platform and its demo, keeps every item as DynamoDB stored it, and records the
 * answers of every read route over them — each dispatch's view and paged lists (as its origin and as the
 * operator), each origin's history, rejections and inbox, and the operator's lists — following every
 * cursor issued. `release-data.test.ts` loads the items into a fresh table and asks the same again.
 */
export const RELEASE_DATA_FILE = join(projectRoot, 'test', 'fixtures', 'release-data.json');

export interface RecordedRead {
  readonly path: string;
  readonly query: Readonly<Record<string, string>>;
  /** The caller's origin (X-Ledger-Origin); none: the operator. */
  readonly origin?: string;
  readonly answer: { readonly status: number; readonly body: unknown };
}

export interface ReleaseData {
  /** The commit that wrote the items and answered the reads. */
  readonly commit: string;
  /** The API's clock for the reads (the lists' windows and the views' clocks are read against it). */
  readonly readAt: string;
  readonly retentionSeconds: number;
  readonly items: ReadonlyArray<Record<string, AttributeValue>>;
  readonly reads: readonly RecordedRead[];
}

/** The API over a table, as the API function builds it, open (the caller's origin is X-Ledger-Origin), at a fixed clock. */
export function apiDepsOn(dynamodb: DynamoDBClient, tableName: string, readAt: Date, retentionSeconds: number): ApiDeps {
  const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
  const table = new LedgerTable(documents, { tableName, retentionSeconds });
  return {
    store: table,
    feeds: new LedgerFeedsTable(documents, { tableName, retentionSeconds, now: () => readAt }),
    principals: table,
    principalMode: 'open',
    inbox: new InboxTable(documents, { tableName, retentionSeconds }),
    ...noTargetWork(() => readAt, 'a read route called a target', new MemoryBlobs()),
  };
}

/** One GET through the API's router; a refusal answered as the API function answers it. */
export async function readThrough(deps: ApiDeps, read: Omit<RecordedRead, 'answer'>): Promise<{ status: number; body: unknown }> {
  const request = { method: 'GET', rawPath: read.path, query: read.query, headers: read.origin === undefined ? {} : { 'x-ledger-origin': read.origin }, body: undefined, iamUserId: undefined };
  const answer = await route(deps, request).catch((error: unknown) => {
    if (error instanceof ApiError) return errorResponse(error);
    throw error;
  });
  return { status: answer.statusCode, body: JSON.parse(answer.body) as unknown };
}

/** Puts the items, 25 a request, retrying what the engine leaves unprocessed. */
export async function loadItems(dynamodb: DynamoDBClient, tableName: string, items: ReadonlyArray<Record<string, AttributeValue>>): Promise<void> {
  for (let start = 0; start < items.length; start += 25) {
    let requests = items.slice(start, start + 25).map((Item) => ({ PutRequest: { Item } }));
    for (let tries = 0; requests.length > 0; tries += 1) {
      if (tries > 10) throw new Error('the engine kept items unprocessed');
      const { UnprocessedItems } = await dynamodb.send(new BatchWriteItemCommand({ RequestItems: { [tableName]: requests } }));
      requests = (UnprocessedItems?.[tableName] ?? []).flatMap((request) => (request.PutRequest?.Item ? [{ PutRequest: { Item: request.PutRequest.Item } }] : []));
    }
  }
}

/** The reads to record over a table's dispatches: every read route, every page. */
export function readsOf(dispatches: ReadonlyArray<{ readonly dispatchId: string; readonly origin: string }>): Array<Omit<RecordedRead, 'answer'>> {
  const reads: Array<Omit<RecordedRead, 'answer'>> = [];
  const origins = [...new Set(dispatches.map((dispatch) => dispatch.origin))].sort();
  for (const { dispatchId, origin } of dispatches) {
    for (const caller of [origin, undefined]) reads.push({ path: routePath(ROUTES.getDispatch, { dispatchId }), query: {}, ...(caller ? { origin: caller } : {}) });
    for (const list of [ROUTES.listReceipts, ROUTES.listOperatorReceipts, ROUTES.listManualAttestations, ROUTES.listRuns]) reads.push({ path: routePath(list, { dispatchId }), query: { limit: '2' }, origin });
  }
  for (const origin of origins) {
    for (const list of [ROUTES.history, ROUTES.originRejections, ROUTES.inboxList]) reads.push({ path: routePath(list, { origin }), query: { limit: '2' }, origin });
  }
  for (const list of [ROUTES.listDispatches, ROUTES.attention, ROUTES.rejections]) reads.push({ path: routePath(list, {}), query: { limit: '3' } });
  reads.push({ path: routePath(ROUTES.counts, {}), query: {} });
  return reads;
}

/** The cursor an answer gives to its next page: `cursor` of a list, `more` of a view's paged list. */
export function nextCursor(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const { cursor, more } = body as { cursor?: unknown; more?: unknown };
  const next = cursor ?? more;
  return typeof next === 'string' ? next : undefined;
}
