import { functionLogger, functionMetrics } from '../../shared/adapters/powertools.js';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { LedgerConfig, ReadConfigOptions } from '../../shared/adapters/config.js';
import { addCounts } from '../../shared/adapters/dispatch-counters.js';
import { publish } from '../../shared/adapters/event-bus.js';
import type { DetailType } from '../../shared/events/catalog.js';
import type { CountChanges, PublishEvents } from '../../shared/events/derive.js';
import { profileFromEnv, publishedDetailTypes } from '../../shared/events/profile.js';

/** Composition root of the event publisher: the bus and table clients built once per execution environment. */
export const logger = functionLogger('publisher');
export const metrics = functionMetrics();

/** The publisher reads no object and serves no callback; it needs the bus. */
export const CONFIG: ReadConfigOptions = { requireApiBaseUrl: false, requireBucket: false, requireEventBus: true };

export interface PublisherDeps {
  readonly publish: PublishEvents;
  readonly count: CountChanges;
  readonly published: ReadonlySet<DetailType>;
}

export function publisherDeps(config: LedgerConfig): PublisherDeps {
  const busName = config.eventBusName;
  const eventBridge = new EventBridgeClient({});
  // The counters of `GET /counts` (CONTRACT §2 v2) are items of the ledger table: the only items it writes.
  const tableName = config.tableName;
  const documents = DynamoDBDocumentClient.from(new DynamoDBClient({}));
  return {
    publish: (events) => publish(events, { client: eventBridge, busName }),
    // What this deployment puts on the bus (CONTRACT §3 v2, the construct's `events` prop); unknown names fail the cold start.
    published: publishedDetailTypes(profileFromEnv(config.publishedEvents)),
    count: (delta, seed) => addCounts(documents, tableName, seed, delta),
  };
}
