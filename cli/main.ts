import { profileFromEnv } from '../shared/events/profile.js';
import { ArgumentsError, parseCommandArgs } from './args.js';
import { stateDir as defaultStateDir } from '../local/paths.js';
import { infoLine, type LocalState } from '../local/state.js';
import { runDemo } from './demo.js';
import { MissingToolError } from '../local/engines/index.js';
import { attention, check, send, status } from './dispatch.js';
import { events } from './events.js';
import { inbox } from './inbox.js';
import { receipt } from './receipt.js';
import { dlq, registry, stream } from './operations.js';
import { approve, redispatch, rejections } from './lifecycle.js';
import { cancel, slots } from './flow.js';
import { counts, list } from './overview.js';
import { isLedgerApiError, isLedgerConfigError, isLedgerNetworkError, isLedgerProtocolError, isLedgerValidationError } from '@dispatch-ledger/client';
import { LedgerConnectionError } from './connect.js';
import { manual } from './manual.js';
import { mcp } from './mcp.js';
import { ui } from './ui.js';
import { LocalPlatformError, localUp, runningState, stopLocal } from './local.js';
import { localTarget } from './local-targets.js';
import { LocalTargetError } from '../local/targets.js';
import { forTerminal } from './table.js';
import { UnsureOutcomeError } from './answer.js';
import { commandOf, helpFor, USAGE } from './usage.js';

// A closed pipe (`ledger ... | head`) is not an error worth a stack trace.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
  });
}

// Everything printed goes through forTerminal: whatever a line quotes (a target's run id, summary or
// reason, a message preview), its control and bidi characters reach the terminal escaped.
const say = (line: string): void => {
  process.stdout.write(`${forTerminal(line)}\n`);
};
const warn = (line: string): void => {
  process.stderr.write(`${forTerminal(line)}\n`);
};

function printReady(state: LocalState, json: boolean, heading?: string): void {
  if (!state.info) return;
  if (json) {
    say(infoLine(state.info));
    return;
  }
  const seconds = ((state.readyMs ?? 0) / 1000).toFixed(1);
  say(heading ?? `Dispatch Ledger local platform ready in ${seconds} s`);
  const rows: Array<[string, string]> = [
    ['API', state.info.apiUrl],
    ['dispatch queue', state.info.dispatchQueueUrl],
    ['DLQ', state.info.dlqUrl],
    ['SQS + S3 (fauxqs)', state.info.sqsEndpoint],
    ['DynamoDB Local', state.info.dynamodbEndpoint],
    ['EventBridge (moto)', `${state.info.eventBridgeEndpoint}  bus ${state.info.eventBusName}`],
    ['event log', state.info.eventLog],
    ['demo agent', state.info.demoAgentUrl],
    ...(state.statusPageUrl ? [['status page', state.statusPageUrl] as [string, string]] : []),
  ];
  for (const [name, value] of rows) say(`  ${name.padEnd(20)} ${value}`);
}

async function up(args: string[]): Promise<number> {
  const { values } = parseCommandArgs({
    args,
    options: {
      detach: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      tick: { type: 'string', default: '60' },
      demo: { type: 'boolean', default: false },
      once: { type: 'boolean', default: false },
      sigv4: { type: 'boolean', default: false },
      // What the local publisher puts on the bus, as the construct's `events` prop does (CONTRACT §3 v2).
      events: { type: 'string', default: 'all' },
    },
  });
  // Regression: with --detach these were ignored without a word (the platform started, no demo ran, nothing stopped).
  if (values.detach && (values.demo || values.once)) throw new ArgumentsError(`${values.demo ? '--demo' : '--once'} runs in the foreground: leave out --detach (ledger local up [--detach | --demo [--once]] …)`);
  const tickSeconds = Number(values.tick);
  if (!Number.isFinite(tickSeconds) || tickSeconds <= 0) {
    warn(`--tick must be a number of seconds > 0, got "${values.tick}"`);
    return 2;
  }
  try {
    profileFromEnv(values.events);
  } catch (error) {
    warn(`--events: ${error instanceof Error ? error.message : String(error)}`);
    return 2;
  }
  const dir = defaultStateDir();
  const started = Date.now();
  // Under --json stdout holds the one info line (CONTRACT §9): everything else — progress, the demo, what
  // stopping did — goes to stderr (regression: `local up --json --once` printed "stopped N processes" after it).
  const progress = values.json ? warn : say;
  const state = await localUp({ stateDir: dir, tickSeconds, foreground: !values.detach, progress, sigv4: values.sigv4, events: values.events });
  const total = { ...state, readyMs: Date.now() - started };
  printReady(total, values.json);
  if (values.detach) {
    if (!values.json) say('running in the background; stop it with: npx ledger local down');
    return 0;
  }

  let stopping: Promise<number> | undefined;
  const stop = (): Promise<number> => {
    stopping ??= stopLocal(dir).then(
      (pids) => {
        progress(`stopped ${pids.length} processes`);
        return 0;
      },
      (error: unknown) => {
        warn(String(error instanceof Error ? error.message : error));
        return 1;
      },
    );
    return stopping;
  };
  const signalled = new Promise<number>((resolveSignal) => {
    const onSignal = (): void => void stop().then(resolveSignal);
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  });

  if (values.demo) {
    try {
      await runDemo(state, progress);
    } catch (error) {
      warn(error instanceof Error ? error.message : String(error));
      await stop();
      return 1;
    }
  }
  if (values.once) return stop();
  progress('press Ctrl-C to stop');
  // Stay in the foreground until a signal, and leave if the platform itself goes away.
  const watch = setInterval(() => {
    if (stopping === undefined && !runningState(dir)) {
      warn(`the local platform stopped; see ${state.logDir}/platform.log`);
      process.exit(1);
    }
  }, 1_000);
  const code = await signalled;
  clearInterval(watch);
  return code;
}

