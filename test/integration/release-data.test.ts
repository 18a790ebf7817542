import { readFileSync } from 'node:fs';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureLedgerTable } from '../../local/resources.js';
import type { ApiDeps } from '../../shared/api/routes.js';
import { engineClients, uniqueName } from '../support/engines.js';
import { apiDepsOn, loadItems, readThrough, RELEASE_DATA_FILE, type ReleaseData } from '../support/release-data.js';

/**
 * Data the previous release wrote still reads as it did (issue 33, before the storage restructuring):
 * test/fixtures/release-data.json holds the ledger table a release's local platform and demo left and
 * that release's answers to every read route over it (scripts/record-release-data.ts). Loaded into a
 * fresh table, each read — views as owner and operator, paged lists, histories, inboxes, the operator's
 * lists, every cursor the release issued — answers exactly the same, at the same clock.
 */
const data = JSON.parse(readFileSync(RELEASE_DATA_FILE, 'utf8')) as ReleaseData;
const clients = engineClients();
let deps: ApiDeps;

beforeAll(async () => {
  const table = (await ensureLedgerTable(clients.dynamodb, uniqueName('release-data'), { ttl: false, stream: false })).name;
  await loadItems(clients.dynamodb, table, data.items);
  deps = apiDepsOn(clients.dynamodb, table, new Date(data.readAt), data.retentionSeconds);
});
afterAll(() => clients.destroy());

describe(`data written by the release before (${data.commit.slice(0, 7)})`, () => {
  it('holds every kind of item the ledger writes, and reads that follow cursors it issued', () => {
    const items = data.items.map((item) => unmarshall(item));
    const kinds = new Set(items.map((item) => `${String(item.pk).split('#')[0]}|${String(item.sk).split('#')[0]}`));
    for (const kind of ['D|MSG', 'D|STATE', 'D|ATT', 'D|CHECK', 'D|UPLOAD', 'D|RBODY', 'D|OR', 'D|MA', 'REJ|REJECTION', 'OREJ|ORIGIN', 'SLOT|SLOTS', 'LIMITED|TARGETS', 'T|TARGET', 'COUNTS|COUNTS']) expect(kinds, kind).toContain(kind);
    const phases = new Set(items.filter((item) => item.sk === 'STATE').map((item) => String(item.phase)));
    for (const phase of ['accepted', 'submitted', 'blocked']) expect(phases, phase).toContain(phase);
    const inboxStates = new Set(data.reads.filter((read) => read.path.endsWith('/inbox')).flatMap((read) => (read.answer.body as { items: Array<{ state: string }> }).items.map((entry) => entry.state)));
    for (const state of ['pending', 'claimed', 'delivered']) expect(inboxStates, state).toContain(state);
    expect(data.reads.filter((read) => read.query.cursor !== undefined).length).toBeGreaterThan(10);
  });

  it('answers every read as that release answered it', async () => {
    expect(data.reads.length).toBeGreaterThan(100);
    for (const read of data.reads) {
      const { answer, ...request } = read;
      expect(await readThrough(deps, request), `${request.origin ?? 'operator'} GET ${request.path}?${new URLSearchParams(request.query).toString()}`).toEqual(answer);
    }
  });
});
