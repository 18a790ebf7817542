/**
 * Watching what an AWS SDK v3 client sends, for the bench and the tests that count round trips: one
 * middleware at the `initialize` step, so each `send` is seen once (the SDK's own retries are not).
 */

/** The part of an SDK client a watch needs: its middleware stack. */
interface CommandHost {
  readonly middlewareStack: { add(middleware: unknown, options: { step: 'initialize'; name: string }): void };
}

type Next = (args: { readonly input: object }) => Promise<unknown>;

let watches = 0;

/** Calls `seen` with each command `client` sends, by name without `Command` (`PutEvents`, `GetObject`), and its input. */
export function watchCommands(client: CommandHost, seen: (command: string, input: Readonly<Record<string, unknown>>) => void): void {
  watches += 1;
  const middleware = (next: Next, context: { readonly commandName?: string }) => async (args: { readonly input: object }) => {
    seen((context.commandName ?? 'Unknown').replace(/Command$/, ''), args.input as Readonly<Record<string, unknown>>);
    return next(args);
  };
  client.middlewareStack.add(middleware, { step: 'initialize', name: `watchCommands${watches}` });
}

/** How many of each command `client` sends from now on, by name without `Command`; the map fills as it sends. */
export function countCommands(client: CommandHost): ReadonlyMap<string, number> {
  const counts = new Map<string, number>();
  watchCommands(client, (command) => counts.set(command, (counts.get(command) ?? 0) + 1));
  return counts;
}
