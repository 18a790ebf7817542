import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';

import { localClients } from '../../local/clients.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import type { OperatorReceipt, OperatorReceiptBody } from '../../shared/dispatch/receipts.js';
import type { DispatchView } from '../../shared/dispatch/view.js';
import { uniqueName, testEngines } from '../support/engines.js';
import { operatorReceiptBodyFactory } from '../support/factories.js';
import { eventually, startTestPlatform, type TestPlatform } from '../support/platform.js';

/** Operator receipts (CONTRACT §5) on the local platform: the API, DynamoDB Local, the stream and the bus. */
let t: TestPlatform;
let table: LedgerTable;

beforeAll(async () => {
  t = await startTestPlatform();
  table = new LedgerTable(DynamoDBDocumentClient.from(t.clients.dynamodb), { tableName: t.platform.resources.ledgerTable, retentionSeconds: 86_400 });
});
afterAll(() => t.stop());

async function view(dispatchId: string, origin = 'planner'): Promise<DispatchView> {
  const { status, body } = await t.get(`/dispatches/${dispatchId}`, origin);
  if (status !== 200) throw new Error(`GET /dispatches/${dispatchId} → ${status}`);
  return body as DispatchView;
}

const viewWhen = (dispatchId: string, done: (view: DispatchView) => boolean) =>
  eventually(`dispatch ${dispatchId}`, async () => {
    const current = await view(dispatchId).catch(() => undefined);
    return current && done(current) ? current : undefined;
  });

