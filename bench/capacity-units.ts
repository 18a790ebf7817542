import type { AttributeValue, Capacity, ConsumedCapacity, PutItemInput, TransactGetItemsInput, TransactWriteItemsInput } from '@aws-sdk/client-dynamodb';

/**
 * What one DynamoDB request costs, by AWS's billing rules: item and attribute sizes, read and write units,
 * the charge of a failed conditional write and of a transaction, and a request's measurement from its input
 * and outcome. The `CapacityMeter` of `capacity-meter.ts` applies it to every request a client sends.
 */

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
export const TRANSACTION_FACTOR = 2;

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

export function emptyTotals(): TableTotals {
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
