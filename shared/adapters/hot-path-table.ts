import { DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { type LedgerTableOptions } from './ledger-table.js';
import { type SinglePut } from './ledger-commands.js';
import { LedgerTable } from './ledger-writes.js';
import { withDynamoDbFaults } from './wiring.js';

const MARSHALL = { removeUndefinedValues: true } as const;

/**
 * The intake's table: `LedgerTable` whose single-item puts (the accepted message, the state's first
 * write, every later state write that needs no transaction) go out on a low-level client built with
 * `cacheMiddleware`, marshalled here. Those are two of the intake's three round trips per message; the
 * document client cannot cache its middleware stack (lib-dynamodb refuses the option), so it resolves
 * it again on every command. Reads and everything else keep the document client. Only the intake's
 * bundle carries this class.
 */
export class HotPathTable extends LedgerTable {
  private hotPath: DynamoDBClient | undefined;

  /**
   * `hotPath`: the low-level client the puts go out on; by default one built from the environment, as
   * the function's others are, on the first put (not at init: the function's cold start stays as it was).
   */
  constructor(db: DynamoDBDocumentClient, options: LedgerTableOptions, hotPath?: DynamoDBClient) {
    super(db, options);
    this.hotPath = hotPath;
  }

  protected override async putItem(put: SinglePut): Promise<void> {
    const { Item, ExpressionAttributeValues, ...rest } = put;
    await (this.hotPath ??= newHotPathClient()).send(
      new PutItemCommand({
        ...rest,
        Item: marshall(Item, MARSHALL),
        ...(ExpressionAttributeValues ? { ExpressionAttributeValues: marshall(ExpressionAttributeValues, MARSHALL) } : {}),
      }),
    );
  }
}

function newHotPathClient(): DynamoDBClient {
  return withDynamoDbFaults(new DynamoDBClient({ cacheMiddleware: true }));
}
