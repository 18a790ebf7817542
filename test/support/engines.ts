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

/** Anything with an SDK v3 middleware stack. */
interface WithMiddleware {
  middlewareStack: { add(middleware: unknown, options: { step: 'finalizeRequest'; name: string }): void };
}

/**
 * Fails any request of this client that would leave 127.0.0.1, before it is sent: tests prove where
 * traffic goes without ever sending it anywhere else.
 */
export function loopbackOnly<C extends WithMiddleware>(client: C): C {
  client.middlewareStack.add(
    (next: (args: { request: unknown }) => Promise<unknown>) => async (args: { request: unknown }) => {
      const hostname = (args.request as { hostname?: string }).hostname;
      if (hostname !== '127.0.0.1') throw new Error(`request to ${hostname} refused: tests talk only to 127.0.0.1`);
      return next(args);
    },
    { step: 'finalizeRequest', name: 'loopbackOnly' },
  );
  return client;
}
