import { ArgumentsError, parseCommandArgs } from './args.js';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { FINAL_RUN_STATUSES, MAX_LIST_LIMIT, type Phase } from '@dispatch-ledger/protocol';
import { localClients } from '../local/clients.js';
import { stateDir as defaultStateDir } from '../local/paths.js';
import { awsProfilesFile, readCredentials, writeAwsProfiles, writeCredentials, type LocalState } from '../local/state.js';
import { targetCredential } from '../local/runtime/sigv4.js';
import {
  LocalTargetError,
  localTargetNameProblem,
  localTargetUrl,
  readLocalTargets,
  readSecretFile,
  registerLocalTarget,
  writeLocalTargets,
  type LocalTarget,
} from '../local/targets.js';
import { LedgerTable } from '../shared/adapters/ledger-writes.js';
import { MAX_CONCURRENT_RUNS_LIMIT } from '../shared/targets/port.js';
import { connect, type Connect } from './connect.js';
import { runningState } from './local.js';
import { shown, table } from './table.js';

type Print = (line: string) => void;

export const LOCAL_TARGET_USAGE =
  'usage: ledger local target add NAME --url http://127.0.0.1:PORT [--max-concurrent-runs N] [--secret-file F] [--replace]\n' +
  '       ledger local target list [--json]\n' +
  '       ledger local target remove NAME [--force]\n' +
  '       (your own worker on the local platform: loopback URLs only, plain http allowed here and only here;\n' +
  '        --secret-file: the authorization header value the worker expects, never on the command line;\n' +
  '        kept in the state directory, so it survives local down / up)';

/** `ledger local target add|list|remove`: what the commands need from outside, so a test can give its own. */
export interface LocalTargetDeps {
  readonly stateDir: string;
  /** The running platform's state, or undefined when it is down. */
  readonly running: () => LocalState | undefined;
  readonly connectTo: Connect;
  readonly now: () => Date;
}

const defaults = (): LocalTargetDeps => ({ stateDir: defaultStateDir(), running: () => runningState(defaultStateDir()), connectTo: connect, now: () => new Date() });

export async function localTarget(args: readonly string[], print: Print, deps: LocalTargetDeps = defaults()): Promise<number> {
  const [command, ...rest] = args;
  // Before anything is written or asked: a platform still starting says where its table is once ready (a
  // review: add wrote the file a starting platform could read, and remove asked it for its runs).
  if ((command === 'add' || command === 'remove') && deps.running()?.status === 'starting') {
    throw new LocalTargetError('the local platform is starting: run this again once npx ledger local status says it is running');
  }
  if (command === 'add') return add(rest, print, deps);
  if (command === 'list') return list(rest, print, deps);
  if (command === 'remove') return remove(rest, print, deps);
  throw new ArgumentsError(LOCAL_TARGET_USAGE);
}

async function add(args: readonly string[], print: Print, deps: LocalTargetDeps): Promise<number> {
  const { values, positionals } = parseCommandArgs({
    args: [...args],
    allowPositionals: true,
    options: { url: { type: 'string' }, 'max-concurrent-runs': { type: 'string' }, 'secret-file': { type: 'string' }, secret: { type: 'string' }, replace: { type: 'boolean', default: false } },
  });
  if (values.secret !== undefined) throw new ArgumentsError('a secret is never taken on the command line (it would stay in your shell history): put it in a file and pass --secret-file F');
  const name = onlyName(positionals, 'add');
  const nameProblem = localTargetNameProblem(name);
  if (nameProblem) throw new ArgumentsError(nameProblem);
  if (values.url === undefined) throw new ArgumentsError(`--url is required\n${LOCAL_TARGET_USAGE}`);
  const checked = localTargetUrl(values.url);
  if ('problem' in checked) throw new ArgumentsError(`--url ${checked.problem}`);
  // Port 0 is "any free port" to a server: no worker is reachable there (a copied listen(0) argument, say).
  // Refused here, not when the file is read: a file an earlier version wrote still starts.
  if (new URL(checked.url).port === '0') throw new ArgumentsError('--url port 0 is no port a worker listens on: give the port it printed');
  const maxConcurrentRuns = limitOf(values['max-concurrent-runs']);
  const secret = values['secret-file'] === undefined ? undefined : readSecretFile(values['secret-file']);
  const targets = readLocalTargets(deps.stateDir);
  const existing = targets.find((target) => target.name === name);
  // Exactly what is there already (a script run again): done, nothing changed.
  const limitWords = maxConcurrentRuns === undefined ? '' : ` (at most ${maxConcurrentRuns} runs at once)`;
  if (existing && !values.replace && existing.url === checked.url && existing.maxConcurrentRuns === maxConcurrentRuns && existing.secret === secret) {
    print(`local target ${name} is already registered → ${existing.url}${limitWords}${secret === undefined ? '' : ' with its secret'}: nothing changed`);
    const running = deps.running();
    const signing = running ? await withRegistry(running, (registry) => signingIdentity(running, deps.stateDir, registry, name)) : undefined;
    if (signing) print(signing);
    return 0;
  }
  if (existing && !values.replace) throw new LocalTargetError(shown`a local target named ${name} already exists (${existing.url}); --replace changes it`);
  const target: LocalTarget = {
    name,
    url: checked.url,
    ...(maxConcurrentRuns === undefined ? {} : { maxConcurrentRuns }),
    ...(secret === undefined ? {} : { secret }),
    addedAt: deps.now().toISOString(),
  };
  const state = deps.running();
  // The file first (it is checked as the next start will read it), then the running platform; if the
  // platform refuses, the file goes back to what it was, so the two never disagree.
  writeLocalTargets(deps.stateDir, [...targets.filter((other) => other.name !== name), target]);
  if (state) {
    try {
      await withRegistry(state, (registry, secrets) => registerLocalTarget(registry, secrets, target));
    } catch (error) {
      writeLocalTargets(deps.stateDir, targets);
      throw error;
    }
  }
  // Registered in both: its signing identity is its own step (a failure here leaves nothing to undo; the
  // same add again gives it one).
  const signing = state ? await withRegistry(state, (registry) => signingIdentity(state, deps.stateDir, registry, name)) : undefined;
  print(`${existing ? 'replaced' : 'added'} local target ${name} → ${target.url}${limitWords}${secret === undefined ? '' : ' with its secret'}`);
  print(state ? `registered on the running platform: npx ledger send --target ${name} --goal "…"` : 'the local platform is not running: it is registered at the next npx ledger local up');
  if (signing) print(signing);
  return 0;
}

