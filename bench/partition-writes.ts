import type { AttributeValue, GlobalSecondaryIndex, KeySchemaElement } from '@aws-sdk/client-dynamodb';
import { itemSizeBytes, writeUnitsFor } from './capacity-units.js';

// ——— writes per partition key (CONTRACT §14: no partition key of the table or of an index above 1,000 WCU/s) ———
//
// [gsi]    "Provisioned throughput considerations for global secondary indexes" / "Managing global secondary
//          indexes": a table write writes an index only when the item has (or had) every key attribute of
//          that index; changing an index key attribute costs two index writes (delete the old entry, put
//          the new one, each on its own partition key); changing a non-key attribute writes the entry only
//          when that attribute is projected (KEYS_ONLY: never; ALL: any change). An index entry is billed
//          for its size: the table's key, the index's key and the projected attributes, 1 WU per KB.
//          https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html#GSI.ThroughputConsiderations.Writes
// [ttl]    "Using time to live (TTL)": items deleted by TTL consume no write throughput.
//          https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/TTL.html
//
// Where the images come from: the table's own stream (NEW_AND_OLD_IMAGES), never the request. A request
// does not carry both images: an UpdateItem returns one of them at most (ReturnValues), a transaction none,
// and an update expression would have to be re-evaluated to know the other. The stream holds the exact
// before and after of every committed change, whichever call made it. What a stream cannot show is fed
// from the request by the meter's middleware: writes rejected by a condition (billed, nothing written,
// no index touched) and which changes a transaction made (billed twice: [txn] in capacity-units.ts).

/** The name the base table's own partitions are reported under, next to its index names. */
export const BASE_TABLE = '(table)';

/** The key schema and indexes of a table, as `CreateTable` takes them (e.g. `LEDGER_TABLE_DEFINITION`). */
export interface TableShape {
  readonly keySchema: readonly KeySchemaElement[];
  readonly globalSecondaryIndexes?: readonly GlobalSecondaryIndex[] | undefined;
}

/** Write units one change put on one partition key of the table or of one of its indexes. */
export interface PartitionWrite {
  /** {@link BASE_TABLE} or the index name. */
  readonly index: string;
  /** The partition key's value (a string, a number's digits, a binary's base64). */
  readonly partitionKey: string;
  readonly writeUnits: number;
}

export type Image = Readonly<Record<string, AttributeValue>>;

export function keyNames(schema: readonly KeySchemaElement[]): { hash: string; names: string[] } {
  const names = schema.map((element) => element.AttributeName ?? '');
  const hash = schema.find((element) => element.KeyType === 'HASH')?.AttributeName ?? names[0] ?? '';
  return { hash, names };
}

export function keyText(value: AttributeValue | undefined): string {
  if (value?.S !== undefined) return value.S;
  if (value?.N !== undefined) return value.N;
  if (value?.B !== undefined) return Buffer.from(value.B).toString('base64');
  return '';
}

const sameValue = (a: AttributeValue | undefined, b: AttributeValue | undefined): boolean => JSON.stringify(a) === JSON.stringify(b);

/** The attributes an index stores for an item: its keys, the table's keys, and what it projects. */
function indexEntry(image: Image, index: GlobalSecondaryIndex, tableKeys: readonly string[]): Image {
  const projection = index.Projection?.ProjectionType ?? 'KEYS_ONLY';
  if (projection === 'ALL') return image;
  const kept = new Set([...keyNames(index.KeySchema ?? []).names, ...tableKeys, ...(projection === 'INCLUDE' ? (index.Projection?.NonKeyAttributes ?? []) : [])]);
  return Object.fromEntries(Object.entries(image).filter(([name]) => kept.has(name)));
}

function indexWrites(oldImage: Image | undefined, newImage: Image | undefined, index: GlobalSecondaryIndex, tableKeys: readonly string[], factor: number): PartitionWrite[] {
  const name = index.IndexName ?? '';
  const { hash, names } = keyNames(index.KeySchema ?? []);
  const inIndex = (image: Image | undefined): image is Image => image !== undefined && names.every((attribute) => image[attribute] !== undefined);
  const write = (image: Image, bytes = itemSizeBytes(indexEntry(image, index, tableKeys))): PartitionWrite => ({
    index: name,
    partitionKey: keyText(image[hash]),
    writeUnits: factor * writeUnitsFor(bytes),
  });
  const wasIn = inIndex(oldImage);
  const isIn = inIndex(newImage);
  if (wasIn && isIn) {
    // A key attribute changed: the entry moves, a delete and a put, each on its own partition.
    if (names.some((attribute) => !sameValue(oldImage[attribute], newImage[attribute]))) return [write(oldImage), write(newImage)];
    const before = indexEntry(oldImage, index, tableKeys);
    const after = indexEntry(newImage, index, tableKeys);
    const changed = new Set([...Object.keys(before), ...Object.keys(after)]);
    if (![...changed].some((attribute) => !sameValue(before[attribute], after[attribute]))) return [];
    return [write(newImage, Math.max(itemSizeBytes(before), itemSizeBytes(after)))];
  }
  if (wasIn) return [write(oldImage)];
  if (isIn) return [write(newImage)];
  return [];
}

