import { APPROVAL_DECISIONS, MANUAL_ATTESTATION_KINDS, OPERATOR_RECEIPT_KINDS, RESULT_DELIVERY_MODES, RESULT_STATES, STATES_OF_KIND } from '@dispatch-ledger/protocol';

const [ACCEPTANCE, DELIVERY] = OPERATOR_RECEIPT_KINDS;

/** `ledger help`: every command, one line each (and a few continued where a command needs saying more). */
export const USAGE = `usage:
  ledger local up [--detach | --demo [--once]] [--json] [--tick SECONDS] [--sigv4] [--events P]   start the local platform (foreground unless --detach;
                                                         --sigv4: IAM auth on the API; --events: all, attention, or detail-types)
  ledger local down                                      stop everything "up" started
  ledger local status [--json]                           is it running, and where
  ledger local target add NAME --url http://127.0.0.1:PORT [--max-concurrent-runs N] [--secret-file F] [--replace]
                                                         register your own worker on the local platform (loopback only)
  ledger local target list [--json]                      the local targets you registered (never their secrets)
  ledger local target remove NAME [--force]              unregister one (refused while it has runs in flight, unless --force)
  ledger send [--target T] [--behavior B] [--goal TEXT] [--expect REF]… [--origin O] [--dispatch-id ID] [--detached]
              [--body JSON | --file F]                  a --body/--file is sent as written (--origin fills in a missing origin)
              [--stall-after S] [--grace S] [--approval-wait S]   the message's clocks, in seconds (ledger check shows them)
  ledger check <dispatchId> [--origin O] [--refresh] [--json]   the dispatch view, its clocks and when each runs out
  ledger status [--origin O] [--status S] [--limit N] [--cursor C]   an origin's dispatches, newest first
  ledger receipt <dispatchId> --run R --kind K --state S --verified-by V [--evidence-ref REF] [--receipt-id ID] [--note N] [--json]
                                                         an operator receipt: ${ACCEPTANCE} ${STATES_OF_KIND[ACCEPTANCE].join('|')},
                                                         ${DELIVERY} ${STATES_OF_KIND[DELIVERY].join('|')} (confirmed needs --evidence-ref)
  ledger events [--follow] [--dispatch ID] [--json]      the events the local bus delivered
  ledger attention [--kind K] [--limit N] [--cursor C] [--json]   what needs a person, across origins: targets at capacity
                                                         (at_capacity: slots held/limit, held by unknown runs, waiting),
                                                         then dispatches (unknown, blocked, retrying, cancel_pending, …)
  ledger rejections [--limit N] [--cursor C] [--json]    unreadable and conflicting messages, newest first
  ledger approve <dispatchId> --approval-id A [--decision ${APPROVAL_DECISIONS.join('|')}] [--origin O] [--json]
  ledger redispatch <dispatchId> --reason R [--force] [--origin O] [--json]
  ledger cancel <dispatchId> --reason R [--origin O] [--json]
                                                         never submitted: cancelled at once; submitted: the target is
                                                         asked (again by the monitor while unreachable), and the run is
                                                         cancelled on its word; 409 once the dispatch is over
  ledger slots release --target T --run-id R --reason TEXT [--dispatch-id D] [--json]
                                                         free the slot of a run its target answers 404 for (operator);
                                                         the run stays unknown
  ledger inbox claim [--mode ${RESULT_DELIVERY_MODES.join('|')}] [--max N] [--lease-seconds S] [--wait-seconds S] [--result-id ID]… [--origin O] [--json]
                                                         take the origin's waiting results under a lease (default after_turn)
  ledger inbox ack <resultId> --token T                  delivered (owner delivery confirmed)
  ledger inbox release <resultId> --token T [--reason R] back to pending
  ledger inbox renew <resultId> --token T --lease-seconds S    extend the lease
  ledger inbox list [--state ${RESULT_STATES.join('|')}] [--limit N] [--cursor C]   results by state, oldest first
  ledger inbox body <resultId>                           the whole body of a result whose claim carried a preview
  ledger list [--status S] [--target T] [--origin O] [--phase P] [--limit N] [--cursor C] [--json]
                                                         every origin's dispatches, newest first (operator); --status is
                                                         the execution status, none before submission
  ledger counts [--json]                                 dispatches held by phase, execution status and evidence outcome
                                                         (operator; kept from the table's stream, a moment behind)
  ledger manual <dispatchId> --kind K --note N [--evidence-ref REF] [--attestation-id ID] [--origin O | --operator] [--json]
                                                         a person's attestation on a dispatch to a manual target; K:
                                                         ${MANUAL_ATTESTATION_KINDS.slice(0, 2).join('|')}|
                                                         ${MANUAL_ATTESTATION_KINDS.slice(2).join('|')}; without
                                                         --attestation-id the id comes from the content: re-running
                                                         is a safe retry
  ledger ui [--port N]                                   the status page on 127.0.0.1 (reads as the operator; Ctrl-C to stop)
  ledger mcp [--origin O]                                an MCP server on stdio: the ledger's tools for agents (--origin required remotely)
                                                         (stdout is the MCP channel)
  ledger dlq redrive [--stack NAME | --dlq-url U --queue-url U [--table T]] [--registry FILE] [--region R] [--limit N] [--json]
                                                         move DLQ messages back to their queue (idempotent; --stack: the dispatch queue's;
                                                         the failures and orchestrator DLQs' alarms name their URLs);
                                                         --table: tell an operator's earlier redrive from a sender's claim
  ledger stream replay --bucket B [--bus NAME] [--events P] [--json]  publish the events of parked stream batches (idempotent; P: the stack's events profile)
  ledger registry target put --table T --name N --kind manual   a target done by people: recorded, never submitted
  ledger registry target put --table T --name N --base-url https://… [--secret-id dispatch-ledger/STACK/targets/NAME]
                            [--max-concurrent-runs N]    at most N (1 to 10,000) runs at once; the rest wait
  ledger registry principal put --table T --id ID (--origin O | --target N | --operator)
  ledger registry origin put --table T --origin O [--max-delivery-attempts N] [--result-ttl-hours H]
                                                         how the results inbox treats an origin (defaults 5, 48)
(--origin defaults to $LEDGER_ORIGIN, else "planner"; ledger mcp needs one with --stack or --api-url)

Every command that talks to the API or the queue (and ui, mcp) also takes
  [--stack NAME | --api-url URL [--queue-url URL]] [--region R]
  --stack: a deployed stack's CloudFormation outputs; --api-url: its ApiUrl (--queue-url: its DispatchQueueUrl, to send);
  signed with SigV4 from the AWS default credential chain; region: --region, else AWS_REGION / AWS_DEFAULT_REGION.
  Without either: the local platform. (ledger events is local only.)

Foreground "up" runs until Ctrl-C; --demo runs the demo once it is ready; --once stops after the demo.`;

