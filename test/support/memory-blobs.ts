import { createHash } from 'node:crypto';
import type { BlobStore } from '../../shared/ledger/port.js';

/** An in-memory blob store (the S3 port) for pure tests. */
export class MemoryBlobs implements BlobStore {
  readonly objects = new Map<string, Uint8Array>();
  async put(key: string, body: string | Uint8Array): Promise<void> {
    this.objects.set(key, typeof body === 'string' ? Buffer.from(body, 'utf8') : body);
  }
  async getText(key: string): Promise<string> {
    const body = this.objects.get(key);
    if (!body) throw new Error(`no object ${key}`);
    return Buffer.from(body).toString('utf8');
  }
  async digest(key: string) {
    const body = this.objects.get(key);
    return body ? { sha256: createHash('sha256').update(body).digest('hex'), bytes: body.length } : undefined;
  }
  async exists(key: string): Promise<boolean> {
    return this.objects.has(key);
  }
}