/**
 * The write units one committed change of an item put on each partition key: the table's (the larger of
 * the old and the new item: [units] in capacity-units.ts) and each index's, by the [gsi] rules. `oldImage` is undefined for an
 * item created, `newImage` for one deleted. `factor` is 2 for a change made by a transaction ([txn] in capacity-units.ts); it is
 * applied to the index writes too: AWS does not say whether a transaction's index propagation is billed
 * twice, and counting it twice keeps the figure an upper bound, which is what a hot-key limit needs.
 *
 * @example
 * const created = { pk: { S: 'D#1' }, sk: { S: 'STATE' }, originKey: { S: 'O#planner' }, createdKey: { S: '2026-12-01T12:00:00Z#x' } };
 * partitionWritesOf(undefined, created, LEDGER_TABLE_DEFINITION);
 * // [{ index: '(table)', partitionKey: 'D#1', writeUnits: 1 }, { index: 'byOrigin', partitionKey: 'O#planner', writeUnits: 1 }]
 */
export function partitionWritesOf(oldImage: Image | undefined, newImage: Image | undefined, shape: TableShape, factor = 1): PartitionWrite[] {
  const image = newImage ?? oldImage;
  if (image === undefined) return [];
  const table = keyNames(shape.keySchema);
  const bytes = Math.max(oldImage === undefined ? 0 : itemSizeBytes(oldImage), newImage === undefined ? 0 : itemSizeBytes(newImage));
  return [
    { index: BASE_TABLE, partitionKey: keyText(image[table.hash]), writeUnits: factor * writeUnitsFor(bytes) },
    ...(shape.globalSecondaryIndexes ?? []).flatMap((index) => indexWrites(oldImage, newImage, index, table.names, factor)),
  ];
}

/** One partition key of a table or index, and what it took. */
export interface KeyWrites {
  readonly partitionKey: string;
  readonly writeUnits: number;
  /** `writeUnits` ÷ the report's elapsed seconds. */
  readonly writeUnitsPerSecond: number;
}

/** The writes one table or index took, its hottest keys first. */
export interface IndexWrites {
  readonly totalWriteUnits: number;
  /** Distinct partition keys written. */
  readonly keys: number;
  /** The hottest keys, most written first (ties by name). */
  readonly top: readonly KeyWrites[];
}

/** What a {@link CapacityMeter} tracking partition keys counted: per table, per {@link BASE_TABLE} or index. */
export interface PartitionWriteReport {
  readonly elapsedSeconds: number;
  readonly tables: Readonly<Record<string, Readonly<Record<string, IndexWrites>>>>;
}

/** A stream record's images, as Lambda or DynamoDB Streams hands them (items in wire shape). */
export interface StreamImages {
  readonly eventName?: string | undefined;
  /** Who made the change: DynamoDB itself for a TTL deletion (`stream-records.ts` `TTL_REMOVER`). */
  readonly userIdentity?: unknown;
  readonly dynamodb?: { readonly Keys?: unknown; readonly OldImage?: unknown; readonly NewImage?: unknown } | undefined;
}

/** Per table, per index, per partition key: write units. */
export type KeyCounts = Map<string, Map<string, Map<string, number>>>;

export function addWrite(counts: KeyCounts, table: string, write: PartitionWrite): void {
  const indexes = counts.get(table) ?? new Map<string, Map<string, number>>();
  counts.set(table, indexes);
  const keys = indexes.get(write.index) ?? new Map<string, number>();
  indexes.set(write.index, keys);
  keys.set(write.partitionKey, (keys.get(write.partitionKey) ?? 0) + write.writeUnits);
}

/** The item key (`pk`, `sk`... in wire shape) as one string, to match a stream record to the request that made it. */
export function itemKeyText(item: Image | undefined, schema: readonly KeySchemaElement[]): string {
  return keyNames(schema).names.map((name) => keyText(item?.[name])).join('\u0000');
}
