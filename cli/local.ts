import { spawn } from 'node:child_process';
import { mkdirSync, openSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { checkPrerequisites } from '../local/engines/index.js';
import { nodeArgsOf } from '../local/entry-points.js';
import { ensureDynamoDbLocal } from '../local/engines/dynamodb-local.js';
import { isAlive, isOurs, stopPid, tailOf } from '../local/engines/process.js';
import { clearState, ensureStateDir, readState, type LocalState } from '../local/state.js';

export class LocalPlatformError extends Error {
  override readonly name = 'LocalPlatformError';
}

const READY_TIMEOUT_MS = 180_000;

/** The state of a platform that is running now, or undefined (a stale state file is ignored). */
export function runningState(stateDir: string): LocalState | undefined {
  const state = readState(stateDir);
  return state && isOurs('supervisor', state.pid) ? state : undefined;
}

/**
 * Starts the supervisor detached from this terminal and waits until it reports ready (or failed).
 * Returns the ready state; the supervisor keeps running after this process exits.
 */
export async function localUp(options: {
  stateDir: string;
  tickSeconds: number;
  /** Foreground: the supervisor stops itself if this process goes away without stopping it. */
  foreground: boolean;
  progress: (message: string) => void;
  /** AWS_IAM auth on the local API (CONTRACT §2 v2): SigV4 required, callers from `<stateDir>/credentials.json`. */
  sigv4?: boolean;
  /** The events profile of the local publisher (`all`, `attention`, or detail-types joined by commas). */
  events?: string;
}): Promise<LocalState> {
  const { stateDir } = options;
  const existing = runningState(stateDir);
  if (existing) {
    throw new LocalPlatformError(
      `the local platform is already running (pid ${existing.pid}); stop it with: npx ledger local down`,
    );
  }
  checkPrerequisites();
  // Fetch the jar here rather than in the supervisor, so a first run shows what it is waiting for.
  await ensureDynamoDbLocal({ log: options.progress });

  ensureStateDir(stateDir);
  mkdirSync(join(stateDir, 'logs'), { recursive: true });
  const left = await stopLeftovers(stateDir);
  if (left.length > 0) options.progress(`stopped ${left.length} processes an earlier platform left running (${left.join(', ')})`);
  const logFile = join(stateDir, 'logs', 'platform.log');
  const out = openSync(logFile, 'w');
  const child = spawn(
    process.execPath,
    [
      ...nodeArgsOf('supervisor-main'),
      '--state-dir',
      stateDir,
      '--tick',
      String(options.tickSeconds),
      ...(options.foreground ? ['--parent-pid', String(process.pid)] : []),
      ...(options.sigv4 ? ['--sigv4'] : []),
      ...(options.events && options.events !== 'all' ? ['--events', options.events] : []),
    ],
    {
      detached: true,
      stdio: ['ignore', out, out],
      env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    },
  );
  closeSync(out);
  child.unref();
  const pid = child.pid;
  if (pid === undefined) throw new LocalPlatformError('could not start the local platform supervisor');

  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const state = readState(stateDir);
    if (state?.pid === pid && state.status === 'ready') return state;
    if (state?.pid === pid && state.status === 'failed') {
      await stopPid(pid);
      throw new LocalPlatformError(`the local platform failed to start: ${state.error ?? 'unknown error'}`);
    }
    if (!isAlive(pid)) {
      throw new LocalPlatformError(`the local platform exited during start; ${logFile}:\n${tailOf(logFile)}`);
    }
    await sleep(100);
  }
  await stopLocal(stateDir);
  throw new LocalPlatformError(`the local platform was not ready after ${READY_TIMEOUT_MS / 1000} s; see ${logFile}`);
}

/**
 * What a platform whose supervisor is gone left running (killed with -9, crashed), stopped by the pids
 * its state file recorded, before that file is cleared for a new start. Regression: `up` cleared it
 * at once, and each crash followed by `up` left one more DynamoDB Local, fauxqs and moto running.
 */
export async function stopLeftovers(stateDir: string): Promise<number[]> {
  if (runningState(stateDir)) throw new LocalPlatformError('the local platform is running: stop it with npx ledger local down');
  // stopLocal clears the state once what it names is stopped.
  return stopLocal(stateDir);
}

/**
 * Stops exactly what `up` started: the supervisor (which stops its engines), then — by pid — any
 * recorded process that is still there. A recorded pid is signalled only while its command line is
 * still ours. Returns the pids that were running.
 */
export async function stopLocal(stateDir: string): Promise<number[]> {
  const state = readState(stateDir);
  if (!state) return [];
  const recorded = (read: LocalState | undefined): Array<[string, number]> => (read ? Object.entries({ supervisor: read.pid, ...read.pids }) : []);
  const before = recorded(state).filter(([role, pid]) => isOurs(role, pid));
  if (isOurs('supervisor', state.pid)) await stopPid(state.pid, 15_000);
  // Read again: a supervisor stopped while starting recorded engines it spawned after the first read
  // (and one killed at the end of its grace left them running).
  const ours = [...before, ...recorded(readState(stateDir)).filter(([role, pid]) => isOurs(role, pid) && !before.some(([, known]) => known === pid))];
  const running = [...new Set(ours.map(([, pid]) => pid))];
  await Promise.all(ours.map(([role, pid]) => (isOurs(role, pid) ? stopPid(pid) : Promise.resolve())));
  const left = ours.filter(([role, pid]) => isOurs(role, pid)).map(([role, pid]) => `${role} ${pid}`);
  if (left.length > 0) throw new LocalPlatformError(`processes still running after stop: ${left.join(', ')}`);
  clearState(stateDir);
  return running;
}
