import { existsSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { localClients } from './clients.js';
import type { InvocationReport } from './runtime/context.js';
import type { LocalState } from './state.js';

/** Lines of a JSONL file that parse, in order (a line being written may be cut: it is skipped). */
export function readJsonl<T>(file: string): T[] {
  if (!existsSync(file)) return [];
  const out: T[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line) as T);
    } catch {
      // partial last line
    }
  }
  return out;
}

async function waitFor<T>(what: string, find: () => T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const found = find();
    if (found !== undefined) return found;
    await sleep(100);
  }
  throw new Error(`demo: timed out waiting for ${what}`);
}

/**
 * The demo `npm start` runs against the local platform. It grows with each capability; today it shows
 * the platform's paths working end to end: SQS → intake handler, HTTP → API handler, the bus → the
 * event log, and the demo agent answering.
 */
export async function runDemo(state: LocalState, print: (line: string) => void): Promise<void> {
  const info = state.info;
  if (!info) throw new Error('demo: the platform is not ready');
  const clients = localClients({
    dynamodbEndpoint: info.dynamodbEndpoint,
    sqsEndpoint: info.sqsEndpoint,
    s3Endpoint: info.s3Endpoint,
    motoEndpoint: info.eventBridgeEndpoint,
  });
  try {
    print('demo 1/4  a dispatch message through the queue to the intake handler');
    const dispatchId = `d-demo-${Date.now()}`;
    const sent = await clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: info.dispatchQueueUrl,
        MessageBody: JSON.stringify({
          dispatchId,
          origin: 'planner',
          target: 'demo-agent',
          task: { goal: 'summarise the incident', behavior: 'complete' },
          expectedEvidence: ['out/report.md'],
        }),
      }),
    );
    const messageId = sent.MessageId ?? '';
    const invocation = await waitFor('the intake invocation', () =>
      readJsonl<InvocationReport>(state.invocationLog).find(
        (report) => report.function === 'intake' && report.items?.includes(messageId),
      ),
    );
    print(`          message ${messageId} → intake (${invocation.outcome}, ${invocation.durationMs} ms)`);

    print('demo 2/4  an HTTP request through the local API Gateway to the API handler');
    const response = await fetch(`${info.apiUrl}/dispatches/${dispatchId}`, { headers: { 'x-ledger-origin': 'planner' } });
    const body = (await response.json()) as unknown;
    print(`          GET /dispatches/${dispatchId} → ${response.status} ${JSON.stringify(body)}`);

    print('demo 3/4  an event on the local bus, delivered by its catch-all rule to the event log');
    const probe = `probe-${Date.now()}`;
    await clients.eventBridge.send(
      new PutEventsCommand({
        Entries: [
          {
            EventBusName: info.eventBusName,
            Source: 'dispatch-ledger.demo',
            DetailType: 'Demo Probe',
            Detail: JSON.stringify({ probe }),
          },
        ],
      }),
    );
    await waitFor('the probe event in the event log', () =>
      readJsonl<{ detail?: { probe?: string } }>(info.eventLog).find((event) => event.detail?.probe === probe),
    );
    print(`          "Demo Probe" ${probe} → ${info.eventLog}`);

    print('demo 4/4  the demo agent (target "demo-agent")');
    const stats = await fetch(`${info.demoAgentUrl}/stats`);
    print(`          GET ${info.demoAgentUrl}/stats → ${stats.status} ${JSON.stringify(await stats.json())}`);
    print('demo done: queue → handler, HTTP → handler, bus → event log, target up.');
  } finally {
    clients.destroy();
  }
}
