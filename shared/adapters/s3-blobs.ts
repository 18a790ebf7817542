import { GetObjectCommand, NoSuchKey, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { BlobStore } from '../ledger/port.js';

/** Spilled payloads and bodies in the ledger's bucket. */
export class S3Blobs implements BlobStore {
  private readonly s3: () => S3Client;

  /** `s3` may be a getter, for a client built on the first object read or written (wiring.ts). */
  constructor(
    s3: S3Client | (() => S3Client),
    private readonly bucket: string,
  ) {
    this.s3 = typeof s3 === 'function' ? s3 : () => s3;
  }

  async put(key: string, body: string | Uint8Array, contentType: string): Promise<void> {
    await this.s3().send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentType: contentType }));
  }

  async getBytes(key: string): Promise<Uint8Array | undefined> {
    let object;
    try {
      object = await this.s3().send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
    } catch (error) {
      if (error instanceof NoSuchKey || (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) return undefined;
      throw error;
    }
    if (!object.Body) throw new Error(`s3://${this.bucket}/${key} has no body`);
    return object.Body.transformToByteArray();
  }

  async getText(key: string): Promise<string> {
    const object = await this.s3().send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
    if (!object.Body) throw new Error(`s3://${this.bucket}/${key} has no body`);
    return object.Body.transformToString('utf8');
  }
}
