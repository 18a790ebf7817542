import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { MAX_MESSAGE_BYTES } from '@dispatch-ledger/protocol';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../local/paths.js';

/**
 * `ledger mcp`'s own process over stdio (cli/mcp.ts): how it ends. Its API URL is a closed loopback port it
 * never calls here — nothing in this test reaches a ledger.
 */
describe('ledger mcp over stdio', () => {
  // Regression: a request line longer than the transport holds (4 × the queue's maximum message) closed the
  // transport, and the server exited 0 as if its client had closed it: the client saw its server gone, unsaid.
  it('exits 1 and says why when its transport closes on a line it cannot hold, with stdin still open', async () => {
    const server = spawn(process.execPath, ['bin/ledger.mjs', 'mcp', '--api-url', 'http://127.0.0.1:9', '--origin', 'planner', '--region', 'us-east-1'], {
      cwd: projectRoot,
      env: { ...process.env, LEDGER_STATE_DIR: '/dev/null/none', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    let stdout = '';
    server.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    server.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    // 'close', not 'exit': its output read to the end.
    const closed = once(server, 'close');
    // Only once it serves (its first log line), so that the line reaches the transport; an early end fails at once.
    await new Promise<void>((resolve, reject) => {
      server.stderr.on('data', () => stderr.includes('serving on stdio') && resolve());
      server.once('exit', (code) => reject(new Error(`ledger mcp ended (${String(code)}) before it served: ${stderr}`)));
    });
    // It stops reading before the line's end: the rest of the write is refused (EPIPE), as expected.
    server.stdin.on('error', () => undefined);
    server.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'x'.repeat(4 * MAX_MESSAGE_BYTES) } })}\n`);
    const [code] = await closed;
    server.stdin.destroy();
    expect(code).toBe(1);
    const lines = stderr
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { level: string; msg: string; error?: string });
    expect(lines.at(-1)).toMatchObject({ level: 'error', msg: 'ledger mcp stopped: its transport closed before its client ended stdin', error: expect.stringContaining('exceeded maximum size') });
    expect(stdout).toBe('');
  }, 30_000);
});
