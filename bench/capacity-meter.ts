import type {
  AttributeValue,
  Capacity,
  ConsumedCapacity,
  DynamoDBClient,
  GlobalSecondaryIndex,
  KeySchemaElement,
  PutItemInput,
  TransactGetItemsInput,
  TransactWriteItemsInput,
} from '@aws-sdk/client-dynamodb';
import { isTtlRemoval } from '../shared/adapters/stream-records.js';

// AWS rules this module applies (Amazon DynamoDB Developer Guide):
// [sizes]  "DynamoDB item sizes and formats"
//          https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html
// [units]  "Read and write operations": 1 WRU per 1 KB written (rounded up), 1 RRU per 4 KB read strongly
//          consistent, half that eventually consistent; a conditional write whose condition is false still
//          consumes write capacity, for the larger of the existing and the new item, minimum 1.
//          https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html
// [txn]    "Capacity management for transactions": every item of a transaction is read or written twice
//          (prepare and commit), so it costs 2 × the units of the same non-transactional request.
//          https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-capacity-handling
//
// What DynamoDB Local 1.25 gets wrong, measured here (product/REFERENCES.md "Local engines"): it returns no
// ConsumedCapacity with a failed conditional write, wrong figures for transactions (12 units for two
// small puts on a table with one GSI), and 0 units for a Query that reads nothing (AWS bills such a read
// at least one read unit, half eventually consistent). Those cases are modelled below; everything else
// is read from the ConsumedCapacity DynamoDB returns.

/** 1 write unit covers up to 1 KB written [units]. */
const WRITE_UNIT_BYTES = 1024;
/** 1 read unit covers up to 4 KB read, strongly consistent [units]. */
const READ_UNIT_BYTES = 4096;
/** Each item of a transaction is touched twice: prepare and commit [txn]. */
const TRANSACTION_FACTOR = 2;

/** Units one table took, its secondary indexes included. */
export interface TableTotals {
  /** Read capacity units: the table plus its GSIs and LSIs. */
  readUnits: number;
  /** Write capacity units: the table plus its GSIs and LSIs. */
  writeUnits: number;
}

/** What one operation name (PutItem, Query...) cost. */
export interface OperationTotals {
  /** Calls sent through the client: one per `send`, however often the SDK retried it underneath. */
  requests: number;
  /** Read capacity units, secondary indexes included. */
  readUnits: number;
  /** Write capacity units, secondary indexes included. */
  writeUnits: number;
  /**
   * Calls rejected by a condition: a `ConditionalCheckFailedException`, or a `TransactionCanceledException`
   * with a `ConditionalCheckFailed` reason. Their units are in `writeUnits` (a failed condition is billed).
   */
  failedConditions: number;
  /** Calls whose units were modelled from the AWS billing rules instead of read from `ConsumedCapacity`. */
  modelled: number;
}

/** Everything a {@link CapacityMeter} counted. Plain data: safe to keep, compare and serialize. */
export interface CapacityTotals {
  /** Item-level calls sent (control-plane calls such as CreateTable are not metered). */
  requests: number;
  /** Read capacity units over all operations, secondary indexes included. */
  readUnits: number;
  /** Write capacity units over all operations, secondary indexes included. */
  writeUnits: number;
  /** The same figures per operation name, e.g. `byOperation.PutItem`. */
  byOperation: Record<string, OperationTotals>;
  /** Units per table name. Calls whose table is unknown (PartiQL statements that fail) are not here. */
  byTable: Record<string, TableTotals>;
}

/** The units one call cost. */
export interface Charge {
  readonly readUnits: number;
  readonly writeUnits: number;
  readonly byTable: Readonly<Record<string, TableTotals>>;
}

/** How the meter accounts for one call: its units and how they were obtained. */
export interface Measurement {
  readonly charge: Charge;
  /** The call was rejected by a condition (and is billed anyway). */
  readonly failedCondition: boolean;
  /** The units come from the AWS rules, not from `ConsumedCapacity`. */
  readonly modelled: boolean;
}

/** How a call ended: the output it returned, or the error it threw. */
export type Outcome = { readonly output: object } | { readonly error: unknown };

type UnitKind = 'read' | 'write';

/**
 * Operations that accept `ReturnConsumedCapacity`, with the kind of unit a bare `CapacityUnits` figure
 * counts as. PartiQL operations are decided from their statement (`SELECT` reads, anything else writes).
 */