/** Whether an argument asks for help. */
const isHelp = (arg: string): boolean => arg === '--help' || arg === '-h';

/**
 * `--help` (or `-h`) anywhere before `--`: the help of the command named before it, on stdout, exit 0
 * (after `--` it is an argument: a dispatch id may be `-h`). A command USAGE does not list: its first
 * line says so, exit 2.
 */
function helpOrUnknown(argv: readonly string[]): number | undefined {
  if (argv.length === 0 || argv[0] === 'help' || (argv.length === 1 && isHelp(argv[0] ?? ''))) {
    say(USAGE);
    return 0;
  }
  const named = commandOf(argv);
  const end = argv.indexOf('--');
  if ((end === -1 ? argv : argv.slice(0, end)).some(isHelp)) {
    const help = named.said.length > 0 ? helpFor(named.said) : undefined;
    if (help) {
      say(help);
      return 0;
    }
  }
  if (named.known) return undefined;
  const said = [...named.said, argv[named.said.length] ?? ''].filter((word) => word !== '').join(' ');
  warn(named.said.length > 0 && argv[named.said.length] === undefined ? `ledger ${said}: which one? ${named.choices.join(', ')}` : `ledger: unknown command "${said}"`);
  warn(named.said.length > 0 ? `the commands: ${named.choices.map((choice) => `ledger ${named.said.join(' ')} ${choice}`).join(', ')}; npx ledger --help lists every command` : 'npx ledger --help lists every command');
  return 2;
}

/**
 * For an unknown short option, how to give an argument that begins with '-' (a dispatch id may: `-d-1`
 * reads as the option `-d`): after `--`, as parseArgs takes it.
 */
function positionalHint(code: string, message: string, argv: readonly string[], named: string): string {
  const option = /'(-[^-'][^']*)'/.exec(message)?.[1];
  // Only a command that takes an id (its usage names one: `<dispatchId>`, `<resultId>`) has one to give.
  const takesId = /<\w+Id>/.test(helpFor(commandOf(argv).said) ?? '');
  const word = code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option !== undefined && takesId ? argv.find((arg) => arg.startsWith(option)) : undefined;
  return word === undefined ? '' : ` (an argument that begins with '-' goes after --, as in: ledger ${named} -- ${word})`;
}

/** Node's parseArgs refusals (an unknown option, a missing value, an extra argument): said for people, with the command's help. */
function argumentProblem(error: unknown, argv: readonly string[]): number | undefined {
  const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : '';
  if (!code.startsWith('ERR_PARSE_ARGS_')) return undefined;
  const named = commandOf(argv).said.join(' ');
  // parseArgs's message names the option and, for an unknown one, suggests `--`: the first sentence is what matters.
  const message = (error instanceof Error ? error.message : String(error)).split('. ')[0] ?? '';
  warn(`ledger ${named}: ${message.replace(/^Unknown option/, 'unknown option')}${positionalHint(code, message, argv, named)}`);
  const help = helpFor(commandOf(argv).said);
  if (help) warn(help);
  return 2;
}

