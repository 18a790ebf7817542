import { spawnSync } from 'node:child_process';
import { answersHttp, freePort, requireTool, spawnEngine, waitUntilReady, type SpawnedEngine } from './process.js';

export interface MotoEngine extends SpawnedEngine {
  readonly endpoint: string;
  readonly port: number;
}

/**
 * moto's server, started through a few lines of Python that take two costs out of its hot paths
 * without changing what it does:
 * - `jsonpath_ng.ext.parse` is cached: moto parses the eight JSONPaths of EventBridge's default input
 *   template for every event it delivers, and each parse builds a yacc parser (~200 ms of CPU per
 *   delivered event; a 10-entry PutEvents took 850 ms, 12.5 ms with the cache). Parsed paths are pure
 *   functions of their text.
 * - SQS's clock reads `time.time()`: moto's queue checks each message's visibility with a datetime
 *   round trip, several per message per call, so a queue with a backlog slowed every send and receive
 *   (2,000 messages waiting: a send 37 ms, a receive + delete of 10 1,127 ms; with this, 3 ms and 43 ms).
 *   The value is the same epoch milliseconds moto computes.
 */
const LAUNCHER = [
  // PROCESS_MARKERS finds moto by this text in its command line.
  '# moto_server, with a jsonpath cache (dispatch-ledger)',
  'import functools, sys, time',
  'try:',
  '    import jsonpath_ng.ext as ext',
  '    ext.parse = functools.lru_cache(maxsize=1024)(ext.parse)',
  '    import moto.sqs.models as sqs',
  '    slow_millis = sqs.unix_time_millis',
  '    sqs.unix_time_millis = lambda dt=None: time.time() * 1000.0 if dt is None else slow_millis(dt)',
  'except (ImportError, AttributeError) as error:',
  "    print(f'moto launcher: running without its speed-ups ({error})', file=sys.stderr)",
  'from moto.server import main',
  'main(sys.argv[1:])',
].join('\n');

/** The Python that has moto (found without importing it: that takes a second); undefined when there is none. */
function launcherPython(): string | undefined {
  const probe = "import importlib.util as u, sys; sys.exit(0 if u.find_spec('moto') and u.find_spec('jsonpath_ng') else 1)";
  for (const python of ['python3', 'python']) {
    if (spawnSync(python, ['-c', probe], { stdio: 'ignore', timeout: 30_000 }).status === 0) return python;
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