const METERED_OPERATIONS: Readonly<Record<string, UnitKind | 'statement'>> = {
  GetItem: 'read',
  BatchGetItem: 'read',
  Query: 'read',
  Scan: 'read',
  TransactGetItems: 'read',
  PutItem: 'write',
  UpdateItem: 'write',
  DeleteItem: 'write',
  BatchWriteItem: 'write',
  TransactWriteItems: 'write',
  ExecuteStatement: 'statement',
  BatchExecuteStatement: 'statement',
  ExecuteTransaction: 'statement',
};

const NO_CHARGE: Charge = { readUnits: 0, writeUnits: 0, byTable: {} };

/** Whether `operation` (e.g. `PutItem`) is an item-level call the meter counts. */
export function isMeteredOperation(operation: string): boolean {
  return Object.hasOwn(METERED_OPERATIONS, operation);
}

function utf8Length(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/**
 * Size of a number attribute's value [sizes]: 1 byte per two significant digits, plus 1 byte. Leading and
 * trailing zeros are not significant. AWS calls the rule approximate; so is this.
 */
export function numberSizeBytes(value: string): number {
  const mantissa = value.trim().replace(/^[+-]/, '').split(/[eE]/)[0] ?? '';
  const significant = mantissa.replace('.', '').replace(/^0+/, '').replace(/0+$/, '');
  return Math.ceil(significant.length / 2) + 1;
}

/** Size of one attribute value, without its name [sizes]. */
export function attributeValueSizeBytes(value: AttributeValue): number {
  if (value.S !== undefined) return utf8Length(value.S);
  if (value.N !== undefined) return numberSizeBytes(value.N);
  if (value.B !== undefined) return value.B.byteLength;
  if (value.BOOL !== undefined || value.NULL !== undefined) return 1;
  if (value.SS !== undefined) return value.SS.reduce((sum, member) => sum + utf8Length(member), 0);
  if (value.NS !== undefined) return value.NS.reduce((sum, member) => sum + numberSizeBytes(member), 0);
  if (value.BS !== undefined) return value.BS.reduce((sum, member) => sum + member.byteLength, 0);
  // A list or map costs 3 bytes whatever it holds, plus 1 byte per element.
  if (value.L !== undefined) return value.L.reduce((sum, element) => sum + 1 + attributeValueSizeBytes(element), 3);
  if (value.M !== undefined) {
    return Object.entries(value.M).reduce(
      (sum, [name, element]) => sum + 1 + utf8Length(name) + attributeValueSizeBytes(element),
      3,
    );
  }
  return 0;
}

/**
 * The size DynamoDB bills an item for: per attribute, the UTF-8 length of its name plus the size of its
 * value ([sizes]; strings by UTF-8 bytes, numbers ≈ significant digits / 2 + 1, binaries by raw bytes,
 * booleans and nulls 1 byte, lists and maps 3 bytes + 1 byte per element + their elements, sets the sum
 * of their members).
 *
 * @example
 * itemSizeBytes({ pk: { S: 'run#1' }, n: { N: '42' } }); // (2 + 5) + (1 + 2) = 10
 */
export function itemSizeBytes(item: Record<string, AttributeValue>): number {
  return Object.entries(item).reduce((sum, [name, value]) => sum + utf8Length(name) + attributeValueSizeBytes(value), 0);
}

/** Write units for writing `bytes` once: 1 per KB, rounded up, never less than 1 [units]. */
export function writeUnitsFor(bytes: number): number {
  return Math.max(1, Math.ceil(bytes / WRITE_UNIT_BYTES));
}

/** Read units for one strongly consistent read of `bytes`: 1 per 4 KB, rounded up, at least 1 [units]. */
export function readUnitsFor(bytes: number): number {
  return Math.max(1, Math.ceil(bytes / READ_UNIT_BYTES));
}

const ATTRIBUTE_VALUE_CHECKS: Readonly<Record<string, (member: unknown) => boolean>> = {
  S: (member) => typeof member === 'string',
  N: (member) => typeof member === 'string',
  B: (member) => member instanceof Uint8Array,
  BOOL: (member) => typeof member === 'boolean',
  NULL: (member) => typeof member === 'boolean',
  SS: (member) => Array.isArray(member),
  NS: (member) => Array.isArray(member),
  BS: (member) => Array.isArray(member),
  L: (member) => Array.isArray(member),
  M: (member) => typeof member === 'object' && member !== null,
};

function isAttributeValue(value: unknown): value is AttributeValue {
  if (typeof value !== 'object' || value === null) return false;
  const entries = Object.entries(value);
  if (entries.length !== 1) return false;
  const [type, member] = entries[0] ?? [];
  const check = type === undefined ? undefined : ATTRIBUTE_VALUE_CHECKS[type];
  return check !== undefined && check(member);
}

/**
 * `value` when it is an item in DynamoDB's wire shape (`{ name: { S: '...' } }`), else undefined. A
 * `DynamoDBDocumentClient` hands plain JavaScript items back to the meter, whose size is not known here.
 */
export function asAttributeMap(value: unknown): Record<string, AttributeValue> | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const entries = Object.entries(value);
  if (!entries.every(([, attribute]) => isAttributeValue(attribute))) return undefined;
  return Object.fromEntries(entries.filter((entry): entry is [string, AttributeValue] => isAttributeValue(entry[1])));
}

