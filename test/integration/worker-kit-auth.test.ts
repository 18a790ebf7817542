import { CreateSecretCommand } from '@aws-sdk/client-secrets-manager';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker, memoryStore, type ListeningWorker, type LogLine, type RunFunction } from '@dispatch-ledger/worker';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { uniqueName } from '../support/engines.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * CONTRACT V3 §8 end to end: an `http` target registered with a secret (in Secrets Manager, moto here),
 * served by the worker kit holding its secret. The ledger sends the secret's value as `authorization`;
 * while the worker does not hold that value yet (a rotation half done), it answers 401, and the ledger
 * retries the submission with backoff instead of blocking the dispatch; once the worker takes the new
 * secret (`secrets: [current, previous]`), the retry gets through and the run completes.
 */

const OLD = 'Bearer kit-rotation-old-5b1e';
const NEW = 'Bearer kit-rotation-new-c07a';

let t: TestPlatform;
let table: LedgerTable;
let worker: ListeningWorker | undefined;

beforeAll(async () => {
  // Enough one-second retries for the rotation to finish inside the budget.
  t = await startTestPlatform({ SUBMIT_RETRY_DELAYS_SECONDS: Array.from({ length: 30 }, () => '1').join(',') });
  table = new LedgerTable(DynamoDBDocumentClient.from(t.clients.dynamodb), { tableName: t.platform.resources.ledgerTable, retentionSeconds: 86_400 });
});
afterAll(async () => {
  await worker?.close();
  await t.stop();
});

describe('a kit worker with the target secret, on the ledger', () => {
  it('is retried, never blocked, while it answers 401, and runs the dispatch once it holds the secret the ledger sends', async () => {
    const secretId = uniqueName('kit-secret');
    await t.clients.secrets.send(new CreateSecretCommand({ Name: secretId, SecretString: NEW }));
    const calls: string[] = [];
    const log: LogLine[] = [];
    const run: RunFunction = async (_task, ctx) => {
      calls.push(ctx.runId);
      return { summary: 'done behind the secret' };
    };
    // Not rotated yet: the worker still holds only the old value; the ledger already reads the new one.
    const store = memoryStore();
    worker = await createWorker({ name: 'kit-auth', run, store, secret: OLD, log: (line) => void log.push(line) }).listen();
    const { port } = worker;
    await table.putTarget({ name: 'kit-auth', kind: 'http', baseUrl: worker.url, secretRef: secretId });

    const dispatchId = uniqueName('d-auth');
    await t.send(JSON.stringify({ dispatchId, origin: 'planner', target: 'kit-auth', task: { goal: 'x' }, delivery: { mode: 'detached' } }));
    const retrying = await t.viewWhen(dispatchId, (view) => view.submission.attempts >= 2);
    expect(retrying.phase).toBe('accepted');
    expect(retrying.submission.lastError).toMatch(/HTTP 401/);
    expect(log.filter((line) => line.msg === 'request_unauthorized').length).toBeGreaterThanOrEqual(2);
    expect((await store.list()).records).toEqual([]);
    expect(calls).toEqual([]);

    // The rotation reaches the worker: the new value, the old one still taken until every caller has moved.
    await worker.close();
    worker = await createWorker({ name: 'kit-auth', run, store, secrets: [NEW, OLD], log: (line) => void log.push(line) }).listen(port);

    const done = await t.viewWhen(dispatchId, (view) => view.execution.status === 'completed');
    expect(done).toMatchObject({ phase: 'submitted', runId: `${dispatchId}:1`, blockedReason: null });
    expect(done.execution.result?.summary).toBe('done behind the secret');
    expect(calls).toEqual([`${dispatchId}:1`]);
  });
});
