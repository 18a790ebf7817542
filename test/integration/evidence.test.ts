import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { DispatchView } from '../../shared/dispatch/view.js';
import { eventually, startTestPlatform, type TestPlatform } from '../support/platform.js';
import { uniqueName } from '../support/engines.js';

/** The post-condition on the local platform: the platform looks for the evidence itself. */
let t: TestPlatform;
const emf: string[] = [];

beforeAll(async () => {
  // Powertools' dev mode writes EMF to console.log: the test reads the metrics instead of printing them.
  vi.spyOn(console, 'log').mockImplementation((line: unknown) => {
    if (typeof line === 'string' && line.includes('"_aws"')) emf.push(line);
  });
  t = await startTestPlatform({ POWERTOOLS_DEV: 'true', POWERTOOLS_METRICS_DISABLED: 'false' });
});
afterAll(async () => {
  await t.stop();
  vi.restoreAllMocks();
});

const GRACE = 3;
const dispatch = (behavior: string, expectedEvidence: string[]) => ({
  dispatchId: uniqueName('ev'),
  origin: 'planner',
  target: 'demo-agent',
  task: { behavior },
  expectedEvidence,
  timeouts: { stallAfterSeconds: 30, deliveryGraceSeconds: GRACE },
});

const view = (dispatchId: string): Promise<DispatchView> => t.view(dispatchId);
const viewWhen = (dispatchId: string, done: (view: DispatchView) => boolean) => t.viewWhen(dispatchId, done);

const eventsOf = (dispatchId: string): Array<{ 'detail-type': string; detail: Record<string, unknown> }> =>
  readFileSync(t.platform.info.eventLog, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { 'detail-type': string; detail: Record<string, unknown> })
    .filter((event) => event.detail.dispatchId === dispatchId);

async function objectsUnder(prefix: string): Promise<string[]> {
  const listed = await t.clients.s3.send(new ListObjectsV2Command({ Bucket: t.platform.resources.evidenceBucket, Prefix: prefix }));
  return (listed.Contents ?? []).map((object) => object.Key ?? '');
}

/** A PUT with the path sent byte for byte (fetch would normalise `..`, `.` and `%2e%2e` before sending). */
function put(path: string, body = 'x'): Promise<number> {
  const { hostname, port } = new URL(t.platform.info.apiUrl);
  return new Promise((resolve, reject) => {
    const request = httpRequest({ hostname, port, path, method: 'PUT', headers: { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body) } }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
    });
    request.on('error', reject);
    request.end(body);
  });
}

