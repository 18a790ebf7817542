/**
 * Child-process entry for fauxqs (SQS and S3). Run as its own process so `ledger local down`
 * stops it by pid like every other engine. Usage: node --import tsx fauxqs-main.ts <port>
 *
 * Its app is built here and listens on 127.0.0.1 alone: fauxqs's own `startFauxqs` listens on every
 * interface (0.0.0.0), which let anyone on the network send dispatches, drain the DLQ or read evidence.
 */
import { buildApp } from 'fauxqs';

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0) {
  process.stderr.write('usage: fauxqs-main <port>\n');
  process.exit(2);
}
const app = buildApp({ logger: false });
await app.listen({ port, host: '127.0.0.1' });
process.stdout.write(`${JSON.stringify({ msg: 'fauxqs listening', port, host: '127.0.0.1' })}\n`);
const stop = (): void => {
  void app.close().finally(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
