import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { requireTool, stopPid, type SpawnedEngine } from './process.js';
import { startDynamoDbLocal } from './dynamodb-local.js';
import { startFauxqs } from './fauxqs.js';
import { startMoto } from './moto.js';

export { MissingToolError, EngineStartError, IntegrityError } from './errors.js';

export interface Engines {
  readonly region: string;
  readonly dynamodbEndpoint: string;
  /** fauxqs: SQS and S3 on one endpoint. */
  readonly sqsEndpoint: string;
  readonly s3Endpoint: string;
  /** moto: EventBridge and Secrets Manager on one endpoint. */
  readonly motoEndpoint: string;
  readonly pids: Readonly<Record<string, number>>;
  stop(): Promise<void>;
}

export const LOCAL_REGION = 'us-east-1';

/** Credentials the local engines accept; never real ones, so nothing local can reach AWS by mistake. */
export const LOCAL_CREDENTIALS = { accessKeyId: 'local', secretAccessKey: 'local' } as const;

/** Fails with one clear line per missing tool before anything is started. */
export function checkPrerequisites(): void {
  requireTool('java', 'install a Java 17+ runtime (e.g. `apt-get install openjdk-17-jre-headless`) for DynamoDB Local');
  requireTool('moto_server', 'install moto server: pip install "moto[server]"');
}

/**
 * Starts DynamoDB Local, fauxqs and moto on free ports of 127.0.0.1, in parallel.
 * If any of them fails, the others are stopped before the error is rethrown.
 */
export async function startEngines(options: {
  logDir: string;
  dataDir?: string;
  log?: (message: string) => void;
  /** Told each engine's pid (by its role in `pids`) as soon as it is spawned, before it is ready. */
  spawned?: (role: 'dynamodbLocal' | 'fauxqs' | 'moto', pid: number) => void;
}): Promise<Engines> {
  checkPrerequisites();
  mkdirSync(options.logDir, { recursive: true });
  if (options.dataDir) mkdirSync(options.dataDir, { recursive: true });
  const started: SpawnedEngine[] = [];
  const track = <T extends SpawnedEngine>(engine: Promise<T>): Promise<T> =>
    engine.then((value) => {
      started.push(value);
      return value;
    });
  const results = await Promise.allSettled([
    track(
      startDynamoDbLocal({
        logFile: join(options.logDir, 'dynamodb-local.log'),
        ...(options.dataDir ? { dataDir: options.dataDir } : {}),
        ...(options.log ? { log: options.log } : {}),
        spawned: (pid) => options.spawned?.('dynamodbLocal', pid),
      }),
    ),
    track(startFauxqs({ logFile: join(options.logDir, 'fauxqs.log'), spawned: (pid) => options.spawned?.('fauxqs', pid) })),
    track(startMoto({ logFile: join(options.logDir, 'moto.log'), spawned: (pid) => options.spawned?.('moto', pid) })),
  ]);
  const stopAll = async (): Promise<void> => {
    await Promise.all(started.map((engine) => stopPid(engine.pid)));
  };
  const [ddb, fauxqs, moto] = results;
  if (ddb.status === 'rejected' || fauxqs.status === 'rejected' || moto.status === 'rejected') {
    await stopAll();
    const failure = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    throw failure?.reason;
  }
  return {
    region: LOCAL_REGION,
    dynamodbEndpoint: ddb.value.endpoint,
    sqsEndpoint: fauxqs.value.endpoint,
    s3Endpoint: fauxqs.value.endpoint,
    motoEndpoint: moto.value.endpoint,
    pids: { dynamodbLocal: ddb.value.pid, fauxqs: fauxqs.value.pid, moto: moto.value.pid },
    stop: stopAll,
  };
}
