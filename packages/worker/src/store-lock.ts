import { randomBytes } from 'node:crypto';
import { link, readFile, stat, unlink, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';

/**
 * One live worker per store (see `RunStore.lock`): a file store's lock is `.lock` in its directory, naming
 * the process that holds it — its machine, its pid, and when it started (a container restarted gives its
 * process the same pid again).
 */

/** Another live worker holds the store. */
export class StoreLockedError extends Error {
  override readonly name = 'StoreLockedError';
}

const LOCK_FILE = '.lock';
/** When this process started, to the second. */
const PROCESS_STARTED_AT = new Date(Math.round((Date.now() - process.uptime() * 1000) / 1000) * 1000).toISOString();
const HOST = hostname();
/** A lock file that cannot be read and is younger than this is one being written, not one a crash left. */
const UNREADABLE_GRACE_MS = 10_000;

/**
 * Takes `dir` for this process. The lock is written whole to a temporary file and linked into place (a link
 * fails if the name is taken), so it is never seen empty. One left by a process of this machine that is
 * gone (a crash, a kill -9) is taken over one taker at a time: the taker holds `.lock.takeover` (created
 * exclusively, for the moment it takes), removes the lock only if it is still the one judged stale, and
 * links its own — of several processes starting at once, one wins and the others are refused.
 * Released, the lock is removed if it is still this process's.
 */
export async function lockDir(dir: string): Promise<{ release(): Promise<void> }> {
  const path = join(dir, LOCK_FILE);
  const mine = JSON.stringify({ host: HOST, pid: process.pid, processStartedAt: PROCESS_STARTED_AT, lockedAt: new Date().toISOString(), id: randomBytes(6).toString('hex') });
  const temp = join(dir, `.lock.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  const held = { release: async () => ((await readFile(path, 'utf8').catch(() => '')) === mine ? unlink(path).catch(() => undefined) : undefined) };
  try {
    await writeFile(temp, mine, { mode: 0o600, flag: 'wx' });
    for (let tries = 0; tries < 3; tries += 1) {
      try {
        await link(temp, path);
        return held;
      } catch (error) {
        if (!isCode(error, 'EEXIST')) throw error;
      }
      // A link that went through and answered EEXIST (a retransmitted request on NFS) is this process's own.
      if ((await readFile(path, 'utf8').catch(() => '')) === mine) return held;
      const stale = await staleLock(path, dir);
      if (stale !== undefined) await takeOver(path, dir, stale);
    }
    throw locked(dir, path, 'another worker took it as this one started');
  } finally {
    await unlink(temp).catch(() => undefined);
  }
}

/** Removes the stale lock `stale` if it is still there, holding `.lock.takeover` meanwhile; another taker under way refuses this one. */
async function takeOver(path: string, dir: string, stale: string): Promise<void> {
  const takeover = `${path}.takeover`;
  try {
    await writeFile(takeover, String(process.pid), { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if (!isCode(error, 'EEXIST')) throw error;
    // Held for a moment by a taker — never removed by name here: two takers could each remove the other's.
    // One a crash left (in that moment) is for a person to delete, as the message says.
    throw locked(dir, path, `another worker is taking it over (if none is starting, delete ${takeover} too)`);
  }
  try {
    if ((await readFile(path, 'utf8').catch(() => undefined)) === stale) await unlink(path).catch((error: unknown) => (isCode(error, 'ENOENT') ? undefined : Promise.reject(error)));
  } finally {
    await unlink(takeover).catch(() => undefined);
  }
}

/** The text of a lock its holder left (gone), or undefined when there is none any more; a held one throws StoreLockedError. */
async function staleLock(path: string, dir: string): Promise<string | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if (isCode(error, 'ENOENT')) return undefined;
    // Not readable by this user (another user's worker): held, as far as this process can tell.
    throw locked(dir, path, `its lock cannot be read (${error instanceof Error && 'code' in error ? String(error.code) : 'unreadable'})`);
  }
  let held: { host?: unknown; pid?: unknown; processStartedAt?: unknown } | undefined;
  try {
    held = JSON.parse(text) as typeof held;
  } catch {
    held = undefined;
  }
  if (typeof held?.pid !== 'number') {
    // Unreadable: a crash while writing it — unless it is young (a lock of an older kit being written).
    const age = Date.now() - (await stat(path).then((found) => found.mtimeMs, () => 0));
    if (age < UNREADABLE_GRACE_MS) throw locked(dir, path, 'its lock is being written');
    return text;
  }
  // Another machine's process (a shared volume): its life cannot be told from here.
  if (typeof held.host === 'string' && held.host !== HOST) throw locked(dir, path, `a worker on ${held.host.slice(0, 100)} holds it`);
  const pid = held.pid;
  const live = pid === process.pid ? held.processStartedAt === PROCESS_STARTED_AT : alive(pid);
  if (live) throw locked(dir, path, `another worker (process ${pid}) holds it`);
  return text;
}

function locked(dir: string, path: string, why: string): StoreLockedError {
  return new StoreLockedError(`the store ${dir} is taken: ${why}. One live worker per store — stop that worker, or give this one another name or store (if none runs, delete ${path})`);
}

/** Whether a process of this machine is running (signal 0 tests it; EPERM: it runs, as another user). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return isCode(error, 'EPERM');
  }
}

function isCode(error: unknown, code: string): boolean {
  return error instanceof Error && 'code' in error && error.code === code;
}
