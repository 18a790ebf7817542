import { parseArgs } from 'node:util';
import { startDemoAgent } from './server.js';

/**
 * Runs the demo agent on its own, logging JSON lines to stdout:
 * `npx tsx local/demo-agent/main.ts --port 4010`. Stops cleanly on SIGINT/SIGTERM.
 */
const { values } = parseArgs({ options: { port: { type: 'string', default: '0' } } });
const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(JSON.stringify({ level: 'error', msg: 'invalid_port', port: values.port }));
  process.exit(2);
}

const agent = await startDemoAgent({ port, log: (line) => console.log(JSON.stringify(line)) });
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void agent.stop().then(() => process.exit(0));
  });
}