async function post(path: string, body: unknown, origin = 'planner'): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${t.platform.info.apiUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-ledger-origin': origin },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const postReceipt = (dispatchId: string, body: unknown, origin = 'planner') => post(`/dispatches/${dispatchId}/receipts`, body, origin);

/**
 * A dispatch whose run waits for approval: nothing changes its state while the test records receipts
 * (the approval clock is 30 minutes), so an unchanged state version shows the receipt never touched it.
 */
async function waitingDispatch(): Promise<{ dispatchId: string; runId: string }> {
  const dispatchId = uniqueName('d-rc');
  await t.send(JSON.stringify({ dispatchId, origin: 'planner', target: 'demo-agent', task: { behavior: 'await_approval' } }));
  const waiting = await viewWhen(dispatchId, (current) => current.execution.pendingApproval !== null);
  return { dispatchId, runId: waiting.runId ?? '' };
}

interface LoggedEvent {
  readonly 'detail-type': string;
  readonly detail: { readonly eventId: string; readonly dispatchId?: string; readonly receiptId?: string; readonly [key: string]: unknown };
}

const eventsOf = (dispatchId: string): LoggedEvent[] =>
  readFileSync(t.platform.info.eventLog, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as LoggedEvent)
    .filter((event) => event.detail.dispatchId === dispatchId);

describe('operator receipts on the local platform', () => {
  it('records a receipt once: an identical retry answers 200 with the same receipt, a changed one 409 with the original untouched', async () => {
    const { dispatchId, runId } = await waitingDispatch();
    const before = await table.getStored(dispatchId);
    const body: OperatorReceiptBody = operatorReceiptBodyFactory({ receiptId: 'rc-accept', runId, note: 'read the report' });

    const first = await postReceipt(dispatchId, body);
    const retry = await postReceipt(dispatchId, body);
    const changed = await postReceipt(dispatchId, { ...body, state: 'rejected' });

    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ receiptId: 'rc-accept', dispatchId, origin: 'planner', runId, kind: 'artifact_acceptance', state: 'accepted', basis: 'operator_attestation' });
    expect(retry).toEqual({ status: 200, body: first.body });
    expect(changed.status).toBe(409);
    expect(changed.body).toMatchObject({ error: { code: 'conflict' } });

    const current = await view(dispatchId);
    expect(current.operatorReceipts).toEqual([first.body]);
    expect(current.artifactAcceptance).toEqual({ state: 'accepted', receiptId: 'rc-accept', basis: 'operator_attestation' });
    // An acceptance says nothing about delivery; the receipt never touched the dispatch's hot state.
    expect(current.ownerDelivery).toEqual({ state: 'unconfirmed', receiptId: null, basis: null });
    expect((await table.getStored(dispatchId))?.version).toBe(before?.version);
  });

  it('stores exactly one receipt when 8 writers race on one receiptId with different payloads', async () => {
    const { dispatchId, runId } = await waitingDispatch();
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, writer) =>
        postReceipt(dispatchId, operatorReceiptBodyFactory({ receiptId: 'rc-race', runId, kind: 'owner_delivery', state: 'confirmed', evidenceRef: `out/${writer}.md`, verifiedBy: `op-${writer}` })),
      ),
    );

    expect(answers.filter((answer) => answer.status === 201)).toHaveLength(1);
    expect(answers.filter((answer) => answer.status === 409)).toHaveLength(7);
    const winner = answers.find((answer) => answer.status === 201)?.body;
    expect(await table.listOperatorReceipts(dispatchId)).toEqual([winner]);
    expect((await view(dispatchId)).ownerDelivery).toMatchObject({ state: 'confirmed', receiptId: 'rc-race' });
  });

  it('answers 404 for another run and for another origin, 422 for a confirmed delivery without evidence, 400 for a body that is not JSON — recording nothing', async () => {
    const { dispatchId, runId } = await waitingDispatch();
    const wrongRun = await postReceipt(dispatchId, operatorReceiptBodyFactory({ runId: `${runId}-other` }));
    const otherOrigin = await postReceipt(dispatchId, operatorReceiptBodyFactory({ runId }), 'billing');
    const unknown = await postReceipt(uniqueName('d-none'), operatorReceiptBodyFactory({ runId }));
    const noEvidence = await postReceipt(dispatchId, operatorReceiptBodyFactory({ runId, kind: 'owner_delivery', state: 'confirmed' }));
    const blankEvidence = await postReceipt(dispatchId, operatorReceiptBodyFactory({ runId, kind: 'owner_delivery', state: 'confirmed', evidenceRef: '  ' }));
    const unsafe = await postReceipt(dispatchId, operatorReceiptBodyFactory({ runId, kind: 'owner_delivery', state: 'confirmed', evidenceRef: '%2e%2e/x' }));
    const notJson = await postReceipt(dispatchId, '{"receiptId": ');

    expect([wrongRun.status, otherOrigin.status, unknown.status]).toEqual([404, 404, 404]);
    // Another origin's dispatch and an unknown one look alike: existence never leaks.
    expect(otherOrigin.body.error).toMatchObject({ code: 'not_found' });
    expect(Object.keys(otherOrigin.body)).toEqual(Object.keys(unknown.body));
    expect([noEvidence.status, blankEvidence.status, unsafe.status, notJson.status]).toEqual([422, 422, 422, 400]);
    expect(await table.listOperatorReceipts(dispatchId)).toEqual([]);
  });

  it('reads a receipt back, through a freshly built client and table, exactly as it was returned', async () => {
    const { dispatchId, runId } = await waitingDispatch();
    const recorded = await postReceipt(dispatchId, operatorReceiptBodyFactory({ receiptId: 'rc-durable', runId, kind: 'owner_delivery', state: 'failed', note: 'the owner never got it' }));
    expect(recorded.status).toBe(201);

    const fresh = localClients(testEngines());
    try {
      const freshTable = new LedgerTable(DynamoDBDocumentClient.from(fresh.dynamodb), { tableName: t.platform.resources.ledgerTable, retentionSeconds: 86_400 });
      const stored: OperatorReceipt[] = await freshTable.listOperatorReceipts(dispatchId);
      expect(stored).toEqual([recorded.body]);
      expect(stored[0]).toMatchObject({ evidenceRef: null, note: 'the owner never got it', basis: 'operator_attestation' });
    } finally {
      fresh.destroy();
    }
  });

  it('publishes Receipt Recorded from the stream, with one eventId however often the receipt is posted', async () => {
    const { dispatchId, runId } = await waitingDispatch();
    const body = operatorReceiptBodyFactory({ receiptId: 'rc-event', runId, kind: 'owner_delivery', state: 'confirmed', evidenceRef: 'out/report.md' });
    const recorded = await postReceipt(dispatchId, body);
    expect((await postReceipt(dispatchId, body)).status).toBe(200);

    const published = await eventually('Receipt Recorded in the event log', async () => {
      const found = eventsOf(dispatchId).filter((event) => event['detail-type'] === 'Receipt Recorded');
      return found.length > 0 ? found : undefined;
    });
    expect(published[0]?.detail).toEqual({
      eventId: expect.stringMatching(/^[0-9a-f]{32}$/),
      at: recorded.body.recordedAt,
      dispatchId,
      origin: 'planner',
      receiptId: 'rc-event',
      kind: 'owner_delivery',
      state: 'confirmed',
    });
    // Other events of the dispatch keep coming in the same log; give the retry's would-be event time to show.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const ids = eventsOf(dispatchId)
      .filter((event) => event['detail-type'] === 'Receipt Recorded')
      .map((event) => event.detail.eventId);
    expect(new Set(ids).size).toBe(1);
  });
});
