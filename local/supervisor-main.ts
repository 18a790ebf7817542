/**
 * The local platform's supervisor process, started by `ledger local up` (detached, its output in
 * `<state>/logs/platform.log`). It runs the platform, records its state for `down`, and on SIGTERM or
 * SIGINT stops everything it started, engines included.
 * Usage: node --import tsx local/supervisor-main.ts --state-dir DIR --tick SECONDS [--sigv4]
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createLedgerClient } from '@dispatch-ledger/client';
import { startStatusPage, type StatusPage } from '../ui/server.js';
import { isAlive } from './engines/process.js';
import { startPlatform, type RunningPlatform } from './platform.js';
import { writeState, type LocalState } from './state.js';

const { values } = parseArgs({
  options: {
    'state-dir': { type: 'string' },
    tick: { type: 'string', default: '60' },
    // Foreground `up`: the terminal's CLI. If it dies without stopping us (killed, closed terminal),
    // the platform stops too instead of running on unseen.
    'parent-pid': { type: 'string' },
    // AWS_IAM auth on the API (CONTRACT §2 v2): SigV4 required, callers in <state-dir>/credentials.json.
    sigv4: { type: 'boolean', default: false },
    // The publisher's events profile (CONTRACT §3 v2), as the construct's `events` prop sets it in AWS.
    events: { type: 'string', default: 'all' },
  },
});
const stateDir = values['state-dir'];
const tickSeconds = Number(values.tick);
if (!stateDir || !(tickSeconds > 0)) {
  process.stderr.write('usage: supervisor-main --state-dir DIR --tick SECONDS\n');
  process.exit(2);
}

const log = (line: Record<string, unknown>): void => {
  process.stdout.write(`${JSON.stringify({ at: new Date().toISOString(), ...line })}\n`);
};
process.on('unhandledRejection', (reason) => log({ level: 'error', msg: 'unhandled rejection', error: String(reason) }));

const startedAt = new Date();
const base: LocalState = {
  status: 'starting',
  pid: process.pid,
  startedAt: startedAt.toISOString(),
  pids: { supervisor: process.pid },
  logDir: join(stateDir, 'logs'),
  invocationLog: join(stateDir, 'invocations.jsonl'),
};
writeState(stateDir, base);

let platform: RunningPlatform | undefined;
let statusPage: StatusPage | undefined;
// Each engine's pid, recorded the moment it is spawned: `down` (or a later `up`) stops by pid what a
// killed supervisor left, even one killed before the platform was ready.
const enginePids: Record<string, number> = {};
let starting = true;
let stopping = false;
const stopAndExit = async (code: number): Promise<never> => {
  await statusPage?.close().catch(() => undefined);
  await platform?.stop().catch(() => undefined);
  log({ level: 'info', msg: 'stopped' });
  process.exit(code);
};
const shutdown = (signal: string): void => {
  if (stopping) return;
  stopping = true;
  log({ level: 'info', msg: 'stopping', signal });
  // While starting, the start path stops what it started once it returns (regression: exiting here left
  // every engine the start had spawned running, recorded nowhere).
  if (!starting) void stopAndExit(0);
};
process.on('SIGTERM', () => shutdown('SIGTERM'));
const parentPid = values['parent-pid'] ? Number(values['parent-pid']) : undefined;
if (parentPid !== undefined) {
  setInterval(() => {
    if (!isAlive(parentPid)) shutdown('parent exited');
  }, 1_000).unref();
}
process.on('SIGINT', () => shutdown('SIGINT'));

try {
  platform = await startPlatform({
    stateDir,
    tickSeconds,
    log,
    sigv4: values.sigv4,
    environment: { PUBLISHED_EVENTS: values.events },
    spawned: (role, pid) => {
      enginePids[role] = pid;
      writeState(stateDir, { ...base, pids: { supervisor: process.pid, ...enginePids } });
    },
  });
  // The status page next to the API (`npm start` prints its URL), reading this platform as the operator.
  if (!stopping) statusPage = await startStatusPage({ client: createLedgerClient({ local: platform.info }), log: (line) => log({ component: 'status-page', ...line }) });
} catch (error) {
  const message = error instanceof Error ? error.message : String(error);
  log({ level: 'error', msg: 'start failed', error: message });
  // Started before a later part (the status page) failed: nothing may outlive a failed start.
  await platform?.stop().catch(() => undefined);
  writeState(stateDir, { ...base, status: 'failed', error: message });
  process.exit(1);
}
starting = false;
if (stopping || !statusPage) {
  await stopAndExit(0);
} else {
  const readyMs = Date.now() - startedAt.getTime();
  writeState(stateDir, {
    ...base,
    status: 'ready',
    readyMs,
    pids: { supervisor: process.pid, ...platform.pids },
    info: platform.info,
    ledgerTable: platform.resources.ledgerTable,
    statusPageUrl: statusPage.url,
  });
  // The log names the page without its token (the state file, 0600, keeps the URL to open).
  log({ level: 'info', msg: 'ready', readyMs, ...platform.info, statusPage: statusPage.origin });
}
