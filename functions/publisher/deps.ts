import { functionLogger, functionMetrics } from '../../shared/adapters/powertools.js';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { readLedgerConfig } from '../../shared/adapters/config.js';
import { addCounts } from '../../shared/adapters/dispatch-counters.js';
import { publish } from '../../shared/adapters/event-bus.js';
import type { DetailType } from '../../shared/events/catalog.js';
import type { CountChanges, PublishEvents } from '../../shared/events/derive.js';
import { profileFromEnv, publishedDetailTypes } from '../../shared/events/profile.js';

/** Composition root of the event publisher: config and the bus and table clients built once per execution environment. */
export const logger = functionLogger('publisher');
export const metrics = functionMetrics();

const config = readLedgerConfig({ requireApiBaseUrl: false, requireBucket: false, requireEventBus: true });
const busName = config.eventBusName;
const eventBridge = new EventBridgeClient({});
// The counters of `GET /counts` (CONTRACT §2 v2) are items of the ledger table: the only items it writes.
const tableName = config.tableName;
const documents = DynamoDBDocumentClient.from(new DynamoDBClient({}));

// What this deployment puts on the bus (CONTRACT §3 v2, the construct's `events` prop); unknown names fail the cold start.
const published = publishedDetailTypes(profileFromEnv(config.publishedEvents));

export const publisherDeps: { readonly publish: PublishEvents; readonly count: CountChanges; readonly published: ReadonlySet<DetailType> } = {
  publish: (events) => publish(events, { client: eventBridge, busName }),
  published,
  count: (delta, seed) => addCounts(documents, tableName, seed, delta),
};
