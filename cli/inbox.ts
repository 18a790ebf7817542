import { parseCommandArgs } from './args.js';
import { clip } from '../shared/text.js';
import { shellWord } from '../shared/dispatch/commands.js';
import { printCall } from './answer.js';
import type { LocalInfo } from '../local/state.js';
import { createLedgerClient, type LedgerClient, type RawAnswer } from '@dispatch-ledger/client';
import { connect, CONNECTION_OPTIONS, connectionArgs, originOf, type Connect, type ConnectionValues } from './connect.js';
import { UsageError } from './operations.js';
import { nextPage, shown, table } from './table.js';
import { RESULT_DELIVERY_MODES, RESULT_STATES } from '@dispatch-ledger/protocol';

/**
 * `ledger inbox …`: an origin's results (CONTRACT §10) — claim them, ack what reached the person or
 * agent waiting, release what did not, renew a lease, list by state, read a spilled body. Parsing and
 * request building are pure (`parseInbox`, `inboxRequest`); `inbox` sends the request and prints the
 * answer: the API body with --json, a table or a line otherwise; exit 0 only for a 2xx.
 */

type Print = (line: string) => void;

export const INBOX_USAGE = `usage:
  ledger inbox claim [--mode ${RESULT_DELIVERY_MODES.join('|')}] [--max N] [--lease-seconds S] [--wait-seconds S] [--result-id ID]… [--origin O] [--json]
  ledger inbox ack <resultId> --token T [--origin O] [--json]
  ledger inbox release <resultId> --token T [--reason R] [--origin O] [--json]
  ledger inbox renew <resultId> --token T --lease-seconds S [--origin O] [--json]
  ledger inbox list [--state ${RESULT_STATES.join('|')}] [--limit N] [--cursor C] [--origin O] [--json]
  ledger inbox body <resultId> [--origin O] [--json]`;

// The protocol's own words (§10): a new mode or state reaches the flags and their usage without a copy here.
const MODES = RESULT_DELIVERY_MODES;
const STATES = RESULT_STATES;
/** The longest summary a claim table shows; `--json` has it whole. */
const SUMMARY_CELL = 48;

export type ClaimMode = (typeof MODES)[number];
export type ResultState = (typeof STATES)[number];

/**
 * `POST /origins/{origin}/inbox/claim`'s body; what is not given is left to the ledger's defaults. (A
 * type, not an interface, so it is a JSON object to send.)
 */
export type ClaimRequest = {
  readonly mode: ClaimMode;
  readonly max?: number;
  readonly leaseSeconds?: number;
  readonly waitSeconds?: number;
  readonly resultIds?: readonly string[];
};

interface Common {
  readonly origin: string;
  readonly json: boolean;
  /** --stack / --api-url / --region as given (none, or absent: the local platform). */
  readonly connection?: ConnectionValues;
}

/** One inbox command, as parsed from the command line. */
export type InboxCommand =
  | (Common & { readonly kind: 'claim'; readonly claim: ClaimRequest })
  | (Common & { readonly kind: 'ack'; readonly resultId: string; readonly claimToken: string })
  | (Common & { readonly kind: 'release'; readonly resultId: string; readonly claimToken: string; readonly reason?: string })
  | (Common & { readonly kind: 'renew'; readonly resultId: string; readonly claimToken: string; readonly leaseSeconds: number })
  | (Common & { readonly kind: 'list'; readonly state?: ResultState; readonly limit?: number; readonly cursor?: string })
  | (Common & { readonly kind: 'body'; readonly resultId: string });

/** What to send for a command: the ledger checks the ranges (422), the CLI only the shape of the flags. */
/** A command's call: the route of the protocol's table, its path parameters, its query or body. */
export interface InboxRequest {
  readonly route: 'inboxClaim' | 'inboxAck' | 'inboxRelease' | 'inboxRenew' | 'inboxList' | 'inboxBody';
  readonly params: Readonly<Record<string, string>>;
  readonly query?: Readonly<Record<string, string | number>>;
  readonly body?: Readonly<Record<string, unknown>>;
}

const OPTIONS = {
  ...CONNECTION_OPTIONS,
  mode: { type: 'string' },
  max: { type: 'string' },
  'lease-seconds': { type: 'string' },
  'wait-seconds': { type: 'string' },
  'result-id': { type: 'string', multiple: true },
  token: { type: 'string' },
  reason: { type: 'string' },
  state: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  origin: { type: 'string' },
  json: { type: 'boolean', default: false },
} as const;

type Connection = keyof typeof CONNECTION_OPTIONS;
type Flag = Exclude<keyof typeof OPTIONS, 'json' | 'origin' | 'result-id' | Connection>;

