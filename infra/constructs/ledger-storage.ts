import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import { AttributeType, BillingMode, ProjectionType, StreamViewType, Table, TableEncryption, type Attribute } from 'aws-cdk-lib/aws-dynamodb';
import { BlockPublicAccess, Bucket, BucketEncryption, ObjectOwnership } from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { LEDGER_TABLE_DEFINITION } from '../../shared/adapters/ledger-keys.js';
import { objectBackstopDays } from '../../shared/usecases/retention-backstop.js';

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
 * uploads cleaned up and objects expiring after `expireAfterDays`.
 */
export function privateBucket(scope: Construct, id: string, props: { readonly expireAfterDays: number; readonly removalPolicy: RemovalPolicy }): Bucket {
  return new Bucket(scope, id, {
    blockPublicAccess: BlockPublicAccess.BLOCK_ALL,
    enforceSSL: true,
    minimumTLSVersion: 1.2,
    encryption: BucketEncryption.S3_MANAGED,
    objectOwnership: ObjectOwnership.BUCKET_OWNER_ENFORCED,
    removalPolicy: props.removalPolicy,
    lifecycleRules: [{ expiration: Duration.days(props.expireAfterDays), abortIncompleteMultipartUploadAfter: Duration.days(1) }],
  });
}

/**
 * The evidence bucket's objects go with their records, from the stream's TTL REMOVE of the dispatch's
 * anchor (ObjectRetention), and only once its state is gone too. Its age rule is a backstop for what
 * that misses (a batch parked in the failure bucket and never acted on): set past the retention plus
 * the longest a dispatch may stay open on the contract's bounded clocks (CONTRACT §7 V3; derived in
 * shared/usecases/retention-backstop.ts, explained in docs/reliability.md "Retention"), so it never takes the
 * objects of a dispatch within those bounds.
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
    this.evidenceBucket = privateBucket(this, 'Evidence', { expireAfterDays: objectBackstopDays(props.retentionDays), removalPolicy: props.removalPolicy });
  }
}
