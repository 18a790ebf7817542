import { spawnSync } from 'node:child_process';
import { answersHttp, freePort, requireTool, spawnEngine, waitUntilReady, type SpawnedEngine } from './process.js';

export interface MotoEngine extends SpawnedEngine {
  readonly endpoint: string;
  readonly port: number;
}

/**
 * moto's server, started through a few lines of Python that first cache `jsonpath_ng.ext.parse`. moto
 * parses the eight JSONPaths of EventBridge's default input template for every event it delivers to a
 * target, and each parse builds a yacc parser: ~200 ms of CPU per delivered event (measured: a
 * 10-entry PutEvents took 2,083 ms, 59 ms with the cache). The parsed paths are pure functions of their
 * text, so caching them changes nothing moto does, only how long it takes.
 */
const LAUNCHER = [
  // PROCESS_MARKERS finds moto by this text in its command line.
  '# moto_server, with a jsonpath cache (dispatch-ledger)',
  'import functools, sys',
  'import jsonpath_ng.ext as ext',
  'ext.parse = functools.lru_cache(maxsize=1024)(ext.parse)',
  'from moto.server import main',
  'main(sys.argv[1:])',
].join('\n');

/** The Python that has moto and jsonpath_ng, to run the launcher with; undefined when there is none. */
function launcherPython(): string | undefined {
  for (const python of ['python3', 'python']) {
    const probe = spawnSync(python, ['-c', 'import moto.server, jsonpath_ng.ext'], { stdio: 'ignore', timeout: 30_000 });
    if (probe.status === 0) return python;
  }
  return undefined;
}

/**
 * Starts moto server bound to 127.0.0.1: EventBridge (real rule matching and delivery to targets)
 * and Secrets Manager for the local platform. Through the launcher when its Python is found; else the
 * plain `moto_server` (correct, only slower to deliver events).
 */
export async function startMoto(options: { logFile: string; port?: number }): Promise<MotoEngine> {
  const motoServer = requireTool('moto_server', 'install moto server: pip install "moto[server]"');
  const port = options.port ?? (await freePort());
  const args = ['-H', '127.0.0.1', '-p', String(port)];
  const python = launcherPython();
  const engine = python
    ? spawnEngine('moto', python, ['-c', LAUNCHER, ...args], { logFile: options.logFile })
    : spawnEngine('moto', motoServer, args, { logFile: options.logFile });
  const endpoint = `http://127.0.0.1:${port}`;
  await waitUntilReady(engine, () => answersHttp(`${endpoint}/moto-api/`), 30_000);
  return { ...engine, endpoint, port };
}
