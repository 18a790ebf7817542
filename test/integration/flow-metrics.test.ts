import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { uniqueName } from '../support/engines.js';
import { eventually, startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * CONTRACT §7: the monitor's `WaitingDispatches` and `SlotsHeldByUnknownRuns` (dimension Target) as EMF
 * lines, with the values the ledger holds; and §1 v2: a message's traceparent logged by the intake as a
 * field of its own. Read from what the real handlers print (Powertools' dev mode writes to console.log).
 */
let t: TestPlatform;
const lines: string[] = [];

beforeAll(async () => {
  vi.spyOn(console, 'log').mockImplementation((line: unknown) => {
    if (typeof line === 'string') lines.push(line);
  });
  vi.spyOn(console, 'info').mockImplementation((line: unknown) => {
    if (typeof line === 'string') lines.push(line);
  });
  t = await startTestPlatform({ POWERTOOLS_DEV: 'true', POWERTOOLS_METRICS_DISABLED: 'false', POWERTOOLS_LOG_LEVEL: 'INFO' });
});
afterAll(async () => {
  await t.stop();
  vi.restoreAllMocks();
});

const parsed = (): Array<Record<string, unknown>> =>
  lines.flatMap((line) => {
    try {
      const value: unknown = JSON.parse(line);
      return typeof value === 'object' && value !== null ? [value as Record<string, unknown>] : [];
    } catch {
      return [];
    }
  });

describe('flow control metrics and trace fields', () => {
  it('emits WaitingDispatches and SlotsHeldByUnknownRuns per limited target with the values it holds', async () => {
    const ledger = new LedgerTable(DynamoDBDocumentClient.from(t.clients.dynamodb), { tableName: t.platform.resources.ledgerTable, retentionSeconds: 86_400 });
    const target = uniqueName('gauge');
    await ledger.putTarget({ name: target, kind: 'http', baseUrl: t.platform.demoAgent.url, maxConcurrentRuns: 1 });
    const stalled = { dispatchId: uniqueName('d'), origin: 'planner', target, task: { behavior: 'stall' }, timeouts: { stallAfterSeconds: 1 } };
    await t.send(JSON.stringify(stalled));
    await t.viewWhen(stalled.dispatchId, (view) => view.execution.status === 'unknown');
    const waiting = Array.from({ length: 2 }, () => ({ dispatchId: uniqueName('d'), origin: 'planner', target, task: { behavior: 'complete' } }));
    for (const body of waiting) {
      await t.send(JSON.stringify(body));
      await t.viewWhen(body.dispatchId, (view) => view.submission.waitingFor === 'capacity');
    }
    const gauge = (name: string) =>
      eventually(`${name} = the ledger's value`, async () => {
        const found = parsed().filter((entry) => entry.Target === target && name in entry);
        const last = found.at(-1);
        return last && last[name] === (name === 'WaitingDispatches' ? 2 : 1) ? last : undefined;
      });
    for (const name of ['WaitingDispatches', 'SlotsHeldByUnknownRuns']) {
      expect(await gauge(name)).toMatchObject({ Target: target, _aws: { CloudWatchMetrics: [{ Namespace: 'DispatchLedger', Dimensions: [['Target']], Metrics: [{ Name: name }] }] } });
    }
  });

  it("logs a message's traceparent as a field of the intake's line", async () => {
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const body = { dispatchId: uniqueName('d'), origin: 'planner', target: 'demo-agent', task: { behavior: 'complete' }, traceparent };
    await t.send(JSON.stringify(body));
    const line = await eventually('the intake line', async () => parsed().find((entry) => entry.dispatchId === body.dispatchId && entry.message === 'dispatch message taken'));
    expect(line).toMatchObject({ traceparent, outcome: 'submitted' });
  });
});