/** One command of USAGE: the words that name it (`['inbox', 'ack']`) and its lines there. */
export interface CommandUsage {
  readonly words: readonly string[];
  readonly lines: readonly string[];
}

/**
 * The commands USAGE lists, read from it (so the list and the help can never disagree): each entry
 * starts with `  ledger WORD…` and goes on over the lines indented further. `a|b` names two commands.
 */
export const COMMANDS: readonly CommandUsage[] = (() => {
  const entries: Array<{ words: string[][]; lines: string[] }> = [];
  for (const line of USAGE.split('\n')) {
    const start = /^ {2}ledger ((?:[a-z][a-z|-]*\s?)+)/.exec(line);
    if (start) {
      const words = (start[1] ?? '').trim().split(/\s+/).map((word) => word.split('|'));
      entries.push({ words, lines: [line] });
    } else if (/^ {4,}\S/.test(line) && entries.length > 0) {
      entries.at(-1)?.lines.push(line);
    }
  }
  // `inbox ack|release` is two commands; `ack|release` as one word of a line is expanded here.
  const expand = (words: string[][]): string[][] =>
    words.reduce<string[][]>((heads, choices) => heads.flatMap((head) => choices.map((choice) => [...head, choice])), [[]]);
  return entries.flatMap(({ words, lines }) => expand(words).map((named) => ({ words: named, lines })));
})();

/** The words of `argv` that name a command: those before the first option or argument that is not a command word. */
export function commandOf(argv: readonly string[]): { readonly known?: CommandUsage; readonly said: readonly string[]; readonly choices: readonly string[] } {
  const said: string[] = [];
  let candidates = COMMANDS;
  for (const word of argv) {
    if (word.startsWith('-')) break;
    const next = candidates.filter((command) => command.words[said.length] === word);
    if (next.length === 0) break;
    said.push(word);
    candidates = next;
  }
  const known = candidates.find((command) => command.words.length === said.length && said.length > 0);
  const choices = [...new Set(candidates.map((command) => command.words[said.length]).filter((word): word is string => word !== undefined))];
  return { ...(known ? { known } : {}), said, choices };
}

/** The help of the commands named by `words` (every one of them when a group is named: `ledger inbox --help`). */
export function helpFor(words: readonly string[]): string | undefined {
  const lines = [...new Set(COMMANDS.filter((command) => words.every((word, index) => command.words[index] === word)).flatMap((command) => command.lines))];
  return lines.length === 0 ? undefined : ['usage:', ...lines, CONNECTION_NOTE].join('\n');
}

const CONNECTION_NOTE = '(--origin defaults to $LEDGER_ORIGIN, else "planner" — ledger mcp needs one with --stack or --api-url; every command that talks to the API or the queue also takes [--stack NAME | --api-url URL [--queue-url URL]] [--region R]; npx ledger --help lists every command)';