/** Every subcommand takes these: --origin, --json and the connection flags. */
const COMMON_FLAGS: ReadonlySet<string> = new Set(['json', 'origin', ...Object.keys(CONNECTION_OPTIONS)]);

/** Which flags each subcommand takes (besides COMMON_FLAGS): any other is a usage error. */
const FLAGS: Readonly<Record<InboxCommand['kind'], readonly (Flag | 'result-id')[]>> = {
  claim: ['mode', 'max', 'lease-seconds', 'wait-seconds', 'result-id'],
  ack: ['token'],
  release: ['token', 'reason'],
  renew: ['token', 'lease-seconds'],
  list: ['state', 'limit', 'cursor'],
  body: [],
};

function isKind(value: string | undefined): value is InboxCommand['kind'] {
  return value !== undefined && Object.hasOwn(FLAGS, value);
}

function usage(problem: string): UsageError {
  return new UsageError(`${problem}\n${INBOX_USAGE}`);
}

/** A flag's whole number ≥ 0, or undefined when absent; anything else is a usage error. */
function wholeNumber(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const number = Number(value);
  if (value.trim() === '' || !Number.isInteger(number) || number < 0) throw usage(`--${flag} must be a whole number, got "${value}"`);
  return number;
}

function oneOf<T extends string>(flag: string, value: string | undefined, allowed: readonly T[]): T | undefined {
  if (value === undefined) return undefined;
  const found = allowed.find((candidate) => candidate === value);
  if (found === undefined) throw usage(`--${flag} must be one of ${allowed.join(', ')}, got "${value}"`);
  return found;
}

/**
 * Reads `ledger inbox <subcommand> …` (the arguments after `inbox`); throws UsageError with the usage
 * text for an unknown subcommand or flag, a missing result id or token, or a flag of the wrong shape.
 *
 * @example
 * parseInbox(['ack', 'res-1', '--token', 'ct-1'])
 * // { kind: 'ack', origin: 'planner', json: false, resultId: 'res-1', claimToken: 'ct-1' }
 */
export function parseInbox(args: readonly string[]): InboxCommand {
  const [kind, ...rest] = args;
  if (!isKind(kind)) throw usage(kind === undefined ? 'ledger inbox needs a subcommand' : `unknown inbox subcommand "${kind}"`);
  const { values, positionals } = (() => {
    try {
      return parseCommandArgs({ args: rest, allowPositionals: true, options: OPTIONS });
    } catch (error) {
      // node:util's own message ("Unknown option '--x'…"), with the usage under it.
      throw usage(error instanceof Error ? error.message : String(error));
    }
  })();
  for (const flag of Object.keys(values)) {
    if (COMMON_FLAGS.has(flag)) continue;
    if (!(FLAGS[kind] as readonly string[]).includes(flag)) throw usage(`ledger inbox ${kind} does not take --${flag}`);
  }
  const connection: ConnectionValues = Object.fromEntries(Object.keys(CONNECTION_OPTIONS).flatMap((flag) => (values[flag as Connection] === undefined ? [] : [[flag, values[flag as Connection]]])));
  const common: Common = { origin: originOf(values.origin), json: values.json, ...(Object.keys(connection).length > 0 && { connection }) };

  if (kind === 'claim' || kind === 'list') {
    if (positionals.length > 0) throw usage(`ledger inbox ${kind} takes no result id (got "${positionals[0] ?? ''}")`);
  } else if (positionals.length !== 1) {
    throw usage(`ledger inbox ${kind} needs exactly one <resultId>`);
  }
  const resultId = positionals[0] ?? '';
  const token = (): string => {
    if (!values.token?.trim()) throw usage(`ledger inbox ${kind} needs --token (the claimToken its claim printed)`);
    return values.token;
  };

  switch (kind) {
    case 'claim': {
      const max = wholeNumber('max', values.max);
      const leaseSeconds = wholeNumber('lease-seconds', values['lease-seconds']);
      const waitSeconds = wholeNumber('wait-seconds', values['wait-seconds']);
      const resultIds = values['result-id'];
      if (resultIds?.some((id) => id.trim() === '')) throw usage('--result-id needs a result id');
      const claim: ClaimRequest = {
        mode: oneOf('mode', values.mode, MODES) ?? 'after_turn',
        ...(max !== undefined && { max }),
        ...(leaseSeconds !== undefined && { leaseSeconds }),
        ...(waitSeconds !== undefined && { waitSeconds }),
        ...(resultIds !== undefined && { resultIds }),
      };
      return { ...common, kind, claim };
    }
    case 'ack':
      return { ...common, kind, resultId, claimToken: token() };
    case 'release':
      return { ...common, kind, resultId, claimToken: token(), ...(values.reason !== undefined && { reason: values.reason }) };
    case 'renew': {
      const claimToken = token();
      const leaseSeconds = wholeNumber('lease-seconds', values['lease-seconds']);
      if (leaseSeconds === undefined) throw usage('ledger inbox renew needs --lease-seconds');
      return { ...common, kind, resultId, claimToken, leaseSeconds };
    }
    case 'list': {
      const state = oneOf('state', values.state, STATES);
      const limit = wholeNumber('limit', values.limit);
      return { ...common, kind, ...(state && { state }), ...(limit !== undefined && { limit }), ...(values.cursor !== undefined && { cursor: values.cursor }) };
    }
    case 'body':
      return { ...common, kind, resultId };
  }
}

