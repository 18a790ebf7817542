import type { ConsumedCapacity, DynamoDBClient, TransactWriteItemsInput } from '@aws-sdk/client-dynamodb';
import { isTtlRemoval } from '../shared/adapters/stream-records.js';
import { TRANSACTION_FACTOR, asAttributeMap, emptyTotals, isMeteredOperation, itemSizeBytes, measureRequest, writeUnitsFor, type CapacityTotals, type Measurement, type OperationTotals } from './capacity-units.js';
import { BASE_TABLE, addWrite, itemKeyText, keyNames, keyText, partitionWritesOf, type Image, type IndexWrites, type KeyCounts, type PartitionWriteReport, type StreamImages, type TableShape } from './partition-writes.js';

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
   * order, each once). A change a transaction made (seen by the middleware before) counts twice ([txn] in capacity-units.ts).
   * A deletion by TTL costs nothing: DynamoDB's TTL deletes consume no write capacity ([ttl] in partition-writes.ts). Records of a
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
