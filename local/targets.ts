import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { CreateSecretCommand, PutSecretValueCommand, ResourceExistsException, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { TARGET_NAME } from '@dispatch-ledger/protocol';
import { z } from 'zod';
import { MAX_CONCURRENT_RUNS_LIMIT, type HttpTargetRegistration } from '../shared/targets/port.js';
import { ensureStateDir, writePrivateJson } from './state.js';

/**
 * Targets a user registers on the local platform (`ledger local target add|list|remove`): their own
 * workers, listening on the loopback. Kept in `<stateDir>/targets.json` (mode 0600: it holds their
 * secrets), so a registration survives `down` / `up`; the platform registers each at start, and the CLI
 * registers one at once on a platform that is running. Plain http is allowed here and only here: the
 * AWS registration path (`ledger registry target put`, the construct) keeps refusing it.
 */

/** The platform's own targets: a user's target cannot take their names. */
export const RESERVED_LOCAL_TARGETS = ['demo-agent', 'demo-agent-limited', 'desk', 'demo-sfn', 'example-worker'] as const;

/** Where the local platform's functions may read target secrets from (their `TARGET_SECRET_PREFIX`). */
export const LOCAL_TARGET_SECRET_PREFIX = 'dispatch-ledger/local/targets/';

/** The longest secret a `--secret-file` may hold (an authorization header value). */
export const MAX_LOCAL_SECRET_BYTES = 4_096;

/** The longest URL a local target may have. */
export const MAX_LOCAL_URL_CHARS = 2_048;

const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

export class LocalTargetError extends Error {
  override readonly name = 'LocalTargetError';
}

const LocalTarget = z.strictObject({
  name: z.string().regex(TARGET_NAME),
  url: z.string().max(MAX_LOCAL_URL_CHARS),
  maxConcurrentRuns: z.optional(z.number().int().min(1).max(MAX_CONCURRENT_RUNS_LIMIT)),
  secret: z.optional(z.string().min(1).max(MAX_LOCAL_SECRET_BYTES)),
  addedAt: z.string(),
});
export type LocalTarget = z.infer<typeof LocalTarget>;

const TargetsFile = z.strictObject({ targets: z.array(LocalTarget).max(1_000) });

export const targetsFile = (stateDir: string): string => join(stateDir, 'targets.json');

/**
 * The registered targets; a file that does not parse, or holds a target `add` would refuse (edited by
 * hand), is an error that names it, never an empty list. Its errors never quote the file: it holds secrets.
 */
export function readLocalTargets(stateDir: string): LocalTarget[] {
  const file = targetsFile(stateDir);
  if (!existsSync(file)) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    throw new LocalTargetError(`${file} is not JSON; fix or remove it`);
  }
  const checked = TargetsFile.safeParse(parsed);
  if (!checked.success) throw new LocalTargetError(`${file} does not hold local targets (at ${checked.error.issues[0]?.path.join('.') ?? '?'}); fix or remove it`);
  for (const target of checked.data.targets) {
    const url = localTargetUrl(target.url);
    const problem = localTargetNameProblem(target.name) ?? ('problem' in url ? `its url: ${url.problem}` : undefined);
    if (problem) throw new LocalTargetError(`${file} holds a target add would refuse: ${problem}; fix or remove it`);
  }
  return checked.data.targets;
}

/** Written whole, then renamed, mode 0600 from the start (it holds the targets' secrets). */
export function writeLocalTargets(stateDir: string, targets: readonly LocalTarget[]): void {
  // What the next start could not read is never written.
  const checked = TargetsFile.parse({ targets });
  ensureStateDir(stateDir);
  writePrivateJson(targetsFile(stateDir), checked);
}

/** Why `name` cannot be a local target's name, or undefined. */
export function localTargetNameProblem(name: string): string | undefined {
  if (!TARGET_NAME.test(name)) return `"${name.slice(0, 80)}" is not a target name (lowercase letters, digits and "-", at most 64, starting with a letter or digit)`;
  if ((RESERVED_LOCAL_TARGETS as readonly string[]).includes(name)) return `"${name}" is the local platform's own target (reserved: ${RESERVED_LOCAL_TARGETS.join(', ')})`;
  return undefined;
}

