import { DeleteObjectsCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import type { ObjectSweeper } from '../usecases/retention.js';

/** The most keys one DeleteObjects request takes (and one ListObjectsV2 page returns). */
const MAX_KEYS_PER_REQUEST = 1000;

/** S3 refused to delete some objects of a DeleteObjects request (it answers 200 and lists them). */
export class ObjectsNotDeletedError extends Error {
  override readonly name = 'ObjectsNotDeletedError';
  constructor(
    readonly bucket: string,
    readonly failures: ReadonlyArray<{ readonly key: string; readonly code: string }>,
  ) {
    super(`s3://${bucket}: ${failures.length} object(s) not deleted, first ${failures[0]?.key ?? '?'} (${failures[0]?.code ?? '?'})`);
  }
}

/**
 * Deletes expired objects from the ledger's bucket: named keys, and every object under a folder
 * (ListObjectsV2 page by page, each page deleted with one DeleteObjects). Needs `s3:ListBucket` on the
 * bucket and `s3:DeleteObject` on its objects — nothing else in the ledger may delete.
 */
export class S3ObjectSweeper implements ObjectSweeper {
  constructor(
    private readonly s3: S3Client,
    private readonly bucket: string,
    /** Keys per listing page (tests page with a few objects). @default 1000 */
    private readonly pageSize = MAX_KEYS_PER_REQUEST,
  ) {}

  async deleteKeys(keys: readonly string[]): Promise<number> {
    for (let start = 0; start < keys.length; start += MAX_KEYS_PER_REQUEST) {
      const batch = keys.slice(start, start + MAX_KEYS_PER_REQUEST);
      // Quiet: S3 lists only the failures. A key that does not exist counts as deleted.
      const { Errors } = await this.s3.send(new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true } }));
      if (Errors && Errors.length > 0) throw new ObjectsNotDeletedError(this.bucket, Errors.map((error) => ({ key: error.Key ?? '', code: error.Code ?? 'unknown' })));
    }
    return keys.length;
  }

  async deleteFolder(folder: string): Promise<number> {
    // An empty prefix is the whole bucket: never a folder of one record.
    if (!folder.endsWith('/') || folder === '/') throw new RangeError(`"${folder}" is not a folder (a prefix ending in "/")`);
    let deleted = 0;
    let token: string | undefined;
    do {
      const page = await this.s3.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: folder, MaxKeys: this.pageSize, ContinuationToken: token }));
      deleted += await this.deleteKeys((page.Contents ?? []).flatMap(({ Key }) => (Key ? [Key] : [])));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return deleted;
  }
}
