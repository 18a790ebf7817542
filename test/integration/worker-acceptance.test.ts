import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker, memoryStore, type ListeningWorker, type RunFunction } from '@dispatch-ledger/worker';
import { createLambdaWorker } from '@dispatch-ledger/worker/lambda';
import type { LocalLambdaHandler } from '../../local/runtime/lambda-invoke.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { uniqueName } from '../support/engines.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * The acceptance behaviours of issue 15 a kit-built Lambda worker must show beside the ones its own
 * tests cover: a stall is unknown (looked up in the kit's run state), then recorded normally when the
 * run completes; a completion without its evidence is an orphan. On the local platform, through the
 * local Lambda, the kit's store in DynamoDB Local.
 */

const gates = new Map<string, () => void>();
const run: RunFunction = async (task, ctx) => {
  if (task['mode'] === 'silent') {
    // Says nothing until the test lets it go: the ledger only has its lookups.
    await new Promise<void>((resolve) => gates.set(ctx.dispatchId, resolve));
    return { summary: 'done after a long silence' };
  }
  // Claims a report it never uploads.
  return { summary: 'done, report not uploaded' };
};
let handler: LocalLambdaHandler | undefined;
let t: TestPlatform;
let http: ListeningWorker;

beforeAll(async () => {
  t = await startTestPlatform({}, {
    lambdaTargets: [{ name: 'kit-acceptance', timeoutSeconds: 60, handler: (event, context) => (handler ??= createLambdaWorker({ name: 'kit-acceptance', run }))(event, context) }],
  });
  // The kit keeps its runs in the platform's kit table (KIT_RUN_TABLE): the ledger's lookups read it there.
  const table = new LedgerTable(DynamoDBDocumentClient.from(t.clients.dynamodb), { tableName: t.platform.resources.ledgerTable, retentionSeconds: 86_400 });
  await table.putTarget({ name: 'kit-acceptance', kind: 'lambda', functionArn: 'arn:aws:lambda:us-east-1:000000000000:function:kit-acceptance', timeoutSeconds: 60, stateTable: t.platform.resources.exampleWorkerRuns });
  // The same run function behind the kit's HTTP server, as an http target.
  http = await createWorker({ name: 'kit-acceptance-http', run, store: memoryStore() }).listen();
  await table.putTarget({ name: 'kit-acceptance-http', kind: 'http', baseUrl: http.url });
});
afterAll(async () => {
  await http.close();
  await t.stop();
});

describe('a kit-built Lambda worker on the ledger', () => {
  it('goes unknown (stalled, after a lookup of its run state) when silent, and is recorded completed when it finishes', async () => {
    const dispatchId = uniqueName('d');
    await t.send(JSON.stringify({ dispatchId, origin: 'planner', target: 'kit-acceptance', task: { mode: 'silent' }, timeouts: { stallAfterSeconds: 2 }, delivery: { mode: 'detached' } }));
    const stalled = await t.viewWhen(dispatchId, (view) => view.execution.monitorStatus === 'stalled');
    expect(stalled.execution).toMatchObject({ status: 'unknown', nativeStatus: 'running' });
    gates.get(dispatchId)?.();
    const done = await t.viewWhen(dispatchId, (view) => view.execution.status === 'completed');
    expect(done.execution).toMatchObject({ nativeStatus: 'completed', monitorStatus: null, result: { summary: 'done after a long silence' } });
  });

  it('is an orphan when it completes without the evidence it was asked for', async () => {
    const dispatchId = uniqueName('d');
    await t.send(JSON.stringify({ dispatchId, origin: 'planner', target: 'kit-acceptance', task: { mode: 'claims' }, expectedEvidence: ['out/report.md'], timeouts: { deliveryGraceSeconds: 1 }, delivery: { mode: 'detached' } }));
    const orphan = await t.viewWhen(dispatchId, (view) => view.evidence.outcome === 'orphan_no_delivery');
    expect(orphan.evidence.missing).toEqual(['out/report.md']);
    expect(orphan.execution.status).toBe('completed');
  });
});

describe('a kit-built HTTP worker on the ledger', () => {
  it('goes unknown (stalled, after a lookup answered from its store) when silent, and is recorded completed when it finishes', async () => {
    const dispatchId = uniqueName('d');
    await t.send(JSON.stringify({ dispatchId, origin: 'planner', target: 'kit-acceptance-http', task: { mode: 'silent' }, timeouts: { stallAfterSeconds: 2 }, delivery: { mode: 'detached' } }));
    const stalled = await t.viewWhen(dispatchId, (view) => view.execution.monitorStatus === 'stalled');
    expect(stalled.execution).toMatchObject({ status: 'unknown', nativeStatus: 'running' });
    gates.get(dispatchId)?.();
    const done = await t.viewWhen(dispatchId, (view) => view.execution.status === 'completed');
    expect(done.execution).toMatchObject({ monitorStatus: null, result: { summary: 'done after a long silence' } });
  });
});
