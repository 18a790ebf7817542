import { parseArgs } from 'node:util';
import { stateDir as defaultStateDir } from '../local/paths.js';
import { infoLine, type LocalState } from '../local/state.js';
import { runDemo } from '../local/demo.js';
import { MissingToolError } from '../local/engines/index.js';
import { attention, check, send, status } from './dispatch.js';
import { events } from './events.js';
import { inbox } from './inbox.js';
import { receipt } from './receipt.js';
import { dlq, registry, stream, UsageError } from './operations.js';
import { approve, redispatch, rejections } from './lifecycle.js';
import { LocalPlatformError, localUp, runningState, stopLocal } from './local.js';
import { forTerminal } from './table.js';

const USAGE = `usage:
  ledger local up [--detach] [--json] [--tick SECONDS] [--sigv4]   start the local platform (foreground unless --detach; --sigv4: IAM auth on the API)
  ledger local down                                      stop everything "up" started
  ledger local status [--json]                           is it running, and where
  ledger send [--target T] [--behavior B] [--expect REF]… [--origin O] [--dispatch-id ID] [--body JSON | --file F]
  ledger check <dispatchId> [--origin O] [--json]        the dispatch view
  ledger status [--origin O] [--status S] [--limit N]    an origin's dispatches, newest first
  ledger receipt <dispatchId> --run R --kind K --state S --verified-by V [--evidence-ref REF] [--receipt-id ID] [--note N] [--json]
                                                         an operator receipt: artifact_acceptance accepted|rejected,
                                                         owner_delivery confirmed|failed (confirmed needs --evidence-ref)
  ledger events [--follow] [--dispatch ID] [--json]      the events the local bus delivered
  ledger attention [--kind K] [--json]                   what needs a person, across origins
  ledger rejections [--limit N] [--json]                 unreadable and conflicting messages, newest first
  ledger approve <dispatchId> --approval-id A [--decision approve|cancel] [--origin O] [--json]
  ledger redispatch <dispatchId> --reason R [--force] [--origin O] [--json]
  ledger inbox claim [--mode inject|after_turn] [--max N] [--lease-seconds S] [--wait-seconds S] [--result-id ID]… [--origin O] [--json]
                                                         take the origin's waiting results under a lease (default after_turn)
  ledger inbox ack|release <resultId> --token T [--reason R]   delivered (owner delivery confirmed) | back to pending
  ledger inbox renew <resultId> --token T --lease-seconds S    extend the lease
  ledger inbox list [--state pending|claimed|delivered|dropped] [--limit N]   results by state, oldest first
  ledger inbox body <resultId>                           the whole body of a result whose claim carried a preview
  ledger dlq redrive [--dlq-url U --queue-url U [--table T [--registry FILE]]] [--limit N] [--json]
                                                         move DLQ messages back to the dispatch queue (idempotent);
                                                         --table: tell an operator's earlier redrive from a sender's claim
  ledger stream replay --bucket B [--bus NAME] [--json]  publish the events of parked stream batches (idempotent)
  ledger registry target put --table T --name N --base-url https://… [--secret-id dispatch-ledger/STACK/targets/NAME]
  ledger registry principal put --table T --id ID (--origin O | --target N | --operator)
  ledger registry origin put --table T --origin O [--max-delivery-attempts N] [--result-ttl-hours H]
                                                         how the results inbox treats an origin (defaults 5, 48)
(--origin defaults to $LEDGER_ORIGIN, else "planner")

Foreground "up" runs until Ctrl-C; --demo runs the demo once it is ready; --once stops after the demo.`;

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
  ];
  for (const [name, value] of rows) say(`  ${name.padEnd(20)} ${value}`);
}

async function up(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      detach: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      tick: { type: 'string', default: '60' },
      demo: { type: 'boolean', default: false },
      once: { type: 'boolean', default: false },
      sigv4: { type: 'boolean', default: false },
    },
  });
  const tickSeconds = Number(values.tick);
  if (!Number.isFinite(tickSeconds) || tickSeconds <= 0) {
    warn(`--tick must be a number of seconds > 0, got "${values.tick}"`);
    return 2;
  }
  const dir = defaultStateDir();
  const started = Date.now();
  const progress = values.json ? warn : say;
  const state = await localUp({ stateDir: dir, tickSeconds, foreground: !values.detach, progress, sigv4: values.sigv4 });
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
        say(`stopped ${pids.length} processes`);
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
      await runDemo(state, say);
    } catch (error) {
      warn(error instanceof Error ? error.message : String(error));
      await stop();
      return 1;
    }
  }
  if (values.once) return stop();
  say('press Ctrl-C to stop');
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

async function main(argv: string[]): Promise<number> {
  const [group, command, ...rest] = argv;
  if (group === 'local' && command === 'up') return up(rest);
  if (group === 'local' && command === 'down') {
    const pids = await stopLocal(defaultStateDir());
    say(pids.length > 0 ? `stopped ${pids.length} processes (${pids.join(', ')})` : 'the local platform was not running');
    return 0;
  }
  if (group === 'local' && command === 'status') {
    const { values } = parseArgs({ args: rest, options: { json: { type: 'boolean', default: false } } });
    const state = runningState(defaultStateDir());
    if (!state || state.status !== 'ready') {
      if (values.json) say('null');
      else say('the local platform is not running');
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
  if (group === 'inbox') return inbox(rest1, say);
  if (group === 'dlq') return dlq([command ?? '', ...rest], say);
  if (group === 'stream') return stream([command ?? '', ...rest], say);
  if (group === 'registry') return registry([command ?? '', ...rest], say);
  if (group === 'status') return status([command, ...rest].filter((arg): arg is string => arg !== undefined), say);
  warn(USAGE);
  return group === undefined || group === 'help' || group === '--help' ? 0 : 2;
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (error) {
  if (error instanceof MissingToolError || error instanceof LocalPlatformError || error instanceof UsageError) {
    warn(error.message);
  } else {
    warn(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
  }
  process.exitCode = 1;
}