function emptyTotals(): TableTotals {
  return { readUnits: 0, writeUnits: 0 };
}

/** Accumulates units into a charge; tables keyed by name. */
class ChargeBuilder {
  readUnits = 0;
  writeUnits = 0;
  readonly byTable: Record<string, TableTotals> = {};

  add(table: string | undefined, readUnits: number, writeUnits: number): this {
    this.readUnits += readUnits;
    this.writeUnits += writeUnits;
    if (table !== undefined) {
      const totals = (this.byTable[table] ??= emptyTotals());
      totals.readUnits += readUnits;
      totals.writeUnits += writeUnits;
    }
    return this;
  }

  build(): Charge {
    return { readUnits: this.readUnits, writeUnits: this.writeUnits, byTable: this.byTable };
  }
}

/**
 * Splits one figure into read and write units. `CapacityUnits` is the total; `ReadCapacityUnits` and
 * `WriteCapacityUnits`, when DynamoDB sends them, are its split. Without a split, the total is all of
 * the operation's kind.
 */
function splitUnits(capacity: Capacity, total: number, kind: UnitKind): { read: number; write: number } {
  const { ReadCapacityUnits: read, WriteCapacityUnits: write } = capacity;
  if (read === undefined && write === undefined) return kind === 'read' ? { read: total, write: 0 } : { read: 0, write: total };
  if (read !== undefined && write !== undefined) return { read, write };
  if (read !== undefined) return { read, write: Math.max(0, total - read) };
  return { read: Math.max(0, total - (write ?? 0)), write: write ?? 0 };
}

function unitsOfPart(capacity: Capacity | undefined): number {
  if (capacity === undefined) return 0;
  return capacity.CapacityUnits ?? (capacity.ReadCapacityUnits ?? 0) + (capacity.WriteCapacityUnits ?? 0);
}

function isCapacityList(consumed: ConsumedCapacity | readonly ConsumedCapacity[]): consumed is readonly ConsumedCapacity[] {
  return Array.isArray(consumed);
}

/**
 * The units in a `ConsumedCapacity` answer (one object, or one per table for batches and transactions).
 *
 * `CapacityUnits` is already the total of the table and its indexes: the `Table`,
 * `GlobalSecondaryIndexes` and `LocalSecondaryIndexes` parts are only summed when it is absent, so
 * nothing is counted twice. A bare figure counts as `kind` (reads for GetItem, writes for PutItem...).
 *
 * @example
 * sumConsumedCapacity({ TableName: 't', CapacityUnits: 2, Table: { CapacityUnits: 1 },
 *   GlobalSecondaryIndexes: { byStatus: { CapacityUnits: 1 } } }, 'write'); // writeUnits: 2
 */
export function sumConsumedCapacity(consumed: ConsumedCapacity | readonly ConsumedCapacity[] | undefined, kind: UnitKind): Charge {
  if (consumed === undefined) return NO_CHARGE;
  const entries = isCapacityList(consumed) ? consumed : [consumed];
  const charge = new ChargeBuilder();
  for (const entry of entries) {
    const parts = [entry.Table, ...Object.values(entry.GlobalSecondaryIndexes ?? {}), ...Object.values(entry.LocalSecondaryIndexes ?? {})];
    const total = entry.CapacityUnits ?? (entry.ReadCapacityUnits !== undefined || entry.WriteCapacityUnits !== undefined
      ? (entry.ReadCapacityUnits ?? 0) + (entry.WriteCapacityUnits ?? 0)
      : parts.reduce((sum, part) => sum + unitsOfPart(part), 0));
    const { read, write } = splitUnits(entry, total, kind);
    charge.add(entry.TableName, read, write);
  }
  return charge.build();
}

