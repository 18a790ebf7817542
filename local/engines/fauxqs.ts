import { nodeArgsOf } from '../entry-points.js';
import { answersHttp, freePort, spawnEngine, waitUntilReady, type SpawnedEngine } from './process.js';

export interface FauxqsEngine extends SpawnedEngine {
  readonly endpoint: string;
  readonly port: number;
}

/** Starts fauxqs@1.9.2 (SQS + S3 on one endpoint) in a child process of the current node. */
export async function startFauxqs(options: { logFile: string; port?: number; spawned?: (pid: number) => void }): Promise<FauxqsEngine> {
  const port = options.port ?? (await freePort());
  const engine = spawnEngine('fauxqs', process.execPath, [...nodeArgsOf('fauxqs-main'), String(port)], {
    logFile: options.logFile,
    env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  });
  options.spawned?.(engine.pid);
  const endpoint = `http://127.0.0.1:${port}`;
  await waitUntilReady(engine, () => answersHttp(`${endpoint}/health`), 30_000);
  return { ...engine, endpoint, port };
}
