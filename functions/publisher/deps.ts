import { getStringFromEnv } from '@aws-lambda-powertools/commons/utils/env';
import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { publish } from '../../shared/adapters/event-bus.js';
import type { PublishEvents } from '../../shared/events/derive.js';

/** Composition root of the event publisher: config and the bus client built once per execution environment. */
export const logger = new Logger({ serviceName: 'dispatch-ledger', persistentKeys: { function: 'publisher' } });
export const metrics = new Metrics({ namespace: 'DispatchLedger', serviceName: 'dispatch-ledger' });

const busName = getStringFromEnv({ key: 'EVENT_BUS_NAME', errorMessage: 'EVENT_BUS_NAME is not set' });
const eventBridge = new EventBridgeClient({});

export const publisherDeps: { readonly publish: PublishEvents } = {
  publish: (events) => publish(events, { client: eventBridge, busName }),
};
