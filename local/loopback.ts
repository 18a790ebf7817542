/** Anything with an SDK v3 middleware stack. */
interface WithMiddleware {
  middlewareStack: { add(middleware: unknown, options: { step: 'finalizeRequest'; name: string }): void };
}

/**
 * Fails any request of this client that would leave 127.0.0.1, before it is sent: tests prove where
 * traffic goes without ever sending it anywhere else. Used by the tests and the bench.
 */
export function loopbackOnly<C extends WithMiddleware>(client: C): C {
  client.middlewareStack.add(
    (next: (args: { request: unknown }) => Promise<unknown>) => async (args: { request: unknown }) => {
      const hostname = (args.request as { hostname?: string }).hostname;
      if (hostname !== '127.0.0.1') throw new Error(`request to ${hostname} refused: only 127.0.0.1 is allowed here`);
      return next(args);
    },
    { step: 'finalizeRequest', name: 'loopbackOnly' },
  );
  return client;
}
