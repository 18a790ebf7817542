import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, openSync, closeSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { delimiter, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { EngineStartError, MissingToolError } from './errors.js';

/** The full path of an executable on PATH, or undefined. */
export function which(tool: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, tool);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

export function requireTool(tool: string, install: string): string {
  const found = which(tool);
  if (!found) throw new MissingToolError(tool, `${tool} not found on PATH: ${install}`);
  return found;
}

/** A port that was free a moment ago on 127.0.0.1 (the OS picks it). */
export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error('could not read the assigned port'));
        return;
      }
      server.close(() => resolvePort(address.port));
    });
  });
}

export interface SpawnedEngine {
  readonly name: string;
  readonly pid: number;
  readonly logFile: string;
  readonly child: ChildProcess;
  /** Resolves when the process has exited. */
  readonly exited: Promise<number | null>;
}

/**
 * Starts a long-running engine with stdout and stderr going to its own log file.
 * The child is in its own process group, so a Ctrl-C meant for the CLI reaches the supervisor first,
 * and the supervisor stops each engine itself, by pid.
 */
export function spawnEngine(
  name: string,
  command: string,
  args: readonly string[],
  options: { logFile: string; cwd?: string; env?: NodeJS.ProcessEnv },
): SpawnedEngine {
  const out = openSync(options.logFile, 'w');
  try {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ['ignore', out, out],
      detached: true,
    });
    if (child.pid === undefined) {
      throw new EngineStartError(name, `${name} could not be started (${command})`);
    }
    const exited = new Promise<number | null>((resolveExit) => {
      child.once('exit', (code) => resolveExit(code));
      child.once('error', () => resolveExit(null));
    });
    return { name, pid: child.pid, logFile: options.logFile, child, exited };
  } finally {
    closeSync(out);
  }
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** SIGTERM, then SIGKILL if the process is still there after `graceMs`. Resolves once it is gone. */
export async function stopPid(pid: number, graceMs = 5_000): Promise<void> {
  if (!isAlive(pid)) return;
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    return;
  }
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) return;
    await sleep(50);
  }
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    return;
  }
  const killDeadline = Date.now() + 2_000;
  while (isAlive(pid) && Date.now() < killDeadline) await sleep(20);
}

export function tailOf(file: string, lines = 15): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/**
 * Polls `probe` until it resolves true. Fails fast, with the engine's log tail, if the process exits;
 * an engine not ready in `timeoutMs` is stopped before the error is thrown.
 */
export async function waitUntilReady(
  engine: SpawnedEngine,
  probe: () => Promise<boolean>,
  timeoutMs: number,
): Promise<void> {
  let exitCode: number | null | undefined;
  void engine.exited.then((code) => {
    exitCode = code;
  });
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (exitCode !== undefined) {
      throw new EngineStartError(
        engine.name,
        `${engine.name} exited (code ${exitCode}) before it was ready; log ${engine.logFile}:\n${tailOf(engine.logFile)}`,
      );
    }
    if (await probe().catch(() => false)) return;
    await sleep(50);
  }
  // Started detached: an engine that never came up is stopped here, not left running with its pid
  // recorded nowhere (regression: only DynamoDB Local's start did this; a slow fauxqs or moto stayed).
  await stopPid(engine.pid);
  throw new EngineStartError(
    engine.name,
    `${engine.name} was not ready after ${timeoutMs} ms; log ${engine.logFile}:\n${tailOf(engine.logFile)}`,
  );
}

/** True once something answers HTTP on the URL (any status: the engine is listening). */
export async function answersHttp(url: string): Promise<boolean> {
  const response = await fetch(url, { signal: AbortSignal.timeout(1_000) });
  await response.arrayBuffer();
  return true;
}

/** The command line of a running process ('' if unknown): /proc on Linux, `ps` elsewhere. */
export function commandLineOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
  } catch {
    try {
      return execFileSync('ps', ['-o', 'command=', '-p', String(pid)], { encoding: 'utf8' }).trim();
    } catch {
      return '';
    }
  }
}

/**
 * What each role's command line contains. `down` checks it before signalling a recorded pid, so a
 * pid the OS has since given to another program is never touched.
 */
export const PROCESS_MARKERS: Readonly<Record<string, string>> = {
  supervisor: 'supervisor-main',
  dynamodbLocal: 'DynamoDBLocal.jar',
  fauxqs: 'fauxqs-main',
  moto: 'moto_server',
};

export function isOurs(role: string, pid: number): boolean {
  const marker = PROCESS_MARKERS[role];
  return marker !== undefined && isAlive(pid) && commandLineOf(pid).includes(marker);
}