export async function main(argv: string[]): Promise<number> {
  const early = helpOrUnknown(argv);
  if (early !== undefined) return early;
  const [group, command, ...rest] = argv;
  if (group === 'local' && command === 'up') return up(rest);
  if (group === 'local' && command === 'down') {
    const pids = await stopLocal(defaultStateDir());
    say(pids.length > 0 ? `stopped ${pids.length} processes (${pids.join(', ')})` : `the local platform was not running (looked in ${defaultStateDir()}: run down from the folder you ran up in)`);
    return 0;
  }
  if (group === 'local' && command === 'target') return localTarget(rest, say);
  if (group === 'local' && command === 'status') {
    const { values } = parseCommandArgs({ args: rest, options: { json: { type: 'boolean', default: false } } });
    const state = runningState(defaultStateDir());
    if (!state || state.status !== 'ready') {
      if (values.json) say('null');
      else say(`the local platform is not running (looked in ${defaultStateDir()}: run ledger from the folder you ran up in)`);
      return 3;
    }
    printReady(state, values.json, `Dispatch Ledger local platform running since ${state.startedAt} (supervisor pid ${state.pid})`);
    return 0;
  }
  if (group === 'send') return send([command, ...rest].filter((arg): arg is string => arg !== undefined), say);
  if (group === 'check') return check([command, ...rest].filter((arg): arg is string => arg !== undefined), say);
  if (group === 'events') return events([command, ...rest].filter((arg): arg is string => arg !== undefined), say);
  if (group === 'receipt') return receipt([command, ...rest].filter((arg): arg is string => arg !== undefined), say);
  if (group === 'attention') return attention([command, ...rest].filter((arg): arg is string => arg !== undefined), say);
  const rest1 = [command, ...rest].filter((arg): arg is string => arg !== undefined);
  if (group === 'rejections') return rejections(rest1, say);
  if (group === 'approve') return approve(rest1, say);
  if (group === 'redispatch') return redispatch(rest1, say);
  if (group === 'cancel') return cancel(rest1, say);
  if (group === 'slots') return slots(rest1, say);
  if (group === 'inbox') return inbox(rest1, say);
  if (group === 'list') return list(rest1, say);
  if (group === 'counts') return counts(rest1, say);
  if (group === 'manual') return manual(rest1, say);
  if (group === 'mcp') return mcp(rest1, say);
  if (group === 'ui') return ui(rest1, say);
  if (group === 'dlq') return dlq([command ?? '', ...rest], say);
  if (group === 'stream') return stream([command ?? '', ...rest], say);
  if (group === 'registry') return registry([command ?? '', ...rest], say);
  if (group === 'status') return status([command, ...rest].filter((arg): arg is string => arg !== undefined), say);
  // helpOrUnknown let through only commands USAGE lists: one listed there and not dispatched above is a bug here.
  throw new Error(`ledger ${argv.join(' ').slice(0, 100)}: listed in the usage, but no command runs it`);
}

/**
 * A `ledger` command run to its end: what it prints, printed, and its exit code (0 done, 1 failed,
 * 2 a usage mistake or a request the ledger would refuse; `local status` 3, not running: docs/protocol.md
 * §9); every failure said on stderr without a stack.
 */
export async function run(argv: string[]): Promise<number> {
  try {
    return await main(argv);
  } catch (error) {
    const refused = argumentProblem(error, argv);
    if (refused !== undefined) return refused;
    // Arguments the command cannot take as given: a usage mistake, as parseArgs' own refusals are (exit 2).
    // (UsageError is the same class: regression, it exited 1, so a script that retries on 1 and gives up on 2
    // retried `ledger send --body 'not json'` or `ledger inbox claim --frob` for ever.)
    if (error instanceof ArgumentsError) {
      warn(error.message);
      return 2;
    }
    if (error instanceof MissingToolError || error instanceof LocalPlatformError || error instanceof LocalTargetError || error instanceof LedgerConnectionError || error instanceof UnsureOutcomeError) {
      warn(error.message);
    } else if (isLedgerValidationError(error)) {
      // A request the ledger would refuse: never sent, and said in the API's words (as its 400 body under --json).
      if (argv.includes('--json')) say(JSON.stringify({ error: { code: 'malformed', message: error.message, details: error.issues } }));
      else warn(error.message);
      return 2;
    } else if (isLedgerConfigError(error) || isLedgerNetworkError(error) || isLedgerProtocolError(error) || isLedgerApiError(error)) {
      warn(error.message);
    } else {
      warn(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
    }
    return 1;
  }
}

/** The CLI as the `ledger` bin runs it (cli/bin.ts): `run`, its code the process's exit code. */
export async function cliMain(argv: string[] = process.argv.slice(2)): Promise<void> {
  process.exitCode = await run(argv);
}
