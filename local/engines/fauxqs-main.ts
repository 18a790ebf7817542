/**
 * Child-process entry for fauxqs (SQS and S3). Run as its own process so `ledger local down`
 * stops it by pid like every other engine. Usage: node --import tsx fauxqs-main.ts <port>
 */
import { startFauxqs } from 'fauxqs';

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0) {
  process.stderr.write('usage: fauxqs-main <port>\n');
  process.exit(2);
}
const server = await startFauxqs({ port, logger: false });
process.stdout.write(`${JSON.stringify({ msg: 'fauxqs listening', port: server.port })}\n`);
const stop = (): void => {
  void server.stop().finally(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