/** Input fields a failed conditional write is sized from. */
export interface ConditionalWriteInput {
  readonly TableName?: string | undefined;
  /** The new item (PutItem). UpdateItem and DeleteItem carry no whole item. */
  readonly Item?: PutItemInput['Item'];
}

/**
 * The write units of a conditional write whose condition was false. DynamoDB bills it ([units]) for the
 * larger of the existing and the new item, at least 1 WU, and returns no figure. The new item is known for
 * a PutItem; the existing one only when the caller asked `ReturnValuesOnConditionCheckFailure: 'ALL_OLD'`.
 * Otherwise (UpdateItem, DeleteItem) the size is unknown and 1 WU is charged. No index is written.
 */
export function failedWriteCharge(input: ConditionalWriteInput, existingItem?: Record<string, AttributeValue>): Charge {
  const newBytes = input.Item === undefined ? 0 : itemSizeBytes(input.Item);
  const existingBytes = existingItem === undefined ? 0 : itemSizeBytes(existingItem);
  return new ChargeBuilder().add(input.TableName, 0, writeUnitsFor(Math.max(newBytes, existingBytes))).build();
}

/**
 * The write units of a TransactWriteItems: 2 × the units of each action done alone [txn]. A Put is sized
 * from its item; an Update, Delete or ConditionCheck carries no item, so it counts as one 1 KB unit: 2 WU.
 *
 * Limitation: index writes cannot be known from the request (they depend on the table's key schemas and
 * on the old item), so a transaction's GSI/LSI units are not counted; DynamoDB Local's own index figure
 * for transactions is wrong too. Rely on non-transactional writes to measure index cost.
 */
export function transactWriteCharge(input: TransactWriteItemsInput): Charge {
  const charge = new ChargeBuilder();
  for (const action of input.TransactItems ?? []) {
    if (action.Put !== undefined) {
      charge.add(action.Put.TableName, 0, TRANSACTION_FACTOR * writeUnitsFor(itemSizeBytes(action.Put.Item ?? {})));
    } else {
      const table = action.Update?.TableName ?? action.Delete?.TableName ?? action.ConditionCheck?.TableName;
      charge.add(table, 0, TRANSACTION_FACTOR * writeUnitsFor(0));
    }
  }
  return charge.build();
}

/** A TransactGetItems output, whose items may be in wire shape or already unmarshalled. */
export interface TransactGetAnswer {
  readonly Responses?: ReadonlyArray<{ readonly Item?: unknown } | undefined> | undefined;
}

/**
 * The read units of a TransactGetItems: 2 × one strongly consistent read per item, 1 RRU per 4 KB [txn].
 * Sizes come from the returned items when they are in DynamoDB's wire shape; an item not found, or one a
 * `DynamoDBDocumentClient` already turned into plain JavaScript, counts as ≤ 4 KB: 2 RRU.
 */
export function transactGetCharge(input: TransactGetItemsInput, output?: TransactGetAnswer): Charge {
  const charge = new ChargeBuilder();
  (input.TransactItems ?? []).forEach((action, index) => {
    const item = asAttributeMap(output?.Responses?.[index]?.Item);
    const bytes = item === undefined ? 0 : itemSizeBytes(item);
    charge.add(action.Get?.TableName, TRANSACTION_FACTOR * readUnitsFor(bytes), 0);
  });
  return charge.build();
}

function errorName(error: unknown): string | undefined {
  return error instanceof Error ? error.name : undefined;
}

function cancelledByCondition(error: unknown): boolean {
  if (typeof error !== 'object' || error === null || !('CancellationReasons' in error)) return false;
  const reasons: unknown = error.CancellationReasons;
  return (
    Array.isArray(reasons) &&
    reasons.some((reason: unknown) => typeof reason === 'object' && reason !== null && 'Code' in reason && reason.Code === 'ConditionalCheckFailed')
  );
}

function existingItemOf(error: unknown): Record<string, AttributeValue> | undefined {
  return typeof error === 'object' && error !== null && 'Item' in error ? asAttributeMap(error.Item) : undefined;
}

function firstStatement(input: object): string {
  const statements: unknown[] = [input];
  if ('Statements' in input && Array.isArray(input.Statements)) statements.push(...input.Statements);
  if ('TransactStatements' in input && Array.isArray(input.TransactStatements)) statements.push(...input.TransactStatements);
  for (const candidate of statements) {
    if (typeof candidate === 'object' && candidate !== null && 'Statement' in candidate && typeof candidate.Statement === 'string') {
      return candidate.Statement;
    }
  }
  return '';
}