/**
 * The route and body a command sends (docs/protocol.md §10).
 *
 * @example
 * inboxRequest(parseInbox(['claim', '--max', '5'])) // { route: 'inboxClaim', params: { origin: 'planner' }, body: { mode: 'after_turn', max: 5 } }
 */
export function inboxRequest(command: InboxCommand): InboxRequest {
  const inbox = { origin: command.origin };
  switch (command.kind) {
    case 'claim':
      return { route: 'inboxClaim', params: inbox, body: command.claim };
    case 'ack':
      return { route: 'inboxAck', params: { ...inbox, resultId: command.resultId }, body: { claimToken: command.claimToken } };
    case 'release':
      return { route: 'inboxRelease', params: { ...inbox, resultId: command.resultId }, body: { claimToken: command.claimToken, ...(command.reason !== undefined && { reason: command.reason }) } };
    case 'renew':
      return { route: 'inboxRenew', params: { ...inbox, resultId: command.resultId }, body: { claimToken: command.claimToken, leaseSeconds: command.leaseSeconds } };
    case 'list':
      return {
        route: 'inboxList',
        params: inbox,
        query: { ...(command.state && { state: command.state }), ...(command.limit !== undefined && { limit: command.limit }), ...(command.cursor !== undefined && { cursor: command.cursor }) },
      };
    case 'body':
      return { route: 'inboxBody', params: { ...inbox, resultId: command.resultId } };
  }
}

// The answers are read field by field, never cast whole: a field the ledger leaves out shows as "—".
type Fields = Readonly<Record<string, unknown>>;

function fields(value: unknown): Fields {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Fields) : {};
}

