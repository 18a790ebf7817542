import { parseCommandArgs } from './args.js';
import { startStatusPage } from '../ui/server.js';
import { CONNECTION_OPTIONS, connect, connectionArgs } from './connect.js';
import { UsageError } from './operations.js';

export const UI_USAGE = 'usage: ledger ui [--port N] [--stack NAME | --api-url URL]';

/**
 * `ledger ui`: the status page (CONTRACT §13) on 127.0.0.1, reading the ledger as the operator
 * (signed from the default credential chain on a deployed stack). Prints its URL and serves until
 * Ctrl-C (SIGINT) or SIGTERM; exit 0 then.
 */
export async function ui(args: string[], print: (line: string) => void): Promise<number> {
  const { values } = (() => {
    try {
      return parseCommandArgs({ args, options: { ...CONNECTION_OPTIONS, port: { type: 'string', default: '0' } } });
    } catch (error) {
      throw new UsageError(`${error instanceof Error ? error.message : String(error)}\n${UI_USAGE}`);
    }
  })();
  if (!/^\d{1,5}$/.test(values.port) || Number(values.port) > 65_535) throw new UsageError(`--port must be a port number 0..65535 (0: any free port), got "${values.port}"\n${UI_USAGE}`);
  const client = await connect(values);
  const page = await startStatusPage({ client, port: Number(values.port), connection: connectionArgs(values) });
  print(`status page: ${page.url}  (reading ${(await client.endpoints()).apiUrl} as the operator; Ctrl-C to stop)`);
  await new Promise<void>((resolveSignal) => {
    process.once('SIGINT', () => resolveSignal());
    process.once('SIGTERM', () => resolveSignal());
  });
  await page.close();
  print('status page stopped');
  return 0;
}