function unitKind(operation: string, input: object): UnitKind {
  const kind = METERED_OPERATIONS[operation] ?? 'read';
  if (kind !== 'statement') return kind;
  return /^\s*select\b/i.test(firstStatement(input)) ? 'read' : 'write';
}

function consumedCapacityOf(output: object): ConsumedCapacity | ConsumedCapacity[] | undefined {
  return 'ConsumedCapacity' in output ? (output.ConsumedCapacity as ConsumedCapacity | ConsumedCapacity[] | undefined) : undefined;
}

/**
 * How one call is accounted for. `input` is the request as sent to DynamoDB (items in wire shape), the
 * outcome is its output or error. This is the meter's whole policy; the middleware only feeds it.
 *
 * - TransactWriteItems and TransactGetItems: always modelled, as DynamoDB Local's figures are wrong. A
 *   TransactWriteItems cancelled by a condition is charged in full (its actions were prepared): an upper
 *   bound, as AWS publishes no figure for a cancelled transaction. Other cancellations charge nothing.
 * - A `ConditionalCheckFailedException`: modelled by {@link failedWriteCharge}.
 * - A Query or Scan reported below its minimum (one read unit, half eventually consistent): the minimum.
 * - Any other error: no units (throttled and invalid requests consume none).
 * - Anything else: read from `ConsumedCapacity`.
 */
export function measureRequest(operation: string, input: object, outcome: Outcome): Measurement {
  if (operation === 'TransactWriteItems') {
    const failedCondition = 'error' in outcome && errorName(outcome.error) === 'TransactionCanceledException' && cancelledByCondition(outcome.error);
    if ('error' in outcome && !failedCondition) return { charge: NO_CHARGE, failedCondition: false, modelled: false };
    return { charge: transactWriteCharge(input as TransactWriteItemsInput), failedCondition, modelled: true };
  }
  if (operation === 'TransactGetItems') {
    if ('error' in outcome) return { charge: NO_CHARGE, failedCondition: false, modelled: false };
    return { charge: transactGetCharge(input as TransactGetItemsInput, outcome.output), failedCondition: false, modelled: true };
  }
  if ('error' in outcome) {
    if (errorName(outcome.error) !== 'ConditionalCheckFailedException') return { charge: NO_CHARGE, failedCondition: false, modelled: false };
    return { charge: failedWriteCharge(input as ConditionalWriteInput, existingItemOf(outcome.error)), failedCondition: true, modelled: true };
  }
  const charge = sumConsumedCapacity(consumedCapacityOf(outcome.output), unitKind(operation, input));
  if (operation === 'Query' || operation === 'Scan') {
    // A Query or Scan is billed at least one read unit (half of one eventually consistent) even when it
    // reads nothing [units]; DynamoDB Local reports 0 for an empty one: modelled.
    const minimum = (input as { ConsistentRead?: boolean }).ConsistentRead ? 1 : 0.5;
    if (charge.readUnits < minimum) return { charge: new ChargeBuilder().add((input as { TableName?: string }).TableName, minimum, 0).build(), failedCondition: false, modelled: true };
  }
  return { charge, failedCondition: false, modelled: false };
}

function emptyOperation(): OperationTotals {
  return { requests: 0, readUnits: 0, writeUnits: 0, failedConditions: 0, modelled: 0 };
}

function emptyCapacityTotals(): CapacityTotals {
  return { requests: 0, readUnits: 0, writeUnits: 0, byOperation: {}, byTable: {} };
}

function subtractRecords<T extends object>(
  after: Record<string, T>,
  before: Record<string, T>,
  empty: () => T,
  minus: (a: T, b: T) => T,
): Record<string, T> {
  const difference: Record<string, T> = {};
  for (const key of new Set([...Object.keys(after), ...Object.keys(before)])) {
    const delta = minus(after[key] ?? empty(), before[key] ?? empty());
    if (Object.values(delta).some((value) => value !== 0)) difference[key] = delta;
  }
  return difference;
}

