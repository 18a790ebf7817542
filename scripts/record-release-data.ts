import { ScanCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLedgerClient, isLedgerApiError } from '@dispatch-ledger/client';
import { runDemo } from '../cli/demo.js';
import { localClients } from '../local/clients.js';
import { startEngines } from '../local/engines/index.js';
import { startPlatform } from '../local/platform.js';
import { projectRoot } from '../local/paths.js';
import { ensureLedgerTable } from '../local/resources.js';
import { apiDepsOn, loadItems, nextCursor, readsOf, readThrough, RELEASE_DATA_FILE, type RecordedRead, type ReleaseData } from '../test/support/release-data.js';

/**
 * `npx tsx --conditions=@dispatch-ledger/source scripts/record-release-data.ts`: writes
 * test/fixtures/release-data.json from this commit — the items the local platform and its demo (every
 * phase, past attempts, receipts, inbox entries, slots, rejections) leave in the ledger table, and the
 * answers of every read route over them (test/support/release-data.ts). Run it once per release whose
 * data later code must still read; never to make a failing release-data.test pass.
 */
const RETENTION_SECONDS = 90 * 86_400;
/** Most pages followed per list. */
const MAX_PAGES = 30;

/**
 * What the demo leaves out: a past attempt (a blocked dispatch redispatched) and inbox entries in each
 * state (one acked, one released, one still claimed under the longest lease (900 s), the rest pending).
 */
async function beyondTheDemo(local: Parameters<typeof createLedgerClient>[0]['local']): Promise<void> {
  const planner = createLedgerClient({ origin: 'planner', ...(local ? { local } : {}) });
  const until = async (what: string, probe: () => Promise<boolean>): Promise<void> => {
    for (let tries = 0; tries < 120; tries += 1) {
      if (await probe().catch((error: unknown) => (isLedgerApiError(error) && error.status === 404 ? false : Promise.reject(error)))) return;
      await sleep(500);
    }
    throw new Error(`record-release-data: ${what} did not happen`);
  };
  await planner.dispatch({ dispatchId: 'd-release-redone', target: 'demo-agent', task: { behavior: 'reject' } });
  await until('d-release-redone blocked', async () => (await planner.check('d-release-redone')).phase === 'blocked');
  await planner.redispatch('d-release-redone', { reason: 'a past attempt for the release data' });
  await until('d-release-redone submitted again', async () => (await planner.check('d-release-redone')).attempt === 2);
  for (let index = 0; index < 4; index += 1) {
    await planner.dispatch({ dispatchId: `d-release-inbox-${index}`, target: 'demo-agent', task: { behavior: 'complete' }, resultDelivery: 'inject' });
  }
  for (let index = 0; index < 4; index += 1) {
    await until(`d-release-inbox-${index} completed`, async () => (await planner.check(`d-release-inbox-${index}`)).execution.status === 'completed');
  }
  await sleep(2_000);
  const claim = await planner.inbox.claim({ mode: 'inject', max: 3, leaseSeconds: 900 });
  const [acked, released] = claim.results;
  if (!claim.claimToken || !acked || !released) throw new Error('record-release-data: the inbox gave fewer than two results');
  await planner.inbox.ack(acked.resultId, claim.claimToken);
  await planner.inbox.release(released.resultId, claim.claimToken, 'not now');
  planner.close();
}

const work = mkdtempSync(join(tmpdir(), 'ledger-release-data-'));
const engines = await startEngines({ logDir: join(work, 'engines') });
try {
  const platform = await startPlatform({
    stateDir: work,
    tickSeconds: 1,
    log: () => undefined,
    engines,
    prefix: 'release',
    environment: { POWERTOOLS_LOG_LEVEL: 'ERROR', POWERTOOLS_METRICS_DISABLED: 'true' },
  });
  try {
    await runDemo(
      { status: 'ready', pid: process.pid, startedAt: new Date().toISOString(), pids: platform.pids, info: platform.info, logDir: work, invocationLog: platform.invocationLog, ledgerTable: platform.resources.ledgerTable },
      (line) => process.stderr.write(`${line}\n`),
    );
    await beyondTheDemo(platform.info);
    // The publisher's counts and the monitor's last actions settle.
    await sleep(5_000);
  } finally {
    await platform.stop();
  }

  const { dynamodb } = localClients(engines);
  const items: Array<Record<string, AttributeValue>> = [];
  let start: Record<string, AttributeValue> | undefined;
  do {
    const page = await dynamodb.send(new ScanCommand({ TableName: platform.resources.ledgerTable, ExclusiveStartKey: start }));
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start);
  const keyOf = (item: Record<string, AttributeValue>): string => `${item.pk?.S ?? ''}\u0000${item.sk?.S ?? ''}`;
  items.sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0));

  // The reads, over a copy loaded as the test loads it: nothing runs on it.
  const replay = (await ensureLedgerTable(dynamodb, 'release-replay', { ttl: false, stream: false })).name;
  await loadItems(dynamodb, replay, items);
  const readAt = new Date();
  const deps = apiDepsOn(dynamodb, replay, readAt, RETENTION_SECONDS);
  // A dispatch's state item: pk `D#<dispatchId>`, sk `STATE`, its origin in `originKey` (`O#<origin>#<shard>`).
  const dispatches = items
    .map((item) => unmarshall(item))
    .filter((item) => item.sk === 'STATE' && typeof item.pk === 'string' && typeof item.originKey === 'string')
    .map((item) => ({ dispatchId: String(item.pk).slice('D#'.length), origin: String(item.originKey).split('#')[1] ?? '' }));
  const reads: RecordedRead[] = [];
  for (const read of readsOf(dispatches)) {
    let query = read.query;
    for (let page = 0; page < MAX_PAGES; page += 1) {
      const answer = await readThrough(deps, { ...read, query });
      reads.push({ ...read, query, answer });
      const cursor = nextCursor(answer.body);
      if (cursor === undefined) break;
      query = { ...read.query, cursor };
    }
  }
  const commit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: projectRoot, encoding: 'utf8' }).trim();
  const data: ReleaseData = { commit, readAt: readAt.toISOString(), retentionSeconds: RETENTION_SECONDS, items, reads };
  writeFileSync(RELEASE_DATA_FILE, `${JSON.stringify(data, null, 1)}\n`);
  process.stderr.write(`wrote ${RELEASE_DATA_FILE}: ${items.length} items, ${dispatches.length} dispatches, ${reads.length} reads (${reads.filter((read) => read.answer.status !== 200).length} not 200)\n`);
} finally {
  await engines.stop();
  rmSync(work, { recursive: true, force: true });
}
