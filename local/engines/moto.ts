import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { answersHttp, freePort, requireTool, spawnEngine, stopPid, waitUntilReady, type SpawnedEngine } from './process.js';

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
 *
 * The same lines change two things moto's Step Functions (CONTRACT §17) does, to answer as AWS does:
 * - moto 5.2.1 deep-copies a state machine at each `StartExecution` (the copy the execution runs), with
 *   its executions, whose workers hold a lock that cannot be copied: every `StartExecution` after a state
 *   machine's first answered 500. The copy now leaves out `executions` (shared, never copied) and
 *   `backend` (the owner it points back to: copying it copied every state machine of the region).
 * - `GetExecutionHistory` ignored `reverseOrder`, `maxResults` and `nextToken` (every event, oldest
 *   first): the monitor's "newest event" read the oldest, so a long run looked stalled however its
 *   history moved. Now paged as in AWS, the page token the last event id given.
 */
/** What the launcher says when moto's Step Functions cannot be given its copy fix: every second start would answer 500. */
const NO_COPY_FIX = 'moto launcher: no Step Functions copy fix';

const LAUNCHER = [
  // PROCESS_MARKERS finds moto by this text in its command line.
  '# moto_server, with a jsonpath cache (dispatch-ledger)',
  'import copy, functools, sys, time',
  'try:',
  '    import jsonpath_ng.ext as ext',
  '    ext.parse = functools.lru_cache(maxsize=1024)(ext.parse)',
  '    import moto.sqs.models as sqs',
  '    slow_millis = sqs.unix_time_millis',
  '    sqs.unix_time_millis = lambda dt=None: time.time() * 1000.0 if dt is None else slow_millis(dt)',
  'except (ImportError, AttributeError) as error:',
  "    print(f'moto launcher: running without its speed-ups ({error})', file=sys.stderr)",
  'try:',
  '    import moto.stepfunctions.models as sfn',
  '    def copy_without_executions(self, memo):',
  '        clone = self.__class__.__new__(self.__class__)',
  '        memo[id(self)] = clone',
  "        for key, value in self.__dict__.items():",
  "            setattr(clone, key, value if key in ('executions', 'backend') else copy.deepcopy(value, memo))",
  '        return clone',
  '    sfn.StateMachineInstance.__deepcopy__ = copy_without_executions',
  'except (ImportError, AttributeError) as error:',
  `    print(f'${NO_COPY_FIX} ({error})', file=sys.stderr)`,
  'try:',
  '    import moto.stepfunctions.responses as sfn_responses',
  '    from moto.core.responses import ActionResult',
  '    def history_page(self):',
  "        events = list(self.stepfunction_backend.get_execution_history(self._get_param('executionArn'))['events'])",
  "        newest_first = bool(self._get_param('reverseOrder'))",
  "        after = str(self._get_param('nextToken') or '')",
  "        if after and not after.isdigit(): raise ValueError('nextToken is not an event id')",
  '        if newest_first: events.reverse()',
  "        if after: events = [event for event in events if (event['id'] < int(after) if newest_first else event['id'] > int(after))]",
  "        size = int(self._get_param('maxResults') or 0) or 100",
  "        page = {'events': events[:size]}",
  "        if len(events) > size: page['nextToken'] = str(events[size - 1]['id'])",
  '        return ActionResult(page)',
  '    sfn_responses.StepFunctionResponse.get_execution_history = history_page',
  'except (ImportError, AttributeError) as error:',
  "    print(f'moto launcher: GetExecutionHistory is not paged newest first ({error})', file=sys.stderr)",
  'from moto.server import main',
  'main(sys.argv[1:])',
].join('\n');

const readLog = (file: string): string => (existsSync(file) ? readFileSync(file, 'utf8') : '');

/** The Python that has moto (found without importing it: that takes a second); undefined when there is none. */
function launcherPython(): string | undefined {
  const probe = "import importlib.util as u, sys; sys.exit(0 if u.find_spec('moto') and u.find_spec('jsonpath_ng') else 1)";
  for (const python of ['python3', 'python']) {
    if (spawnSync(python, ['-c', probe], { stdio: 'ignore', timeout: 30_000 }).status === 0) return python;
  }
  return undefined;
}

/**
 * moto runs the state machines it is given (Pass, Wait, Choice, Succeed, Fail; CONTRACT §17) only with
 * this setting on; without it an execution stays RUNNING for ever. It chooses the backend a call goes
 * to, so it is set before any Step Functions call: a state machine created with it off is not seen
 * with it on.
 */
async function runStateMachines(endpoint: string): Promise<void> {
  const response = await fetch(`${endpoint}/moto-api/config`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ stepfunctions: { execute_state_machine: true } }),
  });
  if (!response.ok) throw new Error(`moto refused its Step Functions setting: ${response.status} ${await response.text()}`);
}

/**
 * Starts moto server bound to 127.0.0.1: EventBridge (real rule matching and delivery to targets),
 * Secrets Manager and Step Functions (executing) for the local platform. Through the launcher when its
 * Python is found; else the plain `moto_server` (slower to deliver events, and its Step Functions
 * answers 500 to a state machine's second execution).
 */
export async function startMoto(options: { logFile: string; port?: number; spawned?: (pid: number) => void }): Promise<MotoEngine> {
  const motoServer = requireTool('moto_server', 'install moto server: pip install "moto[server]"');
  const port = options.port ?? (await freePort());
  const args = ['-H', '127.0.0.1', '-p', String(port)];
  const python = launcherPython();
  const engine = python
    ? spawnEngine('moto', python, ['-c', LAUNCHER, ...args], { logFile: options.logFile })
    : spawnEngine('moto', motoServer, args, { logFile: options.logFile });
  options.spawned?.(engine.pid);
  const endpoint = `http://127.0.0.1:${port}`;
  await waitUntilReady(engine, () => answersHttp(`${endpoint}/moto-api/`), 30_000);
  // Without the copy fix a state machine's second StartExecution answers 500: refuse to run like that.
  const ready = async (): Promise<void> => {
    if (python !== undefined && readLog(options.logFile).includes(NO_COPY_FIX)) {
      throw new Error(`${NO_COPY_FIX}: its Step Functions would answer 500 to a state machine's second execution (see ${options.logFile})`);
    }
    await runStateMachines(endpoint);
  };
  await ready().catch(async (error: unknown) => {
    await stopPid(engine.pid);
    throw error;
  });
  return { ...engine, endpoint, port };
}