// Structural view of the SDK v3 middleware stack: just what the meter uses.
interface HandlerArgs {
  readonly input: object;
}
interface HandlerResult {
  readonly output: object;
}
type Handler = (args: HandlerArgs) => Promise<HandlerResult>;
interface MiddlewareContext {
  readonly commandName?: string;
}
type Middleware = (next: Handler, context: MiddlewareContext) => Handler;
interface MiddlewareHost {
  readonly middlewareStack: {
    add(middleware: unknown, options: { step: 'initialize'; name: string; tags?: string[] }): void;
    add(middleware: unknown, options: { step: 'build'; name: string; tags?: string[] }): void;
  };
}

let meterCount = 0;

/**
 * Counts, per operation, the requests a `DynamoDBClient` sends and the read and write capacity units
 * they consume, secondary indexes included — from the `ConsumedCapacity` DynamoDB returns, and modelled
 * per the AWS billing rules where DynamoDB Local returns none or wrong figures (failed conditional writes,
 * transactions; see {@link measureRequest}).
 *
 * The meter asks every item-level call for `ReturnConsumedCapacity: 'INDEXES'` unless the caller chose
 * `TOTAL` or `INDEXES`, and then removes `ConsumedCapacity` from the output the caller did not ask for:
 * a metered client answers exactly as an unmetered one, errors included.
 *
 * A `DynamoDBDocumentClient` shares its client's middleware stack, so one built on a metered client (before
 * or after `attach`) is metered too; its items are sized after marshalling, as DynamoDB bills them.
 *
 * @example
 * const ddb = new DynamoDBClient({});
 * const meter = new CapacityMeter();
 * meter.attach(ddb);
 * const docs = DynamoDBDocumentClient.from(ddb);
 *
 * const before = meter.snapshot();
 * await docs.send(new PutCommand({ TableName: 'ledger', Item: { pk: 'run#1' } }));
 * const spent = meter.since(before);
 * spent.byOperation.PutItem?.writeUnits; // 1, plus 1 per GSI the item is in
 */
export class CapacityMeter {
  readonly #id = ++meterCount;
  readonly #attached = new WeakSet<DynamoDBClient>();
  #totals: CapacityTotals = emptyCapacityTotals();
  /** Tables whose writes are counted per partition key, with the item keys of transactional changes not yet seen on the stream. */
  readonly #tracked = new Map<string, { readonly shape: TableShape; readonly transactional: Map<string, number> }>();
  #keyWrites: KeyCounts = new Map();

