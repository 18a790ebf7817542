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
  async getBytes(key: string): Promise<Uint8Array | undefined> {
    return this.objects.get(key);
  }
}
