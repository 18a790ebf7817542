import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import type { DispatchView } from '../../shared/dispatch/view.js';
import type { InvocationReport } from '../../local/runtime/context.js';
import { ledgerConfigFrom } from '../../shared/adapters/config.js';
import { DispatchInProgressError, takeDispatchMessage, type IntakeDeps } from '../../shared/usecases/intake.js';
import { eventually, startTestPlatform, type TestPlatform } from '../support/platform.js';
import { uniqueName } from '../support/engines.js';

const run = promisify(execFile);
let t: TestPlatform;
let table: LedgerTable;

beforeAll(async () => {
  t = await startTestPlatform();
  table = new LedgerTable(DynamoDBDocumentClient.from(t.clients.dynamodb), { tableName: t.platform.resources.ledgerTable, retentionSeconds: 86_400 });
});
afterAll(() => t.stop());

const dispatch = (overrides: Record<string, unknown> = {}) => ({
  dispatchId: uniqueName('d'),
  origin: 'planner',
  target: 'demo-agent',
  task: { goal: 'summarise the incident', behavior: 'complete' },
  ...overrides,
});

async function view(dispatchId: string, origin = 'planner'): Promise<DispatchView> {
  const { status, body } = await t.get(`/dispatches/${dispatchId}`, origin);
  if (status !== 200) throw new Error(`GET /dispatches/${dispatchId} → ${status}`);
  return body as DispatchView;
}

/** The view once the dispatch has reached a phase (the queue is polled asynchronously). */
const viewWhen = (dispatchId: string, done: (view: DispatchView) => boolean, origin = 'planner') =>
  eventually(`dispatch ${dispatchId}`, async () => {
    const current = await view(dispatchId, origin).catch(() => undefined);
    return current && done(current) ? current : undefined;
  });

const stats = async () => (await (await fetch(`${t.platform.demoAgent.url}/stats`)).json()) as { submissions: Record<string, number>; runs: Record<string, number> };

async function rejections(): Promise<Array<Record<string, unknown>>> {
  const { body } = await t.get('/rejections?limit=100');
  return (body as { items: Array<Record<string, unknown>> }).items;
}