  /** Meters every call `client` sends from now on. Attaching the same client again does nothing. */
  attach(client: DynamoDBClient): void {
    if (this.#attached.has(client)) return;
    this.#attached.add(client);
    const host: MiddlewareHost = client;
    host.middlewareStack.add(this.#requestCapacity(), { step: 'initialize', name: `capacityMeter${this.#id}RequestCapacity`, tags: ['CAPACITY_METER'] });
    // The build step sees the request after serialization, so a DynamoDBDocumentClient's items are
    // already marshalled; it runs once per send, outside the SDK's retries.
    host.middlewareStack.add(this.#measure(), { step: 'build', name: `capacityMeter${this.#id}Measure`, tags: ['CAPACITY_METER'] });
  }

  /** A deep copy of the totals so far. */
  snapshot(): CapacityTotals {
    return structuredClone(this.#totals);
  }

  /** Forgets everything counted so far, partition keys included. */
  reset(): void {
    this.#totals = emptyCapacityTotals();
    this.#keyWrites = new Map();
    for (const { transactional } of this.#tracked.values()) transactional.clear();
  }

  /**
   * Counts the writes of `tableName` per partition key, of the table and of each index of `shape`
   * ({@link partitionWritesOf}). The committed changes come from the table's stream: hand its records to
   * {@link CapacityMeter.recordStreamRecords}. Writes a condition rejected, and which changes were made by
   * a transaction, the meter sees in the requests of the clients it is attached to.
   */
  trackPartitionKeys(tableName: string, shape: TableShape): void {
    if (!this.#tracked.has(tableName)) this.#tracked.set(tableName, { shape, transactional: new Map() });
  }

  /**
   * Counts the committed changes of a tracked table (records of its NEW_AND_OLD_IMAGES stream, in stream
   * order, each once). A change a transaction made (seen by the middleware before) counts twice [txn].
   * A deletion by TTL costs nothing: DynamoDB's TTL deletes consume no write capacity [ttl]. Records of a
   * table that is not tracked, or whose images are not in wire shape, are ignored.
   */
  recordStreamRecords(tableName: string, records: readonly StreamImages[]): void {
    const tracked = this.#tracked.get(tableName);
    if (tracked === undefined) return;
    for (const record of records) {
      if (isTtlRemoval({ eventName: record.eventName === 'REMOVE' ? 'REMOVE' : undefined, userIdentity: record.userIdentity })) continue;
      const oldImage = asAttributeMap(record.dynamodb?.OldImage);
      const newImage = asAttributeMap(record.dynamodb?.NewImage);
      const key = itemKeyText(newImage ?? oldImage, tracked.shape.keySchema);
      const pending = tracked.transactional.get(key) ?? 0;
      if (pending > 1) tracked.transactional.set(key, pending - 1);
      else tracked.transactional.delete(key);
      for (const write of partitionWritesOf(oldImage, newImage, tracked.shape, pending > 0 ? TRANSACTION_FACTOR : 1)) addWrite(this.#keyWrites, tableName, write);
    }
  }

  /**
   * The writes per partition key counted since the last {@link CapacityMeter.reset}, per tracked table and
   * per table or index: totals and the `top` hottest keys, with their rate over `elapsedSeconds`.
   *
   * @example
   * meter.partitionWrites(60).tables.ledger?.byOrigin?.top[0]; // { partitionKey: 'O#planner', writeUnits: 600, writeUnitsPerSecond: 10 }
   */
  partitionWrites(elapsedSeconds: number, top = 5): PartitionWriteReport {
    const tables: Record<string, Record<string, IndexWrites>> = {};
    for (const [table, indexes] of this.#keyWrites) {
      const perIndex: Record<string, IndexWrites> = (tables[table] = {});
      for (const [index, keys] of indexes) {
        const sorted = [...keys].sort(([a, unitsA], [b, unitsB]) => unitsB - unitsA || a.localeCompare(b));
        perIndex[index] = {
          totalWriteUnits: sorted.reduce((sum, [, units]) => sum + units, 0),
          keys: sorted.length,
          top: sorted.slice(0, top).map(([partitionKey, writeUnits]) => ({ partitionKey, writeUnits, writeUnitsPerSecond: elapsedSeconds > 0 ? writeUnits / elapsedSeconds : 0 })),
        };
      }
    }
    return { elapsedSeconds, tables };
  }

  /** What was counted after `before` (a {@link CapacityMeter.snapshot}); entries that did not change are left out. */
  since(before: CapacityTotals): CapacityTotals {
    const now = this.#totals;
    return {
      requests: now.requests - before.requests,
      readUnits: now.readUnits - before.readUnits,
      writeUnits: now.writeUnits - before.writeUnits,
      byOperation: subtractRecords(now.byOperation, before.byOperation, emptyOperation, (a, b) => ({
        requests: a.requests - b.requests,
        readUnits: a.readUnits - b.readUnits,
        writeUnits: a.writeUnits - b.writeUnits,
        failedConditions: a.failedConditions - b.failedConditions,
        modelled: a.modelled - b.modelled,
      })),
      byTable: subtractRecords(now.byTable, before.byTable, emptyTotals, (a, b) => ({
        readUnits: a.readUnits - b.readUnits,
        writeUnits: a.writeUnits - b.writeUnits,
      })),
    };
  }

  #requestCapacity(): Middleware {
    return (next, context) => async (args) => {
      const asked = 'ReturnConsumedCapacity' in args.input ? args.input.ReturnConsumedCapacity : undefined;
      if (!isMeteredOperation(operationName(context)) || asked === 'TOTAL' || asked === 'INDEXES') return next(args);
      const result = await next({ ...args, input: { ...args.input, ReturnConsumedCapacity: 'INDEXES' } });
      if (!('ConsumedCapacity' in result.output)) return result;
      const { ConsumedCapacity: _notAskedFor, ...output } = result.output;
      return { ...result, output };
    };
  }

  #measure(): Middleware {
    return (next, context) => async (args) => {
      const operation = operationName(context);
      if (!isMeteredOperation(operation)) return next(args);
      try {
        const result = await next(args);
        const measurement = measureRequest(operation, args.input, { output: result.output });
        this.#record(operation, measurement);
        this.#recordRequestKeys(operation, args.input, measurement);
        return result;
      } catch (error) {
        const measurement = measureRequest(operation, args.input, { error });
        this.#record(operation, measurement);
        this.#recordRequestKeys(operation, args.input, measurement);
        throw error;
      }
    };
  }

  /**
   * What the stream cannot show, per partition key of a tracked table: a write a condition rejected
   * (billed to its key, no index written), a transaction's condition checks (billed, nothing written),
   * and which items a transaction changed (their stream records then count twice).
   */
  #recordRequestKeys(operation: string, input: object, { charge, failedCondition }: Measurement): void {
    if (this.#tracked.size === 0) return;
    if (operation === 'TransactWriteItems') {
      for (const action of (input as TransactWriteItemsInput).TransactItems ?? []) {
        const part = action.Put ?? action.Update ?? action.Delete ?? action.ConditionCheck;
        const tracked = part?.TableName === undefined ? undefined : this.#tracked.get(part.TableName);
        if (part === undefined || tracked === undefined) continue;
        const item = action.Put?.Item ?? action.Update?.Key ?? action.Delete?.Key ?? action.ConditionCheck?.Key;
        const partitionKey = keyText(item?.[keyNames(tracked.shape.keySchema).hash]);
        if (failedCondition || action.ConditionCheck !== undefined) {
          const bytes = action.Put?.Item === undefined ? 0 : itemSizeBytes(action.Put.Item);
          addWrite(this.#keyWrites, part.TableName ?? '', { index: BASE_TABLE, partitionKey, writeUnits: TRANSACTION_FACTOR * writeUnitsFor(bytes) });
        } else {
          const key = itemKeyText(item, tracked.shape.keySchema);
          tracked.transactional.set(key, (tracked.transactional.get(key) ?? 0) + 1);
        }
      }
      return;
    }
    if (!failedCondition) return;
    const request = input as { TableName?: string; Item?: Image; Key?: Image };
    const tracked = request.TableName === undefined ? undefined : this.#tracked.get(request.TableName);
    if (tracked === undefined || request.TableName === undefined) return;
    const partitionKey = keyText((request.Item ?? request.Key)?.[keyNames(tracked.shape.keySchema).hash]);
    addWrite(this.#keyWrites, request.TableName, { index: BASE_TABLE, partitionKey, writeUnits: charge.writeUnits });
  }

  #record(operation: string, { charge, failedCondition, modelled }: Measurement): void {
    const totals = this.#totals;
    const perOperation = (totals.byOperation[operation] ??= emptyOperation());
    totals.requests += 1;
    totals.readUnits += charge.readUnits;
    totals.writeUnits += charge.writeUnits;
    perOperation.requests += 1;
    perOperation.readUnits += charge.readUnits;
    perOperation.writeUnits += charge.writeUnits;
    if (failedCondition) perOperation.failedConditions += 1;
    if (modelled) perOperation.modelled += 1;
    for (const [table, units] of Object.entries(charge.byTable)) {
      const perTable = (totals.byTable[table] ??= emptyTotals());
      perTable.readUnits += units.readUnits;
      perTable.writeUnits += units.writeUnits;
    }
  }
}

/** `PutItemCommand` → `PutItem`. */
function operationName(context: MiddlewareContext): string {
  return (context.commandName ?? '').replace(/Command$/, '');
}

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
// no index touched) and which changes a transaction made (billed twice [txn]).

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

type Image = Readonly<Record<string, AttributeValue>>;

function keyNames(schema: readonly KeySchemaElement[]): { hash: string; names: string[] } {
  const names = schema.map((element) => element.AttributeName ?? '');
  const hash = schema.find((element) => element.KeyType === 'HASH')?.AttributeName ?? names[0] ?? '';
  return { hash, names };
}

function keyText(value: AttributeValue | undefined): string {
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
 * the old and the new item [units]) and each index's, by the [gsi] rules. `oldImage` is undefined for an
 * item created, `newImage` for one deleted. `factor` is 2 for a change made by a transaction [txn]; it is
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
type KeyCounts = Map<string, Map<string, Map<string, number>>>;

function addWrite(counts: KeyCounts, table: string, write: PartitionWrite): void {
  const indexes = counts.get(table) ?? new Map<string, Map<string, number>>();
  counts.set(table, indexes);
  const keys = indexes.get(write.index) ?? new Map<string, number>();
  indexes.set(write.index, keys);
  keys.set(write.partitionKey, (keys.get(write.partitionKey) ?? 0) + write.writeUnits);
}

/** The item key (`pk`, `sk`... in wire shape) as one string, to match a stream record to the request that made it. */
function itemKeyText(item: Image | undefined, schema: readonly KeySchemaElement[]): string {
  return keyNames(schema).names.map((name) => keyText(item?.[name])).join('\u0000');
}