describe('evidence and the post-condition check', () => {
  it('calls a clean completion without its files an orphan after the grace window — not before — with one event and the metric', async () => {
    const message = dispatch('complete_without_evidence', ['out/report.md']);
    await t.send(JSON.stringify(message));

    const completed = await viewWhen(message.dispatchId, (current) => current.execution.status === 'completed');
    const completedAt = Date.parse(completed.execution.completedAt ?? '');
    const orphan = await viewWhen(message.dispatchId, (current) => current.evidence.outcome === 'orphan_no_delivery');

    expect(orphan.evidence).toMatchObject({ expected: ['out/report.md'], found: [], missing: ['out/report.md'] });
    expect(orphan.gate.satisfied).toBe(false);
    const orphaned = await eventually('the Dispatch Orphaned event', async () => {
      const found = eventsOf(message.dispatchId).filter((event) => event['detail-type'] === 'Dispatch Orphaned');
      return found.length > 0 ? found : undefined;
    });
    expect(orphaned).toHaveLength(1);
    expect(orphaned[0]?.detail).toMatchObject({ expected: ['out/report.md'], missing: ['out/report.md'], runId: orphan.runId });
    // Decided when the grace window had closed, not before: the check's own time is the event's `at`.
    expect(Date.parse(String(orphaned[0]?.detail.at)) - completedAt).toBeGreaterThanOrEqual(GRACE * 1000);
    // The publisher flushes its metrics when its batch is done: after the events are on the bus and the
    // counters of GET /counts are written, so the line may come a moment after the event.
    const metric = await eventually('the OrphanedDispatches metric line', async () => emf.map((line) => JSON.parse(line) as Record<string, unknown>).find((entry) => 'OrphanedDispatches' in entry));
    expect(metric).toMatchObject({ OrphanedDispatches: 1, Target: 'demo-agent', _aws: { CloudWatchMetrics: [{ Namespace: 'DispatchLedger', Dimensions: [['Target']] }] } });
  });

  it('finds the files of complete runs itself: handled with a dispatch_completed receipt, zero orphans across many', async () => {
    const messages = Array.from({ length: 8 }, () => dispatch('complete', ['out/report.md', 'data/table.csv']));
    for (const message of messages) await t.send(JSON.stringify(message));

    const views = await Promise.all(messages.map((message) => viewWhen(message.dispatchId, (current) => current.evidence.outcome !== 'pending' && current.execution.status === 'completed')));

    expect(views.map((current) => current.evidence.outcome)).toEqual(messages.map(() => 'handled'));
    for (const handled of views) {
      expect(handled.evidence.found.slice().sort()).toEqual(['data/table.csv', 'out/report.md']);
      expect(handled.receipts.map((receipt) => receipt.event)).toEqual(['dispatch_written', 'dispatch_submitted', 'dispatch_completed']);
      expect(handled.gate).toEqual({ satisfied: true, reasons: [] });
      // Completion and evidence are not acceptance or delivery.
      expect(handled.artifactAcceptance.state).toBe('unverified');
      expect(handled.ownerDelivery.state).toBe('unconfirmed');
    }
    await eventually('the Dispatch Handled events', async () =>
      messages.every((message) => eventsOf(message.dispatchId).some((event) => event['detail-type'] === 'Dispatch Handled')) ? true : undefined,
    );
    expect(messages.flatMap((message) => eventsOf(message.dispatchId)).filter((event) => event['detail-type'] === 'Dispatch Orphaned')).toEqual([]);
  });

  it('fails the gate of a handled dispatch once its owner marks a file superseded; an unsafe ref is 422', async () => {
    const message = dispatch('complete', ['out/report.md']);
    await t.send(JSON.stringify(message));
    const handled = await viewWhen(message.dispatchId, (current) => current.evidence.outcome === 'handled');
    expect(handled.gate.satisfied).toBe(true);
    const mark = (body: unknown) =>
      fetch(`${t.platform.info.apiUrl}/dispatches/${message.dispatchId}/evidence-status`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-ledger-origin': 'planner' },
        body: JSON.stringify(body),
      }).then((response) => response.status);

    expect(await mark({ ref: 'out/report.md', status: 'superseded', reason: 'a newer report replaces it' })).toBe(200);
    expect(await mark({ ref: '../report.md', status: 'invalid', reason: 'x' })).toBe(422);
    // A reason is kept whole up to the 500 characters the API takes (was: cut to 300 without a word).
    const because = `${'because '.repeat(62)}done`;
    const marked = await fetch(`${t.platform.info.apiUrl}/dispatches/${message.dispatchId}/evidence-status`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-ledger-origin': 'planner' },
      body: JSON.stringify({ ref: 'out/report.md', status: 'superseded', reason: because }),
    });
    expect([because.length, marked.status, ((await marked.json()) as { reason: string }).reason]).toEqual([500, 200, because]);

    const after = await view(message.dispatchId);
    expect(after.evidence.invalid).toEqual(['out/report.md']);
    expect(after.gate.satisfied).toBe(false);
    expect(after.gate.reasons.join(' ')).toContain('evidence marked invalid');
  });

  it('never calls a run with nothing expected handled', async () => {
    const message = dispatch('complete', []);
    await t.send(JSON.stringify(message));
    const done = await viewWhen(message.dispatchId, (current) => current.execution.status === 'completed');
    expect(done.evidence.outcome).toBe('unverified');
    expect(done.gate.satisfied).toBe(false);
  });

  it('refuses unsafe refs with 422 and writes nothing', async () => {
    const message = dispatch('stall', []);
    await t.send(JSON.stringify(message));
    const running = await viewWhen(message.dispatchId, (current) => current.phase === 'submitted');
    const base = `/dispatches/${message.dispatchId}/evidence`;
    const run = `?runId=${running.runId ?? ''}`;

    const refused = await Promise.all(
      ['../x', 'a%5Cb', 'a/./b', '%2e%2e/x', 'a%00b', `${'long/'.repeat(110)}x`, 'a//b', '%2Fabs'].map((ref) => put(`${base}/${ref}${run}`)),
    );

    expect(refused).toEqual(refused.map(() => 422));
    expect(await objectsUnder(`evidence/${message.dispatchId}/`)).toEqual([]);
    expect(await put(`${base}/out/ok.md${run}`)).toBe(201);
    // One object, under the attempt's root, named by the hash of its bytes and then its ref.
    expect(await objectsUnder(`evidence/${message.dispatchId}/`)).toEqual([expect.stringMatching(new RegExp(`^evidence/${message.dispatchId}/1/[0-9a-f]{64}/out/ok\\.md$`))]);
  });

  it('does not count evidence from a superseded run for the new attempt (409, nothing written)', async () => {
    const message = dispatch('stall', ['out/report.md']);
    await t.send(JSON.stringify(message));
    const first = await viewWhen(message.dispatchId, (current) => current.phase === 'submitted');
    const forced = await fetch(`${t.platform.info.apiUrl}/dispatches/${message.dispatchId}/redispatch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-ledger-origin': 'planner' },
      body: JSON.stringify({ reason: 'wedged', force: true }),
    });
    expect(forced.status).toBe(202);
    await viewWhen(message.dispatchId, (current) => current.attempt === 2 && current.phase === 'submitted');

    const status = await put(`/dispatches/${message.dispatchId}/evidence/out/report.md?runId=${first.runId ?? ''}`);

    expect(status).toBe(409);
    expect(await objectsUnder(`evidence/${message.dispatchId}/`)).toEqual([]);
  });
});
