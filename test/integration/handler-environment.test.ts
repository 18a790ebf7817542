import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { ListQueuesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { EventBridgeClient, ListEventBusesCommand } from '@aws-sdk/client-eventbridge';
import { afterEach, describe, expect, it } from 'vitest';
import { localHandlerEnvironment } from '../../local/clients.js';
import { ensureQueue } from '../../local/resources.js';
import { engineClients, loopbackOnly, uniqueName, testEngines } from '../support/engines.js';

describe('the handler environment of the local runtime', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
  });

  it('points clients built with no endpoint (as handlers build them) at the local engines', async () => {
    const queue = uniqueName('env');
    const clients = engineClients();
    await ensureQueue(clients.sqs, queue);
    clients.destroy();
    Object.assign(process.env, localHandlerEnvironment(testEngines()));

    // Exactly how a handler's deps.ts builds its clients in AWS: no endpoint, no credentials.
    const sqs = loopbackOnly(new SQSClient({}));
    const dynamodb = loopbackOnly(new DynamoDBClient({}));
    const eventBridge = loopbackOnly(new EventBridgeClient({}));
    const queues = await sqs.send(new ListQueuesCommand({ QueueNamePrefix: queue }));
    const tables = await dynamodb.send(new ListTablesCommand({}));
    const buses = await eventBridge.send(new ListEventBusesCommand({}));

    expect(queues.QueueUrls?.some((url) => url.endsWith(`/${queue}`))).toBe(true);
    expect(tables.$metadata.httpStatusCode).toBe(200);
    expect(buses.EventBuses?.map((bus) => bus.Name)).toContain('default');
    for (const client of [sqs, dynamodb, eventBridge]) client.destroy();
  });
});
