import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { localStateDir } from '@dispatch-ledger/client';

/** The project root (the folder holding package.json), wherever the command is run from. */
export const projectRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Where `ledger local up` keeps what `down` needs (pids, endpoints) and its logs: `<cwd>/.ledger/local`,
 * never beside the CLI's own code (an installed CLI's is inside node_modules). `LEDGER_STATE_DIR` moves
 * it (tests use a private one so they never touch a running platform). The client's `local: true` reads
 * the same place: one definition, the client's.
 */
export function stateDir(env: NodeJS.ProcessEnv = process.env, cwd: string = process.cwd()): string {
  return localStateDir(env, cwd);
}

/**
 * A user-level cache outside the clone, so fresh clones and CI reuse the DynamoDB Local jar.
 * `DISPATCH_LEDGER_CACHE` overrides it; otherwise `$XDG_CACHE_HOME/dispatch-ledger` or `~/.cache/dispatch-ledger`.
 */
export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.DISPATCH_LEDGER_CACHE) return resolve(env.DISPATCH_LEDGER_CACHE);
  const base = env.XDG_CACHE_HOME ? resolve(env.XDG_CACHE_HOME) : join(homedir(), '.cache');
  return join(base, 'dispatch-ledger');
}
