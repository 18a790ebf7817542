import { parseCommandArgs } from './args.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CONNECTION_OPTIONS, connect, originOf } from './connect.js';
import { ledgerMcpServer, MAX_MESSAGE_BYTES, type McpLog } from './mcp-server.js';
import { UsageError } from './operations.js';
import { ORIGIN } from '@dispatch-ledger/protocol';

export const MCP_USAGE = 'usage: ledger mcp [--origin O] [--stack NAME | --api-url URL [--queue-url U]] [--region R]   (--origin required with --stack or --api-url)';

/** One JSON line on stderr: stdout carries the MCP messages and nothing else. */
const logToStderr: McpLog = (entry) => {
  process.stderr.write(`${JSON.stringify({ at: new Date().toISOString(), ...entry })}\n`);
};

/**
 * `ledger mcp`: the ledger's MCP server over stdio (CONTRACT §13), for an MCP client to start as a
 * subprocess. It serves until its client closes stdin, then exits 0. `print` is unused: stdout is
 * the MCP channel, and a stray line there would break the client's framing.
 */
export async function mcp(args: string[], _print: (line: string) => void): Promise<number> {
  const { values } = (() => {
    try {
      return parseCommandArgs({ args, options: { ...CONNECTION_OPTIONS, origin: { type: 'string' } } });
    } catch (error) {
      throw new UsageError(`${error instanceof Error ? error.message : String(error)}\n${MCP_USAGE}`);
    }
  })();
  // Remotely the origin is the credentials' (the ledger answers 404 for any other), and a model cannot
  // tell a wrong one from an empty ledger: it is given, never guessed (regression: "planner" by default,
  // so every dispatch was refused as another origin's and every read answered 404).
  if ((values.stack !== undefined || values['api-url'] !== undefined) && values.origin === undefined && !process.env.LEDGER_ORIGIN) {
    throw new UsageError(`with --stack or --api-url, give --origin O (or LEDGER_ORIGIN): the origin your credentials speak for\n${MCP_USAGE}`);
  }
  const origin = originOf(values.origin);
  if (!ORIGIN.test(origin)) throw new UsageError(`--origin must match ${ORIGIN}, got ${JSON.stringify(origin.slice(0, 100))}\n${MCP_USAGE}`);
  const client = await connect(values, { origin });
  const server = ledgerMcpServer(client, { origin, log: logToStderr });
  // A message up to the queue's maximum, JSON-escaped, plus the JSON-RPC envelope around it.
  const transport = new StdioServerTransport(process.stdin, process.stdout, { maxBufferSize: 4 * MAX_MESSAGE_BYTES });
  const closed = new Promise<void>((resolve) => {
    server.server.onclose = resolve;
  });
  // The client ends stdin to stop us (the SDK's client does, then signals); the transport alone would wait on.
  process.stdin.once('end', () => void server.close());
  await server.connect(transport);
  const { apiUrl, local } = await client.endpoints();
  logToStderr({ level: 'info', msg: 'ledger mcp serving on stdio', apiUrl, remote: !local, origin });
  await closed;
  logToStderr({ level: 'info', msg: 'ledger mcp stopped' });
  return 0;
}