/**
 * Under --sigv4 (the running platform's info names its credentials file), the worker signs its callbacks
 * as its target: a credential of its own, registered as that target's principal and written to the
 * platform's credentials files (the API reads the file again when it changed).
 * What to tell the user.
 */
async function signingIdentity(state: LocalState, stateDir: string, registry: LedgerTable, name: string): Promise<string | undefined> {
  if (!state.info?.credentialsFile) return undefined;
  const file = readCredentials(stateDir);
  if (!file) return undefined;
  let credential = file.credentials.targets[name];
  if (!credential) {
    credential = targetCredential(name);
    await registry.putPrincipal(credential.principalId, credential.principal);
    const credentials = { ...file.credentials, targets: { ...file.credentials.targets, [name]: credential } };
    writeCredentials(stateDir, { ...file, credentials });
    writeAwsProfiles(stateDir, credentials);
  }
  return `--sigv4: the worker signs as target ${name} — createWorker({ …, signer: sigv4Signer({ region: '${file.region}' }) }), run with AWS_SHARED_CREDENTIALS_FILE=${awsProfilesFile(stateDir)} AWS_PROFILE=target-${name}`;
}

/**
 * Takes a removed target's signing identity away: out of the principal registry, then out of the
 * credentials files (the API reads the file again when it changed, so its key is refused at once). In
 * that order, so a remove that fails midway leaves the credential to find again (a review: the file first,
 * and a failed delete left the principal for good). Regression: the key stayed valid until `local down`.
 */
async function dropSigningIdentity(stateDir: string, registry: LedgerTable, name: string): Promise<void> {
  const file = readCredentials(stateDir);
  const credential = file?.credentials.targets[name];
  if (!file || !credential) return;
  await registry.deletePrincipal(credential.principalId);
  const { [name]: _removed, ...targets } = file.credentials.targets;
  const credentials = { ...file.credentials, targets };
  writeCredentials(stateDir, { ...file, credentials });
  writeAwsProfiles(stateDir, credentials);
}

async function list(args: readonly string[], print: Print, deps: LocalTargetDeps): Promise<number> {
  const { values, positionals } = parseCommandArgs({ args: [...args], allowPositionals: true, options: { json: { type: 'boolean', default: false } } });
  if (positionals.length > 0) throw new ArgumentsError(`local target list takes no arguments\n${LOCAL_TARGET_USAGE}`);
  // Never the secret: only whether there is one.
  const targets = readLocalTargets(deps.stateDir).map(({ secret, ...target }) => ({ ...target, secret: secret !== undefined }));
  if (values.json) {
    print(JSON.stringify({ targets }));
    return 0;
  }
  if (targets.length === 0) {
    print('no local targets; add yours with: npx ledger local target add NAME --url http://127.0.0.1:PORT');
    return 0;
  }
  print(table(['name', 'url', 'max runs', 'secret', 'added'], targets.map((target) => [target.name, target.url, target.maxConcurrentRuns === undefined ? '-' : String(target.maxConcurrentRuns), target.secret ? 'yes' : 'no', target.addedAt])));
  return 0;
}