function text(value: unknown): string {
  if (value === undefined || value === null || value === '') return '—';
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function bytes(count: number): string {
  return count < 1024 ? `${count} B` : `${(count / 1024).toFixed(1)} KB`;
}

const jsonBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');

/** A result's execution in a word: its status, else why there was no run. */
function executionCell(result: Fields): string {
  const execution = fields(result['execution']);
  if (execution['status'] !== undefined && execution['status'] !== null) return text(execution['status']);
  if (result['blockedReason']) return clip(`blocked: ${text(result['blockedReason'])}`, SUMMARY_CELL);
  return '—';
}

/** Where the body is: inline with its size, spilled (the claim has a preview; `inbox body` reads it whole), or none. */
export function bodyCell(result: Fields): string {
  if (result['bodyRef'] !== undefined && result['bodyRef'] !== null) {
    const preview = result['preview'];
    const previewSize = typeof preview === 'string' ? Buffer.byteLength(preview, 'utf8') : preview === undefined || preview === null ? 0 : jsonBytes(preview);
    return `spilled (preview ${bytes(previewSize)}; ledger inbox body)`;
  }
  if (result['body'] !== undefined) return `inline ${bytes(jsonBytes(result['body']))}`;
  return '—';
}

function items(value: unknown, key: string): Fields[] {
  const list = fields(value)[key];
  return Array.isArray(list) ? list.map(fields) : [];
}

/**
 * A claim's answer for people: one row per result, then the token to ack, release or renew with and
 * when its lease ends, and the ack command with `flags`: the origin that claimed and the connection as
 * given (a result is acked on its origin's route). Every cell and value is escaped (a summary is a target's text).
 */
export function describeClaim(answer: unknown, flags: readonly string[] = []): string {
  const claim = fields(answer);
  const results = items(answer, 'results');
  if (results.length === 0) return 'nothing to claim: no result is waiting';
  const rows = results.map((result) => [
    text(result['resultId']),
    text(result['dispatchId']),
    text(result['attempt']),
    executionCell(result),
    text(fields(result['evidence'])['outcome']),
    clip(text(result['summary']), SUMMARY_CELL),
    bodyCell(result),
  ]);
  return [
    table(['result', 'dispatch', 'attempt', 'execution', 'evidence', 'summary', 'body'], rows),
    shown`claimToken ${text(claim['claimToken'])}`,
    shown`leaseExpiresAt ${text(claim['leaseExpiresAt'])}`,
    shown`ack each result once it reached its reader: npx ledger inbox ack <resultId> --token <claimToken>${flags.map((flag) => ` ${shellWord(flag)}`).join('')}`,
  ].join('\n');
}

/**
 * A list page for people, oldest first, then the command for the next page if there is one: `next`, the
 * flags that chose this page (a cursor read with other flags is refused, or reads another list).
 */
export function describeList(answer: unknown, next: readonly string[]): string {
  const results = items(answer, 'items');
  const cursor = fields(answer)['cursor'];
  // A page the ledger's filter left empty may still have a next one.
  if (results.length === 0) return ['no results', ...nextPage('inbox list', next, cursor)].join('\n');
  const rows = results.map((result) => [
    text(result['resultId']),
    text(result['dispatchId']),
    text(result['attempt']),
    text(result['state']),
    text(result['deliveryAttempts']),
    executionCell(result),
    text(fields(result['evidence'])['outcome']),
    clip(text(result['summary']), SUMMARY_CELL),
  ]);
  const lines = [table(['result', 'dispatch', 'attempt', 'state', 'tries', 'execution', 'evidence', 'summary'], rows)];
  lines.push(...nextPage('inbox list', next, cursor));
  return lines.join('\n');
}

/** The one line an ack, release or renew prints for people. */
export function describeChange(command: InboxCommand, answer: unknown): string {
  const body = fields(answer);
  const state = body['state'];
  switch (command.kind) {
    case 'ack':
      return shown`acked: ${command.resultId} → ${text(state ?? 'delivered')} (owner delivery confirmed, basis origin_ack)`;
    case 'release':
      return (
        shown`released: ${command.resultId} → ${text(state ?? 'pending')}` +
        (body['deliveryAttempts'] !== undefined ? shown` (delivery attempts ${text(body['deliveryAttempts'])})` : '') +
        (state === 'dropped' ? shown`; dropped: ${text(body['droppedReason'] ?? 'attempts')}` : '')
      );
    case 'renew':
      return shown`renewed: ${command.resultId}, lease until ${text(body['leaseExpiresAt'])}`;
    default:
      return JSON.stringify(answer);
  }
}

/** Sends a command's request to the ledger as the command's origin (X-Ledger-Origin locally, its credential under --sigv4; the caller's remotely). */
export function inboxCall(ledger: LedgerClient, command: InboxCommand): Promise<RawAnswer> {
  const { route, ...parts } = inboxRequest(command);
  return ledger.raw(route, parts);
}

/** `inboxCall` on the local platform, as the demo (local/demo.ts) makes it. */
export function sendInbox(info: LocalInfo, command: InboxCommand): Promise<RawAnswer> {
  return inboxCall(createLedgerClient({ origin: command.origin, local: info }), command);
}

/** `ledger inbox claim|ack|release|renew|list|body`, on the ledger the connection flags name. */
export async function inbox(args: readonly string[], print: Print, connectTo: Connect = connect): Promise<number> {
  const command = parseInbox(args);
  const ledger = await connectTo(command.connection ?? {}, command);
  // A claim holds what it takes for its lease and counts a delivery attempt: one whose answer was lost
  // is not repeated blindly (each repeat holds more, and a result is dropped after its last attempt).
  const listClaimed = ['npx ledger inbox list --state claimed', ...['--origin', command.origin, ...connectionArgs(command.connection ?? {})].map(shellWord)].join(' ');
  const unsureThen = command.kind === 'claim' ? shown`the claim may have been made: what it took stays held until its lease ends, then can be claimed again; see it with: ${listClaimed}` : undefined;
  return printCall(() => inboxCall(ledger, command), unsureThen, command.json, print, (body) => {
    switch (command.kind) {
      case 'claim':
        return describeClaim(body, ['--origin', command.origin, ...connectionArgs(command.connection ?? {})]);
      case 'list':
        return describeList(body, [
          ...(command.state === undefined ? [] : ['--state', command.state]),
          ...(command.limit === undefined ? [] : ['--limit', String(command.limit)]),
          '--origin',
          command.origin,
          ...connectionArgs(command.connection ?? {}),
        ]);
      case 'body':
        // The whole body as the target sent it, indented; the printer escapes what a terminal would act on.
        return JSON.stringify(body, null, 2);
      default:
        return describeChange(command, body);
    }
  });
}
