import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { cacheDir } from '../paths.js';
import { IntegrityError } from './errors.js';
import { freePort, requireTool, spawnEngine, waitUntilReady, type SpawnedEngine } from './process.js';

const run = promisify(execFile);

/**
 * DynamoDB Local, the AWS-built engine, as shipped in `emulator/` of this npm package.
 * Pinned by version and by the registry's sha512 integrity of the tarball (DynamoDB Local 1.25.1).
 * The package's own ~280 dependencies are never installed: only the jar folder is extracted.
 */
export const DYNAMODB_LOCAL_PACKAGE = {
  name: 'amplify-dynamodb-simulator',
  version: '2.9.30',
  integrity:
    'sha512-xTeeRLvzEfqyd5lh3bH4c0kHvSHHmmhD5ZDsHFKAQ5g2Zl6JqlFdutaQhCLHzxEp6Ry1o7TB6niIoXuQAnSewQ==',
} as const;

export function dynamoDbLocalDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(cacheDir(env), 'dynamodb-local', DYNAMODB_LOCAL_PACKAGE.version);
}

async function sha512Integrity(file: string): Promise<string> {
  const hash = createHash('sha512');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return `sha512-${hash.digest('base64')}`;
}

/**
 * Returns the folder holding `DynamoDBLocal.jar`, fetching it on first use:
 * `npm pack` of the pinned package into a temporary folder, integrity check, extraction of
 * `package/emulator/` only, then an atomic rename into the cache (so a half-written cache is never used,
 * and two processes fetching at once both end with the same complete folder).
 */
export async function ensureDynamoDbLocal(
  options: { env?: NodeJS.ProcessEnv; log?: (message: string) => void } = {},
): Promise<{ dir: string; fetched: boolean }> {
  const env = options.env ?? process.env;
  const dir = dynamoDbLocalDir(env);
  if (existsSync(join(dir, '.complete'))) return { dir, fetched: false };

  const npm = requireTool('npm', 'install Node.js 20 with npm');
  requireTool('tar', 'install tar (any POSIX system has it)');
  const parent = join(cacheDir(env), 'dynamodb-local');
  mkdirSync(parent, { recursive: true });
  const work = mkdtempSync(join(parent, '.fetch-'));
  try {
    const spec = `${DYNAMODB_LOCAL_PACKAGE.name}@${DYNAMODB_LOCAL_PACKAGE.version}`;
    options.log?.(`fetching DynamoDB Local (${spec}, ~56 MB, once) into ${dir}`);
    const { stdout } = await run(npm, ['pack', spec, '--json', '--pack-destination', work], {
      cwd: work,
      maxBuffer: 64 * 1024 * 1024,
    });
    const packed = JSON.parse(stdout) as Array<{ filename: string }>;
    const filename = packed[0]?.filename;
    if (!filename) throw new Error(`npm pack ${spec} printed no file name`);
    const tarball = join(work, filename);
    const actual = await sha512Integrity(tarball);
    if (actual !== DYNAMODB_LOCAL_PACKAGE.integrity) throw new IntegrityError(DYNAMODB_LOCAL_PACKAGE.integrity, actual);
    await run('tar', ['-xzf', tarball, '-C', work, 'package/emulator']);
    const emulator = join(work, 'package', 'emulator');
    if (!existsSync(join(emulator, 'DynamoDBLocal.jar'))) throw new Error(`${spec} has no emulator/DynamoDBLocal.jar`);
    writeFileSync(join(emulator, '.complete'), `${DYNAMODB_LOCAL_PACKAGE.integrity}\n`);
    try {
      renameSync(emulator, dir);
    } catch (error) {
      // Someone else finished first: theirs is complete, use it.
      if (!existsSync(join(dir, '.complete'))) throw error;
    }
    return { dir, fetched: true };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

export interface DynamoDbLocalEngine extends SpawnedEngine {
  readonly endpoint: string;
  readonly port: number;
}

/**
 * Ready means it answers an API call: `ListTables` with 200. Its HTTP server answers before its storage
 * is up — a readiness check on any HTTP answer let a test file's first CreateTable meet a 500
 * `UnknownError` on a loaded machine (CI, 2026-12-07). Any key is taken locally, in a header of the
 * right form.
 */
export async function listsTables(endpoint: string): Promise<boolean> {
  const response = await fetch(endpoint, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-amz-json-1.0',
      'x-amz-target': 'DynamoDB_20120810.ListTables',
      authorization: 'AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=00',
    },
    body: '{"Limit":1}',
    signal: AbortSignal.timeout(1_000),
  });
  await response.arrayBuffer();
  return response.status === 200;
}

/**
 * Starts DynamoDB Local in memory (or under `dataDir`), shared across credentials and regions
 * (`-sharedDb`) so the CLI, handlers and tests see the same tables. It listens on every interface
 * (it has no bind option); every client of ours talks to 127.0.0.1.
 */
export async function startDynamoDbLocal(options: {
  logFile: string;
  port?: number;
  dataDir?: string;
  env?: NodeJS.ProcessEnv;
  log?: (message: string) => void;
  /** Told the engine's pid as soon as it is spawned, before it is ready (so a stop meanwhile can find it). */
  spawned?: (pid: number) => void;
  /**
   * For an engine that lives seconds to minutes (a test file's): the JVM's first-tier compiler only,
   * which halves its start (2.6 → 1.4 s of CPU, 1.7 → 1.3 s to ready on a 2-core machine).
   */
  shortLived?: boolean;
}): Promise<DynamoDbLocalEngine> {
  const java = requireTool('java', 'install a Java 17+ runtime (e.g. `apt-get install openjdk-17-jre-headless`) for DynamoDB Local');
  const { dir } = await ensureDynamoDbLocal(options);
  const port = options.port ?? (await freePort());
  const storage = options.dataDir ? ['-dbPath', options.dataDir] : ['-inMemory'];
  const engine = spawnEngine(
    'dynamodb-local',
    java,
    [
      ...(options.shortLived ? ['-XX:TieredStopAtLevel=1'] : []),
      `-Djava.library.path=${join(dir, 'DynamoDBLocal_lib')}`,
      '-jar',
      join(dir, 'DynamoDBLocal.jar'),
      '-port',
      String(port),
      ...storage,
      '-sharedDb',
      '-disableTelemetry',
    ],
    { logFile: options.logFile, cwd: dir },
  );
  options.spawned?.(engine.pid);
  const endpoint = `http://127.0.0.1:${port}`;
  await waitUntilReady(engine, () => listsTables(endpoint), 60_000);
  return { ...engine, endpoint, port };
}
