import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker, memoryStore, sigv4Signer, type ListeningWorker, type LogLine, type RunFunction, type Signer } from '@dispatch-ledger/worker';
import { localClients, type LocalClients } from '../../local/clients.js';
import { LOCAL_REGION } from '../../local/engines/index.js';
import { startPlatform, type RunningPlatform } from '../../local/platform.js';
import { signedFetch, type LocalCredential } from '../../local/runtime/sigv4.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import type { DispatchView } from '../../shared/dispatch/view.js';
import { uniqueName, testEngines } from '../support/engines.js';
import { eventually } from '../support/eventually.js';

/**
 * The kit's signer against `ledger local up --sigv4` (CONTRACT §2 v2): the local API verifies SigV4 for
 * service `lambda` as a function URL with AWS_IAM auth does, and takes a target's callbacks only from
 * the principal registered for that target. The platform makes credentials for the target
 * `demo-agent`; here that name is registered to a kit worker, which signs with them.
 */
let platform: RunningPlatform;
let clients: LocalClients;
let target: LocalCredential;
let planner: LocalCredential;
const stateDir = mkdtempSync(join(tmpdir(), 'worker-sigv4-'));
const workers: ListeningWorker[] = [];

beforeAll(async () => {
  platform = await startPlatform({
    stateDir,
    tickSeconds: 1,
    log: () => undefined,
    engines: testEngines(),
    prefix: uniqueName('t'),
    dispatchVisibilityTimeoutSeconds: 2,
    sigv4: true,
    environment: { SUBMIT_RETRY_DELAYS_SECONDS: '1,1,1', CLAIM_SECONDS: '2', TARGET_TIMEOUT_MS: '2000', POWERTOOLS_LOG_LEVEL: 'ERROR', POWERTOOLS_METRICS_DISABLED: 'true' },
  });
  clients = localClients(testEngines());
  const targetCredential = platform.credentials?.targets['demo-agent'];
  const plannerCredential = platform.credentials?.origins['planner'];
  if (!targetCredential || !plannerCredential) throw new Error('a --sigv4 platform gives the demo-agent target and planner credentials');
  target = targetCredential;
  planner = plannerCredential;
});
afterAll(async () => {
  for (const worker of workers) await worker.close();
  clients?.destroy();
  await platform?.stop();
  rmSync(stateDir, { recursive: true, force: true });
});

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/** A kit worker registered as `demo-agent`: it writes out/report.md and completes. */
async function startSigningKit(signer: Signer | undefined): Promise<{ log: LogLine[]; worker: ListeningWorker }> {
  const log: LogLine[] = [];
  const run: RunFunction = async (_task, ctx) => {
    ctx.heartbeat();
    await ctx.putEvidence('out/report.md', `# Signed report of ${ctx.runId}\n`);
    return { summary: 'signed and delivered' };
  };
  const worker = await createWorker({ name: 'kit-signed', run, store: memoryStore(), log: (line) => void log.push(line), ...(signer ? { signer } : {}) }).listen();
  workers.push(worker);
  const table = new LedgerTable(DynamoDBDocumentClient.from(clients.dynamodb), { tableName: platform.resources.ledgerTable, retentionSeconds: 86_400 });
  await table.putTarget({ name: 'demo-agent', kind: 'http', baseUrl: worker.url });
  return { log, worker };
}

async function view(dispatchId: string, query = ''): Promise<DispatchView> {
  const response = await signedFetch(`${platform.info.apiUrl}/dispatches/${dispatchId}${query}`, { method: 'GET' }, { credentials: planner, region: LOCAL_REGION });
  if (response.status !== 200) throw new Error(`GET /dispatches/${dispatchId} → ${response.status}`);
  return (await response.json()) as DispatchView;
}
const viewWhen = (dispatchId: string, done: (current: DispatchView) => boolean) => eventually(`dispatch ${dispatchId}`, () => view(dispatchId), { until: done });

async function send(dispatchId: string): Promise<void> {
  const message = { dispatchId, origin: 'planner', target: 'demo-agent', task: { goal: 'signed' }, expectedEvidence: ['out/report.md'], timeouts: { stallAfterSeconds: 30, deliveryGraceSeconds: 3 } };
  await clients.sqs.send(new SendMessageCommand({ QueueUrl: platform.info.dispatchQueueUrl, MessageBody: JSON.stringify(message) }));
}

describe('the worker kit signing its callbacks (SigV4, service lambda)', () => {
  it('is taken by a --sigv4 API as the registered target: events and the upload verified, the dispatch handled', async () => {
    const { log } = await startSigningKit(sigv4Signer({ region: LOCAL_REGION, credentials: { accessKeyId: target.accessKeyId, secretAccessKey: target.secretAccessKey, ...(target.sessionToken ? { sessionToken: target.sessionToken } : {}) } }));
    const dispatchId = uniqueName('signed');
    await send(dispatchId);

    const handled = await viewWhen(dispatchId, (current) => current.execution.status === 'completed' && current.evidence.outcome !== 'pending');
    expect(handled.evidence).toMatchObject({ outcome: 'handled', found: ['out/report.md'] });
    expect(handled.evidence.files.map((file) => file.sha256)).toEqual([sha256(`# Signed report of ${dispatchId}:1\n`)]);
    expect(handled.execution.result?.summary).toBe('signed and delivered');
    expect(log.filter((line) => line.msg === 'callback_refused')).toEqual([]);
  });

  it('is refused unsigned (403): the run fails saying so, and the ledger learns it by looking the run up', async () => {
    const { log } = await startSigningKit(undefined);
    const dispatchId = uniqueName('unsigned');
    await send(dispatchId);
    const runId = `${dispatchId}:1`;

    const refusals = await eventually('the refused final event', () => {
      const lines = log.filter((line) => line.msg === 'callback_refused' && line['runId'] === runId);
      return lines.some((line) => line['type'] === 'failed') ? lines : undefined;
    });
    expect(new Set(refusals.map((line) => line['status']))).toEqual(new Set([403]));
    // Its events never reach the ledger, so only a lookup (here the origin's refresh) can tell it; the
    // monitor would look only after the 30 s stall window.
    await viewWhen(dispatchId, (current) => current.phase === 'submitted' && current.runId === runId);
    const refreshed = await view(dispatchId, '?refresh=true');
    expect(refreshed.execution).toMatchObject({ status: 'failed', nativeStatus: 'failed', monitorStatus: null });
    expect(refreshed.execution.result?.summary).toMatch(/^uploading out\/report\.md: the ledger refused it \(HTTP 403/);
  });
});
