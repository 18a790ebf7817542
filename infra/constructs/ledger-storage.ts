import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import { AttributeType, BillingMode, ProjectionType, StreamViewType, Table, TableEncryption, type Attribute } from 'aws-cdk-lib/aws-dynamodb';
import { BlockPublicAccess, Bucket, BucketEncryption, ObjectOwnership } from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { LEDGER_TABLE_DEFINITION } from '../../shared/adapters/ledger-table.js';

export interface LedgerStorageProps {
  /** Days a finished dispatch's records and evidence are kept (CONTRACT §7). */
  readonly retentionDays: number;
  /** What `cdk destroy` does to the table and buckets. */
  readonly removalPolicy: RemovalPolicy;
  /** Refuse table deletion, whatever the removal policy. */
  readonly deletionProtection: boolean;
}

const attribute = (name: string): Attribute => {
  const definition = LEDGER_TABLE_DEFINITION.attributeDefinitions.find((candidate) => candidate.AttributeName === name);
  if (!definition) throw new Error(`ledger table attribute ${name} is not defined`);
  return { name, type: definition.AttributeType === 'N' ? AttributeType.NUMBER : AttributeType.STRING };
};

const keyOf = (schema: ReadonlyArray<{ AttributeName?: string | undefined; KeyType?: string | undefined }> | undefined, type: 'HASH' | 'RANGE'): Attribute | undefined => {
  const element = schema?.find((candidate) => candidate.KeyType === type);
  return element?.AttributeName ? attribute(element.AttributeName) : undefined;
};

/**
 * A bucket as every ledger bucket is: private, TLS-only, encrypted, owner-enforced, with incomplete
 * uploads cleaned up and objects expiring after the retention.
 */
export function privateBucket(scope: Construct, id: string, props: { readonly expireAfterDays: number | null; readonly removalPolicy: RemovalPolicy }): Bucket {
  return new Bucket(scope, id, {
    blockPublicAccess: BlockPublicAccess.BLOCK_ALL,
    enforceSSL: true,
    minimumTLSVersion: 1.2,
    encryption: BucketEncryption.S3_MANAGED,
    objectOwnership: ObjectOwnership.BUCKET_OWNER_ENFORCED,
    removalPolicy: props.removalPolicy,
    lifecycleRules: [{ ...(props.expireAfterDays === null ? {} : { expiration: Duration.days(props.expireAfterDays) }), abortIncompleteMultipartUploadAfter: Duration.days(1) }],
  });
}

/**
 * The evidence bucket has no age rule: a dispatch's objects go with its records, from the stream's TTL
 * REMOVE of its anchor (ObjectRetention), and only once its state is gone too. A rule that knows only
 * an object's age would delete the spilled task and the evidence of a dispatch that lives on (a run
 * unknown for months, an approval never answered, a redispatch long after the first run). What the
 * retention function could not delete is parked in the failure bucket and alarmed, never lost silently.
 */

/**
 * The ledger table (the schema the adapters and the local platform use: `LEDGER_TABLE_DEFINITION`)
 * and the evidence bucket, which also holds spilled payloads and bodies.
 */
export class LedgerStorage extends Construct {
  readonly table: Table;
  readonly evidenceBucket: Bucket;

  constructor(scope: Construct, id: string, props: LedgerStorageProps) {
    super(scope, id);
    const partitionKey = keyOf(LEDGER_TABLE_DEFINITION.keySchema, 'HASH');
    if (!partitionKey) throw new Error('the ledger table has no partition key');
    const sortKey = keyOf(LEDGER_TABLE_DEFINITION.keySchema, 'RANGE');
    this.table = new Table(this, 'Table', {
      partitionKey,
      ...(sortKey ? { sortKey } : {}),
      billingMode: BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      stream: StreamViewType.NEW_AND_OLD_IMAGES,
      timeToLiveAttribute: LEDGER_TABLE_DEFINITION.ttlAttribute,
      deletionProtection: props.deletionProtection,
      // Encrypted at rest with an AWS owned key: no KMS request charges on the hot path.
      encryption: TableEncryption.DEFAULT,
      removalPolicy: props.removalPolicy,
    });
    for (const index of LEDGER_TABLE_DEFINITION.globalSecondaryIndexes) {
      const indexPartitionKey = keyOf(index.KeySchema, 'HASH');
      const indexSortKey = keyOf(index.KeySchema, 'RANGE');
      if (!index.IndexName || !indexPartitionKey) throw new Error('a ledger index has no name or partition key');
      this.table.addGlobalSecondaryIndex({
        indexName: index.IndexName,
        partitionKey: indexPartitionKey,
        ...(indexSortKey ? { sortKey: indexSortKey } : {}),
        ...(index.Projection?.ProjectionType === 'INCLUDE'
          ? { projectionType: ProjectionType.INCLUDE, nonKeyAttributes: index.Projection.NonKeyAttributes ?? [] }
          : { projectionType: index.Projection?.ProjectionType === 'ALL' ? ProjectionType.ALL : ProjectionType.KEYS_ONLY }),
      });
    }
    this.evidenceBucket = privateBucket(this, 'Evidence', { expireAfterDays: null, removalPolicy: props.removalPolicy });
  }
}
