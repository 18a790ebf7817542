import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll } from 'vitest';
import { ensureBucket, ensureLedgerTable } from '../../local/resources.js';
import { LedgerDueIndex } from '../../shared/adapters/due-index.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { S3Blobs } from '../../shared/adapters/s3-blobs.js';
import type { Caller } from '../../shared/api/caller.js';
import type { DispatchState } from '../../shared/dispatch/state.js';
import { takeDispatchMessage, type IntakeDeps } from '../../shared/usecases/intake.js';
import { evidenceCheckOf, evidenceKey } from '../../shared/usecases/evidence-check.js';
import { engineClients, loopbackOnly, uniqueName, testEngines } from './engines.js';
import { intakeDepsFactory } from './factories.js';
import { ScriptedTarget } from './scripted-target.js';

/**
 * One ledger on DynamoDB Local and fauxqs S3 for a test file, with a target in hand whose answers the
 * test chooses (`target`), a clock the test moves (`tick`, `setClock`), and the intake, monitor and
 * route dependencies built on them. Importing it registers the file's setup and teardown.
 */
export const clients = engineClients();
export const dynamodb = loopbackOnly(new DynamoDBClient({ region: 'us-east-1', endpoint: testEngines().dynamodbEndpoint, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }));
export const documents = DynamoDBDocumentClient.from(dynamodb, { marshallOptions: { removeUndefinedValues: true } });
export let tableName: string;
export let table: LedgerTable;
export let blobs: S3Blobs;
export let clock = new Date('2026-12-01T10:00:00Z');
/** Sets the test clock (a test file cannot assign an imported binding). */
export const setClock = (at: Date) => {
  clock = at;
};
export const tick = (seconds: number) => {
  clock = new Date(clock.getTime() + seconds * 1000);
};

export let target: ScriptedTarget;

beforeAll(async () => {
  tableName = uniqueName('hardening');
  await ensureLedgerTable(clients.dynamodb, tableName);
  const bucket = await ensureBucket(clients.s3, uniqueName('blobs'));
  table = new LedgerTable(documents, { tableName, retentionSeconds: 30 * 86_400 });
  blobs = new S3Blobs(clients.s3, bucket);
  await table.putTarget({ name: 'scripted', kind: 'http', baseUrl: 'http://127.0.0.1:9' });
});
afterAll(() => {
  clients.destroy();
  dynamodb.destroy();
});

export const deps = (): IntakeDeps => intakeDepsFactory({ store: table, blobs, targetFor: () => target, principals: table, now: () => clock });
export const monitorDeps = () => ({ ...deps(), dueIndex: new LedgerDueIndex(documents, tableName), pageSize: 100 });
export const open: Caller = { kind: 'open', origin: undefined };
export const asTarget: Caller = { kind: 'principal', principal: { role: 'target', target: 'scripted' } };

export const send = (body: unknown, messageId = uniqueName('m')) => takeDispatchMessage(deps(), { messageId, body: typeof body === 'string' ? body : JSON.stringify(body), senderId: 'local' });
export const message = (extra: Record<string, unknown> = {}) => ({ dispatchId: uniqueName('d'), origin: 'planner', target: 'scripted', task: { behavior: 'complete' }, ...extra });
export const event = (dispatchId: string, seq: number, type: string, extra: Record<string, unknown> = {}) => Buffer.from(JSON.stringify({ dispatchId, seq, type, ...extra }));
export const stateOf = async (dispatchId: string) => (await table.getState(dispatchId)) as DispatchState;
/** The attempt's settled check, wherever it is recorded (the state, or an item of its own). */
export const checkOf = async (dispatchId: string) => evidenceCheckOf(table, await stateOf(dispatchId));
/** The bytes a ref's seal names (immutable under their hash): what a reader of the sealed file gets. */
export const sealedBytesOf = async (dispatchId: string, ref: string) => {
  const file = (await checkOf(dispatchId))?.files.find((candidate) => candidate.ref === ref);
  return file ? Buffer.from((await blobs.getBytes(evidenceKey(dispatchId, 1, file.sha256, ref))) ?? []).toString() : undefined;
};

export function nested(depth: number): Record<string, unknown> {
  let task: Record<string, unknown> = { leaf: true };
  for (let level = 1; level < depth; level += 1) task = { n: task };
  return task;
}

beforeAll(() => {
  target = new ScriptedTarget();
});
