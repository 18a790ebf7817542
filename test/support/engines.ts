import { randomUUID } from 'node:crypto';
import { inject } from 'vitest';
import { localClients, type LocalClients } from '../../local/clients.js';

/** Clients for the engines the integration global setup started. */
export function engineClients(): LocalClients {
  return localClients(inject('engines'));
}

/** A name no other test uses: tests share the engines, never their resources. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

export { loopbackOnly } from '../../local/loopback.js';
