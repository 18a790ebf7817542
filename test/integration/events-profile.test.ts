import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestPlatform, type TestPlatform } from '../support/platform.js';
import { uniqueName } from '../support/engines.js';

/**
 * CONTRACT §3 v2: a deployment's `events` profile decides what goes on the bus; the local platform
 * honours it as the stack does (PUBLISHED_EVENTS, set by `ledger local up --events`). Unpublished
 * changes stay visible through the API.
 */
let t: TestPlatform;

beforeAll(async () => {
  t = await startTestPlatform({ PUBLISHED_EVENTS: 'attention' });
});
afterAll(() => t.stop());

interface LoggedEvent {
  readonly 'detail-type': string;
  readonly detail: { readonly dispatchId?: string; readonly messageId?: string };
}
const logged = (): LoggedEvent[] =>
  readFileSync(t.platform.info.eventLog, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as LoggedEvent);

describe('the events profile on the local platform (attention)', () => {
  it('publishes a handled lifecycle as one Dispatch Handled, and a rejection, while the view keeps every claim', async () => {
    const dispatchId = uniqueName('d');
    await t.send(JSON.stringify({ dispatchId, origin: 'planner', target: 'demo-agent', task: { goal: 'a report' }, expectedEvidence: ['out/report.md'] }));
    const handled = await t.viewWhen(dispatchId, (view) => view.evidence.outcome === 'handled');
    expect(handled.execution.nativeStatus).toBe('completed');
    expect(handled.receipts.map((receipt) => receipt.event)).toEqual(expect.arrayContaining(['dispatch_submitted', 'dispatch_completed']));

    const messageId = await t.send('not json at all');
    const types = await eventually(
      'Dispatch Handled and Message Rejected on the bus',
      async () => {
        const events = logged();
        const mine = events.filter((event) => event.detail.dispatchId === dispatchId).map((event) => event['detail-type']);
        const rejected = events.some((event) => event['detail-type'] === 'Message Rejected' && event.detail.messageId === messageId);
        return mine.includes('Dispatch Handled') && rejected ? mine : undefined;
      },
    );
    // Submitted, Run Completed and Result Ready were committed (the view shows them) but not published.
    expect(types).toEqual(['Dispatch Handled']);
  });
});
