import { CorruptItemError } from '../ledger/port.js';

import { digestOf } from './ledger-keys.js';


/**
 * What every item codec of the ledger table is built from (ledger-items.ts, state-item.ts): the
 * stored item as a record, the field checks a decoded item must pass, the TTL every dispatch record carries.
 */

/** The item a failed condition returns (ALL_OLD) comes back in wire format, even through the document client. */
export type Item = Record<string, unknown>;

/** Null fields are left out of the stored item (they cost bytes on every write) and restored on read. */
export function withoutNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutNulls);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== null).map(([name, field]) => [name, withoutNulls(field)]));
}

/** A short, stable tie-breaker for sort keys, instead of repeating a 128-character id. */
export const idHash = (id: string): string => digestOf(id).toString('base64url').slice(0, 10);

/** When an item written at `at` expires: the retention after it (DynamoDB TTL, epoch seconds). */
export const expiryOf = (at: string, retentionSeconds: number): number => Math.floor(Date.parse(at) / 1000) + retentionSeconds;


// ——— codecs: every stored item is decoded and checked, never cast ——————————————————————————————


export type Check = (value: unknown) => boolean;
export const isString: Check = (value) => typeof value === 'string';
export const isNumber: Check = (value) => typeof value === 'number' && Number.isFinite(value);
export const isBoolean: Check = (value) => typeof value === 'boolean';
export const isObject: Check = (value) => typeof value === 'object' && value !== null && !Array.isArray(value);
export const isArray: Check = Array.isArray;
export const optional = (check: Check): Check => (value) => value === undefined || value === null || check(value);

/** A stored item's key, as a CorruptItemError names it. */
export const keyOf = (item: Item): string => `${String(item.pk)}/${String(item.sk)}`;

/** Checks the named fields of a stored item; throws CorruptItemError naming the first that is wrong. */
export function checked(item: Item, fields: Readonly<Record<string, Check>>): Item {
  for (const [field, check] of Object.entries(fields)) {
    const path = field.split('.');
    let value: unknown = item;
    for (const part of path) value = isObject(value) ? (value as Item)[part] : undefined;
    if (!check(value)) throw new CorruptItemError(keyOf(item), `${field} is missing or of the wrong type`);
  }
  return item;
}
