import { parseCommandArgs } from './args.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CONNECTION_OPTIONS, connect, originOf } from './connect.js';
import { ledgerMcpServer, type McpLog } from './mcp-server.js';
import { UsageError } from './operations.js';
import { clip, MAX_MESSAGE_BYTES, ORIGIN } from '@dispatch-ledger/protocol';

export const MCP_USAGE = 'usage: ledger mcp [--origin O] [--stack NAME | --api-url URL [--queue-url U]] [--region R]   (--origin required with --stack or --api-url)';

/** One JSON line on stderr: stdout carries the MCP messages and nothing else. */
const logToStderr: McpLog = (entry) => {
  process.stderr.write(`${JSON.stringify({ at: new Date().toISOString(), ...entry })}\n`);
};

/**
 * `ledger mcp`: the ledger's MCP server over stdio (CONTRACT §13), for an MCP client to start as a
 * subprocess. It serves until its client closes stdin, then exits 0 (1 when the transport closed first:
 * a request line over its buffer). `print` is unused: stdout is
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
  let stopped = false;
  process.stdin.once('end', () => {
    stopped = true;
    void server.close();
  });
  // The transport closes itself on a line it cannot hold (over maxBufferSize): that is a failure, said as one.
  let lastError: string | undefined;
  server.server.onerror = (error) => {
    // Clipped: the SDK's message may carry a whole request (an answer to an id it does not know).
    lastError = clip(error.message, 1000);
    logToStderr({ level: 'error', msg: 'mcp protocol error', error: lastError });
  };
  await server.connect(transport);
  const { apiUrl, local } = await client.endpoints();
  logToStderr({ level: 'info', msg: 'ledger mcp serving on stdio', apiUrl, remote: !local, origin });
  await closed;
  if (!stopped) {
    // Regression: it exited 0, as if its client had closed it, and the client saw its server gone without a word.
    logToStderr({ level: 'error', msg: 'ledger mcp stopped: its transport closed before its client ended stdin', error: lastError ?? null });
    // The transport only paused stdin: a socket its client still holds open would keep the process from ending.
    process.stdin.destroy();
    return 1;
  }
  logToStderr({ level: 'info', msg: 'ledger mcp stopped' });
  return 0;
}
