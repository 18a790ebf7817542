import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { InboxTable } from '../../shared/adapters/inbox-table.js';
import { LedgerFeedsTable } from '../../shared/adapters/ledger-feeds.js';
import type { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import type { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import type { ApiDeps } from '../../shared/api/routes.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';

/**
 * The ledger API's dependencies on one table of DynamoDB Local, as its function builds them (open
 * principals: the caller is the origin a request names), with the target ports and the clock the test
 * gives: what a test calls `route()` with.
 */
export function ledgerApiDeps(given: { readonly table: LedgerTable; readonly documents: DynamoDBDocumentClient; readonly tableName: string; readonly blobs: S3Blobs; readonly targetFor: ApiDeps['targetFor']; readonly now: () => Date }): ApiDeps {
  const { table, documents, tableName } = given;
  return {
    store: table,
    blobs: given.blobs,
    feeds: new LedgerFeedsTable(documents, { tableName, retentionSeconds: 86_400 }),
    inbox: new InboxTable(documents, { tableName, retentionSeconds: 86_400 }),
    principals: table,
    principalMode: 'open',
    targetFor: given.targetFor,
    callbackUrl: 'http://127.0.0.1:9',
    retryPolicy: DEFAULT_RETRY_POLICY,
    now: given.now,
    claimSeconds: 60,
  };
}
