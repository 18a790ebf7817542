import { readFileSync } from 'node:fs';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { ITEM_KINDS, kindOfKey } from '../../shared/adapters/item-kinds.js';
import { LEDGER_TABLE_DEFINITION, TTL_ATTRIBUTE } from '../../shared/adapters/ledger-keys.js';
import { checked } from '../../shared/adapters/item-codec.js';
import { stateItem, stateOf } from '../../shared/adapters/state-item.js';
import { retentionStarted, stateOnly } from '../../shared/dispatch/state.js';
import { accepted } from '../../shared/dispatch/transitions/lifecycle.js';
import { blocked } from '../../shared/dispatch/transitions/core.js';
import { newDispatchFactory, NOW } from '../support/factories.js';

/**
 * Items declared once (issue 33): each kind's key template, index membership, TTL rule and stored fields
 * live in one declaration (shared/adapters/item-kinds.ts), and what the writers put in the table keeps
 * to it. The items checked are the release fixture's (test/fixtures/release-data.json: every kind a
 * release wrote through the real API, intake and monitor) and states written here.
 */

const fixture = JSON.parse(readFileSync(new URL('../fixtures/release-data.json', import.meta.url), 'utf8')) as { retentionSeconds: number; items: Array<Record<string, AttributeValue>> };
const items = fixture.items.map((item) => unmarshall(item));

/** Which attribute puts an item in which index: the index's partition key. */
const INDEX_ATTRIBUTE = new Map(LEDGER_TABLE_DEFINITION.globalSecondaryIndexes.map((index) => [index.KeySchema?.[0]?.AttributeName as string, index.IndexName as string]));

function expectKeptToItsKind(item: Record<string, unknown>, retentionSeconds: number): string {
  const key = `${String(item.pk)}/${String(item.sk)}`;
  const name = kindOfKey(String(item.pk), String(item.sk));
  const kind = name === undefined ? undefined : ITEM_KINDS[name];
  if (!name || !kind) throw new Error(`${key}: no declared kind owns this key`);
  // Its fields are what the kind declares.
  expect(() => checked(item, kind.fields), key).not.toThrow();
  // It is listed only in the indexes its kind declares.
  const listedIn = [...INDEX_ATTRIBUTE].flatMap(([attribute, index]) => (item[attribute] === undefined ? [] : [index]));
  for (const index of listedIn) expect(kind.indexes ?? [], `${key} is in the ${index} index`).toContain(index);
  // It expires as its kind's rule says.
  const expiresAt = item[TTL_ATTRIBUTE];
  const rule = kind.ttl;
  if (rule.kind === 'never') expect(expiresAt, key).toBeUndefined();
  else if (rule.kind === 'once final' && !retentionStarted(stateOf(item))) expect(expiresAt, key).toBeUndefined();
  else {
    const factor = rule.kind === 'after' ? rule.factor : 1;
    expect(expiresAt, key).toBe(Math.floor(Date.parse(String(item[rule.from])) / 1000) + retentionSeconds * factor);
  }
  return name;
}

describe('item kinds, each declared once', () => {
  it('own disjoint keys: no stored key is two kinds', () => {
    const kinds = Object.entries(ITEM_KINDS);
    for (const [aName, a] of kinds) {
      for (const [bName, b] of kinds) {
        if (a === b || !(a.pk.startsWith(b.pk) || b.pk.startsWith(a.pk))) continue;
        const overlap = a.skPrefix && b.skPrefix ? a.sk.startsWith(b.sk) || b.sk.startsWith(a.sk) : a.skPrefix ? b.sk.startsWith(a.sk) : b.skPrefix ? a.sk.startsWith(b.sk) : a.sk === b.sk;
        expect(overlap, `${aName} and ${bName}`).toBe(false);
      }
    }
  });

  it('declare the table’s indexes: every index some kind is listed in, and no other', () => {
    const declared = new Set(Object.values(ITEM_KINDS).flatMap((kind) => kind.indexes ?? []));
    expect([...declared].sort()).toEqual(LEDGER_TABLE_DEFINITION.globalSecondaryIndexes.map((index) => index.IndexName).sort());
  });

  it('hold what a release wrote: every item of the release fixture is of a declared kind, with its fields, indexes and TTL', () => {
    const seen = new Set(items.map((item) => expectKeptToItsKind(item, fixture.retentionSeconds)));
    // The fixture holds most kinds (marks, late events, Lambda failures, origin settings and principals it never wrote).
    expect(seen.size).toBeGreaterThanOrEqual(16);
  });

  it('let the state expire only once the dispatch is final, from its last write', () => {
    const start = accepted(newDispatchFactory({ dispatchId: 'd-kinds-1' }), NOW);
    const live = stateItem(start, { version: 1, changes: start.changes }, 3_600);
    const ended = blocked(stateOnly(start), 'unknown_target', 'no such target', new Date(NOW.getTime() + 5_000));
    const final = stateItem(ended, { version: 2, changes: ended.changes }, 3_600);
    expect(expectKeptToItsKind(live, 3_600)).toBe('STATE_ITEM');
    expect(live[TTL_ATTRIBUTE]).toBeUndefined();
    expectKeptToItsKind(final, 3_600);
    expect(final[TTL_ATTRIBUTE]).toBe(Math.floor(NOW.getTime() / 1000) + 5 + 3_600);
  });
});
