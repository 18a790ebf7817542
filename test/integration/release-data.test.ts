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

/**
 * What later commits changed in these answers on purpose, each applied to the recorded answers before
 * they are compared — to text only, with the origin of the object that holds it (a view, an attention
 * item). Everything else must read exactly as recorded; the fixture itself is never re-recorded to pass.
 */
const INTENDED_CHANGES: ReadonlyArray<{ readonly commit: string; readonly change: string; readonly apply: (text: string, origin: string) => string }> = [
  {
    commit: 'f22ed92',
    change: 'a command the ledger suggests for a dispatch names its origin (locally another origin answers 404)',
    apply: (text, origin) => text.replace(/(npx ledger (?:check|redispatch) \S+ (?:--refresh|--force --reason R))(?! --origin)/g, `$1 --origin ${origin}`),
  },
];

/** `answer` as the code of today answers it, by `changes`. */
function asChangedSince(answer: unknown, changes = INTENDED_CHANGES, origin = ''): unknown {
  if (typeof answer === 'string') return changes.reduce((text, intended) => intended.apply(text, origin), answer);
  if (Array.isArray(answer)) return answer.map((item) => asChangedSince(item, changes, origin));
  if (typeof answer !== 'object' || answer === null) return answer;
  const own = typeof (answer as { origin?: unknown }).origin === 'string' ? String((answer as { origin: string }).origin) : origin;
  return Object.fromEntries(Object.entries(answer).map(([key, value]) => [key, asChangedSince(value, changes, own)]));
}
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

  it('changes on purpose only what INTENDED_CHANGES names: each finds text to change in the recorded answers', () => {
    for (const intended of INTENDED_CHANGES) {
      const recorded = JSON.stringify(data.reads.map((read) => read.answer));
      expect(JSON.stringify(data.reads.map((read) => asChangedSince(read.answer, [intended]))), intended.change).not.toBe(recorded);
    }
  });

  it('answers every read as that release answered it, but for the changes made on purpose since', async () => {
    expect(data.reads.length).toBeGreaterThan(100);
    for (const read of data.reads) {
      const { answer, ...request } = read;
      expect(await readThrough(deps, request), `${request.origin ?? 'operator'} GET ${request.path}?${new URLSearchParams(request.query).toString()}`).toEqual(asChangedSince(answer));
    }
  });
});