async function remove(args: readonly string[], print: Print, deps: LocalTargetDeps): Promise<number> {
  const { values, positionals } = parseCommandArgs({ args: [...args], allowPositionals: true, options: { force: { type: 'boolean', default: false } } });
  const name = onlyName(positionals, 'remove');
  const nameProblem = localTargetNameProblem(name);
  if (nameProblem) throw new ArgumentsError(nameProblem);
  const targets = readLocalTargets(deps.stateDir);
  if (!targets.some((target) => target.name === name)) throw new LocalTargetError(shown`no local target named ${name}; npx ledger local target list shows them`);
  const state = deps.running();
  if (state) {
    // --force: removed whatever runs it has (they go unknown); else one run in flight is enough to refuse.
    const inFlight = values.force ? [] : await runsInFlight(deps, name);
    if (inFlight.length > 0) {
      throw new LocalTargetError(
        shown`${name} has ${inFlight.length === RUNS_CHECKED ? `${RUNS_CHECKED} or more` : String(inFlight.length)} run(s) in flight (${inFlight.slice(0, 3).join(', ')}); ` +
          'wait for them, cancel them, or --force (their runs go unknown, never failed: nothing can look them up any more)',
      );
    }
    await withRegistry(state, async (registry) => {
      await registry.deleteTarget(name);
      await dropSigningIdentity(deps.stateDir, registry, name);
    });
  }
  writeLocalTargets(deps.stateDir, targets.filter((target) => target.name !== name));
  print(`removed local target ${name}${state ? '' : ' (the local platform is not running)'}`);
  return 0;
}

/** How many runs in flight the check names at most before it stops reading: one is enough to refuse. */
const RUNS_CHECKED = 100;
/** Pages of the operator's list the check follows (a filtered page may come back empty with a cursor). */
const PAGES_CHECKED = 200;

/** Dispatches of `target` submitted and not over: the ledger's own list, as the operator, every page. */
async function runsInFlight(deps: LocalTargetDeps, target: string): Promise<string[]> {
  const client = await deps.connectTo({});
  const over: readonly unknown[] = FINAL_RUN_STATUSES;
  const found: string[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < PAGES_CHECKED && found.length < RUNS_CHECKED; page += 1) {
    const answer = await client.raw('listDispatches', { query: { target, phase: 'submitted' satisfies Phase, limit: String(MAX_LIST_LIMIT), ...(cursor ? { cursor } : {}) }, as: 'operator' });
    if (answer.status !== 200) throw new LocalTargetError(`the ledger did not list ${target}'s dispatches (HTTP ${answer.status}): nothing was removed`);
    const body = answer.body as { items?: Array<{ dispatchId?: unknown; status?: unknown }>; cursor?: unknown };
    found.push(...(body.items ?? []).filter((item) => !over.includes(item.status)).map((item) => String(item.dispatchId)));
    cursor = typeof body.cursor === 'string' && body.cursor !== '' ? body.cursor : null;
    if (cursor === null) return found.slice(0, RUNS_CHECKED);
  }
  if (found.length === 0) throw new LocalTargetError(`could not read all of ${target}'s dispatches in ${PAGES_CHECKED} pages: nothing was removed (--force removes it anyway)`);
  return found.slice(0, RUNS_CHECKED);
}

async function withRegistry<T>(state: LocalState, work: (registry: LedgerTable, secrets: ReturnType<typeof localClients>['secrets']) => Promise<T>): Promise<T> {
  if (!state.info || !state.ledgerTable) throw new LocalTargetError('the running local platform did not say where its table is: restart it (npx ledger local down, then up)');
  const clients = localClients({ dynamodbEndpoint: state.info.dynamodbEndpoint, sqsEndpoint: state.info.sqsEndpoint, s3Endpoint: state.info.s3Endpoint, motoEndpoint: state.info.eventBridgeEndpoint });
  try {
    const registry = new LedgerTable(DynamoDBDocumentClient.from(clients.dynamodb, { marshallOptions: { removeUndefinedValues: true } }), { tableName: state.ledgerTable, retentionSeconds: 0 });
    return await work(registry, clients.secrets);
  } finally {
    clients.destroy();
  }
}

function onlyName(positionals: readonly string[], command: string): string {
  const [name, ...extra] = positionals;
  if (name === undefined) throw new ArgumentsError(`local target ${command} needs the target's NAME\n${LOCAL_TARGET_USAGE}`);
  if (extra.length > 0) throw new ArgumentsError(shown`local target ${command} takes one NAME, not ${extra.join(' ')}`);
  return name;
}

function limitOf(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(value) || value < 1 || value > MAX_CONCURRENT_RUNS_LIMIT) {
    throw new ArgumentsError(shown`--max-concurrent-runs must be a whole number from 1 to ${MAX_CONCURRENT_RUNS_LIMIT.toLocaleString('en-US')}, not ${text}`);
  }
  return value;
}
