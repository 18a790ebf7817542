import { answersHttp, freePort, requireTool, spawnEngine, waitUntilReady, type SpawnedEngine } from './process.js';

export interface MotoEngine extends SpawnedEngine {
  readonly endpoint: string;
  readonly port: number;
}

/**
 * Starts moto server bound to 127.0.0.1: EventBridge (real rule matching and delivery to targets)
 * and Secrets Manager for the local platform.
 */
export async function startMoto(options: { logFile: string; port?: number }): Promise<MotoEngine> {
  const motoServer = requireTool('moto_server', 'install moto server: pip install "moto[server]"');
  const port = options.port ?? (await freePort());
  const engine = spawnEngine('moto', motoServer, ['-H', '127.0.0.1', '-p', String(port)], {
    logFile: options.logFile,
  });
  const endpoint = `http://127.0.0.1:${port}`;
  await waitUntilReady(engine, () => answersHttp(`${endpoint}/moto-api/`), 30_000);
  return { ...engine, endpoint, port };
}