describe('intake: every message ends as exactly one effect', () => {
  it('turns the same message delivered 3 times, 2 of them concurrently, into one dispatch, one submission, one dispatch_submitted', async () => {
    const message = dispatch();
    const body = JSON.stringify(message);
    // Concurrent deliveries run in separate Lambda execution environments: two compositions of the
    // intake's dependencies, built by functions/intake/deps.ts from the config the platform gives the intake.
    // Imported here, not at the top: its logger reads Powertools' variables, which the platform sets when it starts.
    const { CONFIG, intakeDeps } = await import('../../functions/intake/deps.js');
    const environment = (): IntakeDeps => intakeDeps(ledgerConfigFrom(t.platform.settings, CONFIG));
    const record = { messageId: 'm-same', body, senderId: 'local' };

    const concurrent = await Promise.allSettled([takeDispatchMessage(environment(), record), takeDispatchMessage(environment(), record)]);

    // One takes it. The other, if it overlapped the first, is handed back to SQS (in progress), never
    // acknowledged while the first is in flight; if it came after the first was done (two Lambda
    // environments are not in step: three test files at once made that happen, 2026-12-05), it is a duplicate.
    const taken = concurrent.flatMap((result) => (result.status === 'fulfilled' ? [result.value.outcome] : []));
    const handedBack = concurrent.flatMap((result) => (result.status === 'rejected' ? [result.reason] : []));
    expect(taken.filter((outcome) => outcome === 'submitted')).toEqual(['submitted']);
    if (handedBack.length === 1) {
      expect(taken).toEqual(['submitted']);
      expect(handedBack[0]).toBeInstanceOf(DispatchInProgressError);
    } else {
      expect(handedBack).toEqual([]);
      expect([...taken].sort()).toEqual(['duplicate', 'submitted']);
    }

    // The third delivery, through the queue and the platform's own intake handler: a no-op.
    const third = await t.send(body);
    await eventually('the third delivery to be taken', async () => {
      const reports = readFileSync(t.platform.invocationLog, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as InvocationReport);
      return reports.find((report) => report.function === 'intake' && report.items?.includes(third) && report.outcome === 'ok');
    });
    const after = await view(message.dispatchId);
    expect(after.phase).toBe('submitted');
    expect(after.receipts.map((receipt) => receipt.event)).toEqual(['dispatch_written', 'dispatch_submitted']);
    const counts = await stats();
    expect(counts.submissions[message.dispatchId]).toBe(1);
    expect(counts.runs[message.dispatchId]).toBe(1);
  });

  it('records a conflict for the same dispatchId with other content or another origin, and leaves the original untouched', async () => {
    const original = dispatch();
    await t.send(JSON.stringify(original));
    const before = await viewWhen(original.dispatchId, (current) => current.phase === 'submitted');
    const messageBefore = await table.getAcceptedMessage(original.dispatchId);

    const otherContent = await t.send(JSON.stringify({ ...original, task: { goal: 'something else', behavior: 'complete' } }));
    const otherOrigin = await t.send(JSON.stringify({ ...original, origin: 'intruder' }));

    const found = await eventually('two conflict rejections', async () => {
      const conflicts = (await rejections()).filter((rejection) => rejection.dispatchId === original.dispatchId);
      return conflicts.length === 2 ? conflicts : undefined;
    });
    expect(found.map((rejection) => rejection.messageId).sort()).toEqual([otherContent, otherOrigin].sort());
    expect(found.every((rejection) => rejection.reason === 'conflict')).toBe(true);
    expect(found.find((rejection) => rejection.messageId === otherOrigin)?.origin).toBe('intruder');
    // The original stands: its accepted message (content, origin, task) and its receipts are untouched.
    // (Its run goes on meanwhile — the demo agent reports on it — so the state itself may move.)
    expect(await table.getAcceptedMessage(original.dispatchId)).toEqual(messageBefore);
    expect((await table.getState(original.dispatchId))?.origin).toBe('planner');
    expect((await view(original.dispatchId)).receipts).toEqual(before.receipts);
  });

  it('rejects a body that is not JSON, or has no dispatchId, with the SQS message id, reason and a preview', async () => {
    const notJson = await t.send('this is { not json');
    const noId = await t.send(JSON.stringify({ origin: 'planner', target: 'demo-agent', task: {} }));

    const found = await eventually('both rejections', async () => {
      const all = await rejections();
      const mine = all.filter((rejection) => rejection.messageId === notJson || rejection.messageId === noId);
      return mine.length === 2 ? mine : undefined;
    });
    expect(found.find((rejection) => rejection.messageId === notJson)).toMatchObject({ reason: 'not_json', bodyPreview: 'this is { not json', dispatchId: null });
    expect(found.find((rejection) => rejection.messageId === noId)).toMatchObject({ reason: 'no_readable_dispatch_id', origin: 'planner' });
  });

  it('blocks invalid fields, an unknown target, a hop over budget and a target that refuses, each with its reason', async () => {
    const invalid = dispatch({ timeouts: { stallAfterSeconds: 0 }, expectedEvidence: ['../etc/passwd'] });
    const unknownTarget = dispatch({ target: 'nobody-home' });
    const parent = dispatch({ maxHops: 1 });
    const child = dispatch({ parentDispatchId: parent.dispatchId });
    const grandchild = dispatch({ parentDispatchId: child.dispatchId });
    const refused = dispatch({ task: { behavior: 'reject' } });

    for (const message of [invalid, unknownTarget, parent, refused]) await t.send(JSON.stringify(message));
    await viewWhen(parent.dispatchId, (current) => current.phase === 'submitted');
    await t.send(JSON.stringify(child));
    await viewWhen(child.dispatchId, (current) => current.phase === 'submitted');
    await t.send(JSON.stringify(grandchild));

    const blockedView = (id: string) => viewWhen(id, (current) => current.phase === 'blocked');
    const [v1, v2, v3, v4] = await Promise.all([blockedView(invalid.dispatchId), blockedView(unknownTarget.dispatchId), blockedView(grandchild.dispatchId), blockedView(refused.dispatchId)]);
    expect(v1.blockedReason).toMatch(/^invalid_fields: /);
    expect(v1.blockedReason).toContain('timeouts.stallAfterSeconds');
    expect(v1.blockedReason).toContain('expectedEvidence.0: unsafe evidence ref (dot_segment)');
    expect(v2.blockedReason).toBe('unknown_target: no target named "nobody-home" is registered');
    expect(v3.blockedReason).toBe('hop_budget_exceeded: hop 2 > maxHops 1');
    expect(v4.blockedReason).toMatch(/^target_rejected: HTTP 422/);
    for (const blockedOne of [v1, v2, v3, v4]) {
      expect(blockedOne.receipts.map((receipt) => receipt.event)).toEqual(['dispatch_written', 'dispatch_blocked']);
      expect(blockedOne.gate.satisfied).toBe(false);
    }
    const counts = await stats();
    expect(counts.submissions[grandchild.dispatchId]).toBeUndefined();
    expect(counts.submissions[child.dispatchId]).toBe(1);
  });

  it('retries a flaky submission from the ledger schedule: the retry submits once and finds the run', async () => {
    const flaky = dispatch({ task: { behavior: 'flaky_submit' } });
    await t.send(JSON.stringify(flaky));

    const submitted = await viewWhen(flaky.dispatchId, (current) => current.phase === 'submitted');

    expect(submitted.submission.attempts).toBe(2);
    expect(submitted.receipts.map((receipt) => receipt.event)).toEqual(['dispatch_written', 'dispatch_submitted']);
    const counts = await stats();
    expect(counts.submissions[flaky.dispatchId]).toBe(2);
    expect(counts.runs[flaky.dispatchId]).toBe(1);
  });

  it('shows the retries of a target that never answers, then blocks it after the budget; nothing reaches the DLQ', async () => {
    // Accepts connections and never answers: every submission times out (TARGET_TIMEOUT_MS=2000).
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as AddressInfo;
    await table.putTarget({ name: 'black-hole', kind: 'http', baseUrl: `http://127.0.0.1:${port}` });
    const lost = dispatch({ target: 'black-hole' });
    await t.send(JSON.stringify(lost));

    const retrying = await viewWhen(lost.dispatchId, (current) => current.phase === 'accepted' && current.submission.attempts >= 1);
    expect(retrying.submission.lastError).toBe("no answer within 2000 ms");
    expect(retrying.unknowns.join(' ')).toContain('the ledger retries');
    const blockedView = await viewWhen(lost.dispatchId, (current) => current.phase === 'blocked');
    silent.closeAllConnections();
    silent.close();

    // SUBMIT_RETRY_DELAYS_SECONDS=1,1,1: four attempts in all.
    expect(blockedView.submission.attempts).toBe(4);
    expect(blockedView.blockedReason).toMatch(/^retry_budget_spent: 4 submission attempts failed/);
    const queues = await Promise.all(
      [t.platform.resources.dispatchQueue.url, t.platform.resources.dlq.url].map((QueueUrl) =>
        t.clients.sqs.send(new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] })),
      ),
    );
    for (const queue of queues) {
      expect(queue.Attributes?.ApproximateNumberOfMessages).toBe('0');
      expect(queue.Attributes?.ApproximateNumberOfMessagesNotVisible).toBe('0');
    }
  });

  it('submits a dispatch sent with the AWS CLI, the way users send', async () => {
    const message = dispatch();
    await run('aws', ['--region', 'us-east-1', '--endpoint-url', t.platform.info.sqsEndpoint, 'sqs', 'send-message', '--queue-url', t.platform.info.dispatchQueueUrl, '--message-body', JSON.stringify(message)], {
      env: { ...process.env, AWS_ACCESS_KEY_ID: 'local', AWS_SECRET_ACCESS_KEY: 'local', AWS_PAGER: '' },
    });

    const submitted = await viewWhen(message.dispatchId, (current) => current.phase === 'submitted');
    // The demo agent is a worker-kit worker: its run id is `{dispatchId}:{attempt}` (CONTRACT §12).
    expect(submitted.runId).toBe(`${message.dispatchId}:1`);
  });

  it('answers another origin with the same 404 as a dispatch that does not exist', async () => {
    const message = dispatch();
    await t.send(JSON.stringify(message));
    await viewWhen(message.dispatchId, (current) => current.phase === 'submitted');

    const theirs = await t.get(`/dispatches/${message.dispatchId}`, 'someone-else');
    const nobodys = await t.get(`/dispatches/d-does-not-exist`, 'someone-else');
    const history = await t.get('/origins/planner/dispatches', 'someone-else');

    expect(theirs.status).toBe(404);
    expect(history.status).toBe(404);
    expect((theirs.body as { error: { code: string } }).error.code).toBe('not_found');
    expect(Object.keys(theirs.body as object)).toEqual(Object.keys(nobodys.body as object));
    expect(JSON.stringify(theirs.body)).not.toContain('planner');
  });

  it("lists an origin's history newest first, paginated, filtered by status", async () => {
    const origin = uniqueName('hist');
    const sent = [dispatch({ origin }), dispatch({ origin }), dispatch({ origin, target: 'nobody-home' })];
    for (const message of sent) {
      await t.send(JSON.stringify(message));
      await viewWhen(message.dispatchId, (current) => current.phase !== 'accepted', origin);
    }

    const first = await t.get(`/origins/${origin}/dispatches?limit=2`, origin);
    const page = first.body as { items: Array<{ dispatchId: string }>; cursor: string | null };
    const second = await t.get(`/origins/${origin}/dispatches?limit=2&cursor=${page.cursor ?? ''}`, origin);
    const blockedOnly = await t.get(`/origins/${origin}/dispatches?status=blocked`, origin);

    const ids = [...page.items, ...(second.body as { items: Array<{ dispatchId: string }> }).items].map((item) => item.dispatchId);
    expect(ids).toEqual(sent.map((message) => message.dispatchId).reverse());
    expect((blockedOnly.body as { items: Array<{ dispatchId: string }> }).items.map((item) => item.dispatchId)).toEqual([sent[2]?.dispatchId]);
  });
});