/** The URL as the ledger will call it (no trailing slash), or why it cannot be a local target's. */
export function localTargetUrl(text: string): { url: string } | { problem: string } {
  if (text.length > MAX_LOCAL_URL_CHARS) return { problem: `it is over ${MAX_LOCAL_URL_CHARS} characters` };
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { problem: `"${text.slice(0, 200)}" is not a URL` };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { problem: `${url.protocol} is not http or https` };
  if (!LOOPBACK_HOSTS.has(url.hostname)) return { problem: `${url.hostname} is not the loopback: a local target listens on 127.0.0.1, [::1] or localhost` };
  // A default port (80, 443) is named and then dropped by URL: read it from the text.
  if (!/^[a-z]+:\/\/(?:[^/?#@]*@)?(?:\[[^\]]*\]|[^/?#:]*):\d+(?:[/?#]|$)/i.test(text)) return { problem: 'it names no port (a local worker listens on one: http://127.0.0.1:PORT)' };
  if (url.username !== '' || url.password !== '') return { problem: 'it carries credentials: use --secret-file' };
  if (url.search !== '' || url.hash !== '') return { problem: 'it has a query or a fragment' };
  return { url: url.href.replace(/\/+$/, '') };
}

/** A secret file's value: its text without the final newline; bounded, one line, printable. */
export function readSecretFile(file: string): string {
  let size: number;
  try {
    size = statSync(file).size;
  } catch {
    throw new LocalTargetError(`--secret-file ${file}: no such file`);
  }
  if (size > MAX_LOCAL_SECRET_BYTES + 2) throw new LocalTargetError(`--secret-file ${file}: over ${MAX_LOCAL_SECRET_BYTES} bytes`);
  const value = readFileSync(file, 'utf8').replace(/\r?\n$/, '');
  if (Buffer.byteLength(value) > MAX_LOCAL_SECRET_BYTES) throw new LocalTargetError(`--secret-file ${file}: over ${MAX_LOCAL_SECRET_BYTES} bytes`);
  if (value === '') throw new LocalTargetError(`--secret-file ${file} is empty`);
  // It travels as an HTTP header value.
  if (/[^\x20-\x7e]/.test(value)) throw new LocalTargetError(`--secret-file ${file}: one line of printable ASCII (it is sent as the authorization header)`);
  return value;
}

/** The registration the ledger's table holds for a local target. */
export function registrationOf(target: LocalTarget): HttpTargetRegistration {
  return {
    name: target.name,
    kind: 'http',
    baseUrl: target.url,
    ...(target.secret === undefined ? {} : { secretRef: `${LOCAL_TARGET_SECRET_PREFIX}${target.name}` }),
    ...(target.maxConcurrentRuns === undefined ? {} : { maxConcurrentRuns: target.maxConcurrentRuns }),
  };
}

/** What registering needs of a running platform: its table and its Secrets Manager (moto). */
export interface LocalRegistry {
  putTarget(target: HttpTargetRegistration): Promise<void>;
  deleteTarget(name: string): Promise<void>;
}

/** Puts the target (and its secret, first) where the platform's functions read them. */
export async function registerLocalTarget(registry: LocalRegistry, secrets: SecretsManagerClient, target: LocalTarget): Promise<void> {
  if (target.secret !== undefined) {
    const name = `${LOCAL_TARGET_SECRET_PREFIX}${target.name}`;
    try {
      await secrets.send(new CreateSecretCommand({ Name: name, SecretString: target.secret }));
    } catch (error) {
      if (!(error instanceof ResourceExistsException)) throw error;
      await secrets.send(new PutSecretValueCommand({ SecretId: name, SecretString: target.secret }));
    }
  }
  await registry.putTarget(registrationOf(target));
}
