import { DEFAULT_LIST_LIMIT, ROUTES, routePath } from '@dispatch-ledger/protocol';
import { VIEW_LIST_LIMIT } from '../shared/api/pages.js';
import { WAITING_COUNTED, type TargetAtCapacity } from '../shared/usecases/flow.js';
import { readFileSync } from 'node:fs';
import { ArgumentsError, onePositional, parseCommandArgs } from './args.js';
import type { DispatchView } from '../shared/dispatch/view.js';
import { evidenceWords } from '../shared/dispatch/evidence-words.js';
import { summaryLine } from '../shared/dispatch/summary.js';
import { printAnswer, retryOnce, UnsureOutcomeError } from './answer.js';
import { isLedgerNetworkError, isLedgerValidationError, type DispatchRequest } from '@dispatch-ledger/client';
import { connect, CONNECTION_OPTIONS, connectionArgs, originOf, type Connect, type ConnectionValues } from './connect.js';
import { dispatchCommand, shellWord } from '../shared/dispatch/commands.js';
import { UsageError } from './operations.js';
import { nextPage, shown, table } from './table.js';
import { newDispatchId } from './dispatch-id.js';

export { localInfo, originOf } from './connect.js';

/** The connection flags as given, to repeat in a hint (`check it with: npx ledger check D --stack S …`). */
const connectionFlags = (values: ConnectionValues): string => connectionArgs(values, ['queue-url']).map(shellWord).join(' ');

/**
 * The flags that make a message's fields: a message given whole (--body, --file) takes none of them. No
 * defaults here: those are applied to a message made from the flags (given beside --body/--file they are refused).
 */
const MESSAGE_FIELD_OPTIONS = {
  'dispatch-id': { type: 'string' },
  target: { type: 'string' },
  behavior: { type: 'string' },
  goal: { type: 'string' },
  expect: { type: 'string', multiple: true },
  detached: { type: 'boolean' },
  parent: { type: 'string' },
  // CONTRACT §1's clocks, in seconds: the ledger checks them (a message it would refuse is never sent).
  'stall-after': { type: 'string' },
  grace: { type: 'string' },
  'approval-wait': { type: 'string' },
} as const;
const MESSAGE_FLAGS = Object.keys(MESSAGE_FIELD_OPTIONS) as Array<keyof typeof MESSAGE_FIELD_OPTIONS>;

/** `ledger send`: builds a dispatch message (or takes one whole with --body/--file) and puts it on the queue. */
export async function send(args: string[], print: (line: string) => void, connectTo: Connect = connect): Promise<number> {
  const { values } = parseCommandArgs({
    args,
    options: { ...CONNECTION_OPTIONS, ...MESSAGE_FIELD_OPTIONS, origin: { type: 'string' }, body: { type: 'string' }, file: { type: 'string' }, json: { type: 'boolean', default: false } },
  });
  let message: unknown;
  /** The dispatch id made up here, if one was: said when the send's outcome is unknown. */
  let made: string | undefined;
  if (values.body !== undefined || values.file !== undefined) {
    if (values.body !== undefined && values.file !== undefined) throw new UsageError('give --body or --file, not both; nothing was sent');
    // The message is sent as written (regression: the fields' flags beside it were dropped without a word).
    const beside = MESSAGE_FLAGS.filter((flag) => values[flag] !== undefined);
    if (beside.length > 0) throw new UsageError(`--body and --file send the message as written: put ${beside.map((flag) => `--${flag}`).join(', ')} in it instead; nothing was sent`);
    // Read and checked here: a message the ledger would refuse is never sent (nothing reaches the queue).
    const text = values.body ?? readFileSync(values.file ?? '', 'utf8');
    try {
      message = JSON.parse(text) as unknown;
    } catch (error) {
      throw new UsageError(`the message is not JSON (${error instanceof Error ? error.message : String(error)}); nothing was sent`);
    }
    if (typeof message !== 'object' || message === null || Array.isArray(message)) throw new UsageError('the message must be a JSON object; nothing was sent');
    // Sent as written, but for the origin a --origin names: filled in when the message has none, and a
    // message naming another origin is refused (which one speaks is not guessed). With neither, refused.
    const given = (message as { origin?: unknown }).origin;
    if (values.origin !== undefined && given === undefined) message = { ...message, origin: values.origin };
    else if (values.origin !== undefined && given !== values.origin) throw new UsageError(`the message names origin ${JSON.stringify(given)}, --origin ${JSON.stringify(values.origin)}: give one; nothing was sent`);
    else if (given === undefined) throw new UsageError('the ledger would refuse this message: origin: expected string, got undefined (a --body or --file is sent as written: add "origin" to it, or give --origin); nothing was sent');
  } else {
    message = {
      dispatchId: values['dispatch-id'] ?? (made = newDispatchId()),
      origin: originOf(values.origin),
      target: values.target ?? 'demo-agent',
      task: { behavior: values.behavior ?? 'complete', ...(values.goal ? { goal: values.goal } : {}) },
      ...(values.expect ? { expectedEvidence: values.expect } : {}),
      ...(values.detached ? { delivery: { mode: 'detached' } } : {}),
      ...(values.parent ? { parentDispatchId: values.parent } : {}),
      ...timeoutsOf(values),
    };
  }
  const ledger = await connectTo(values, values);
  let sent: { readonly dispatchId: string; readonly messageId: string };
  try {
    sent = await ledger.dispatch(message as DispatchRequest);
  } catch (error) {
    if (isLedgerValidationError(error)) throw new UsageError(`${error.message}; nothing was sent`);
    // The queue may have taken it (no answer): sent again under the same id, the ledger keeps one dispatch.
    // Only a network failure is unsure: a config error (no queue, no credentials) came before any send.
    if (made !== undefined && isLedgerNetworkError(error)) throw new UnsureOutcomeError(`${error instanceof Error ? error.message : String(error)}\n${retryOnce('the message may have reached the queue', `--dispatch-id ${made}`)}`, { cause: error });
    throw error;
  }
  if (values.json) print(JSON.stringify(sent));
  // The check names the message's origin: the local platform answers a dispatch to its own origin only.
  else print(shown`sent message ${sent.messageId} (dispatch ${sent.dispatchId}); check it with: ${dispatchCommand({ dispatchId: sent.dispatchId, origin: String((message as { origin?: unknown }).origin) }, 'check', connectionFlags(values))}`);
  return 0;
}

/** `--stall-after`, `--grace` and `--approval-wait` as the message's `timeouts` (seconds; the protocol's schema checks them). */
function timeoutsOf(values: { readonly 'stall-after'?: string | undefined; readonly grace?: string | undefined; readonly 'approval-wait'?: string | undefined }): { timeouts?: Record<string, number> } {
  const given: Array<[string, string | undefined]> = [['stallAfterSeconds', values['stall-after']], ['deliveryGraceSeconds', values.grace], ['approvalWaitSeconds', values['approval-wait']]];
  const timeouts = Object.fromEntries(given.flatMap(([field, value]) => (value === undefined ? [] : [[field, Number(value)]])));
  return Object.keys(timeouts).length === 0 ? {} : { timeouts };
}

/** The dispatch's clocks, and when each running one runs out. */
function windowsLine(windows: NonNullable<DispatchView['windows']>): string {
  const clock = (name: string, seconds: number, endsAt: string | null): string => `${name} ${seconds} s` + (endsAt ? ` (runs out ${endsAt})` : '');
  return [
    clock('stall after', windows.stallAfterSeconds, windows.stallsAt),
    clock('approval wait', windows.approvalWaitSeconds, windows.approvalExpiresAt),
    clock('delivery grace', windows.deliveryGraceSeconds, windows.graceEndsAt),
  ].join('; ');
}

/**
 * `ledger check`'s view for people. Every value is shown escaped (`shown`): the run id, approval id,
 * result summary, errors and unknowns may quote what a target said (CONTRACT §8 v2).
 */
export function describeView(view: DispatchView): string {
  const { execution, submission } = view;
  const rows: Array<[string, string]> = [
    ['summary', shown`${summaryLine(view)}`],
    ['dispatch', shown`${view.dispatchId}  (origin ${view.origin} → target ${view.target}, attempt ${view.attempt})`],
    ['phase', shown`${view.phase}` + (view.blockedReason ? shown`: ${view.blockedReason}` : '')],
    ['run', shown`${view.runId ?? '—'}`],
    ['submission', shown`${submission.attempts} call(s)` + (submission.waitingFor ? shown`, waiting for ${submission.waitingFor}` : '') + (submission.nextRetryAt ? shown`, next retry ${submission.nextRetryAt}` : '') + (submission.lastError ? shown`, last error: ${submission.lastError}` : '')],
    ...(view.windows ? [['windows', shown`${windowsLine(view.windows)}`] as [string, string]] : []),
    ['execution', shown`${execution.status ?? '—'} (target said ${execution.nativeStatus ?? '—'}` + (execution.monitorStatus ? shown`; monitor: ${execution.monitorStatus}` : '') + ')'],
    ...(execution.pendingApproval ? [['approval', shown`pending ${execution.pendingApproval.approvalId} since ${execution.pendingApproval.requestedAt}`] as [string, string]] : []),
    ...(execution.result?.summary !== undefined ? [['result', shown`${execution.result.summary}`] as [string, string]] : []),
    ['evidence', shown`${view.evidence.outcome}: ${evidenceWords({ status: execution.status, ...view.evidence })}`],
    ['acceptance', shown`${view.artifactAcceptance.state}` + (view.artifactAcceptance.receiptId ? shown` (receipt ${view.artifactAcceptance.receiptId}, ${view.artifactAcceptance.basis ?? '—'})` : '')],
    ['delivery', shown`${view.ownerDelivery.state}` + (view.ownerDelivery.receiptId ? shown` (receipt ${view.ownerDelivery.receiptId}, ${view.ownerDelivery.basis ?? '—'})` : '')],
    // A satisfied gate may still say what it rests on (a manual dispatch's: a person's attestation).
    ['gate', view.gate.satisfied ? 'satisfied' + (view.gate.reasons.length > 0 ? shown` — ${view.gate.reasons.join('; ')}` : '') : shown`not satisfied: ${view.gate.reasons.join('; ')}`],
    ['receipts', view.receipts.map((receipt) => shown`${receipt.event}@${receipt.at}`).join(', ')],
    [
      'operator',
      view.operatorReceipts
        .map((receipt) => shown`${receipt.receiptId}: ${receipt.kind} ${receipt.state} by ${receipt.verifiedBy}` + (receipt.recordedBy ? shown` (recorded by ${receipt.recordedBy})` : '') + shown`@${receipt.recordedAt}`)
        .join(', ') || '—',
    ],
    // CONTRACT §13: a person's attestations, apart from the receipts above — never runtime proof
    // (absent from the answer of an API older than manual mode).
    ...((view.manualAttestations ?? []).length > 0
      ? [
          [
            'manual',
            (view.manualAttestations ?? [])
              .map((attestation) => shown`${attestation.attestationId}: ${attestation.kind} by ${attestation.recordedBy} (${attestation.basis})@${attestation.recordedAt}` + (attestation.evidenceRef ? shown`, evidence ${attestation.evidenceRef}` : ''))
              .join(', '),
          ] as [string, string],
        ]
      : []),
  ];
  const older = olderEntries(view);
  if (older) rows.push(['older', older]);
  const width = Math.max(...rows.map(([name]) => name.length));
  const lines = rows.map(([name, value]) => `${name.padEnd(width)}  ${value}`);
  for (const unknown of view.unknowns) lines.push(`unknown${' '.repeat(Math.max(1, width - 6))} ${shown`${unknown}`}`);
  return lines.join('\n');
}

/** The view's lists that hold more than it shows, and the route each one's older entries are read from (its `more` cursor). */
function olderEntries(view: DispatchView): string | undefined {
  const lists = [
    ['receipts', view.more?.receipts, ROUTES.listReceipts],
    ['operator receipts', view.more?.operatorReceipts, ROUTES.listOperatorReceipts],
    ['manual attestations', view.more?.manualAttestations, ROUTES.listManualAttestations],
    ['runs', view.more?.runs, ROUTES.listRuns],
  ] as const;
  const more = lists.flatMap(([name, cursor, route]) => (cursor ? [shown`more ${name}: GET ${routePath(route, { dispatchId: view.dispatchId })}?cursor=${encodeURIComponent(cursor)}`] : []));
  return more.length === 0 ? undefined : [`the view shows the newest ${VIEW_LIST_LIMIT} of each list`, ...more].join('; ');
}

/** `ledger check <dispatchId>`: the dispatch view, readable or --json. */
export async function check(args: string[], print: (line: string) => void, connectTo: Connect = connect): Promise<number> {
  const { values, positionals } = parseCommandArgs({
    args,
    allowPositionals: true,
    options: { ...CONNECTION_OPTIONS, origin: { type: 'string' }, refresh: { type: 'boolean', default: false }, json: { type: 'boolean', default: false } },
  });
  const usage = 'usage: ledger check <dispatchId> [--origin O] [--refresh] [--json]';
  const dispatchId = onePositional(positionals, usage);
  if (!dispatchId) throw new ArgumentsError(`check needs a <dispatchId>\n${usage}`);
  const ledger = await connectTo(values, values);
  const answer = await ledger.raw('getDispatch', { params: { dispatchId }, query: { refresh: values.refresh ? true : undefined } });
  return printAnswer(answer, values.json, print, (body) => describeView(body as DispatchView));
}

interface HistoryItem {
  readonly dispatchId: string;
  readonly target: string;
  readonly createdAt: string;
  readonly phase: string;
  readonly status: string | null;
  readonly runId: string | null;
  readonly blockedReason: string | null;
}

/** `ledger status`: an origin's dispatches, newest first. */
export async function status(args: string[], print: (line: string) => void, connectTo: Connect = connect): Promise<number> {
  const { values } = parseCommandArgs({
    args,
    options: { ...CONNECTION_OPTIONS, origin: { type: 'string' }, status: { type: 'string' }, limit: { type: 'string', default: String(DEFAULT_LIST_LIMIT) }, cursor: { type: 'string' }, json: { type: 'boolean', default: false } },
  });
  // The origin names the route; remotely the ledger answers 404 unless the credentials are that origin's.
  const origin = originOf(values.origin);
  const ledger = await connectTo(values, { origin });
  const answer = await ledger.raw('history', { params: { origin }, query: { limit: Number(values.limit), status: values.status || undefined, cursor: values.cursor } });
  const next = [...(values.status ? ['--status', values.status] : []), '--limit', values.limit, '--origin', origin, ...connectionArgs(values)];
  return printAnswer(answer, values.json, print, (body) => {
    const page = body as { items: HistoryItem[]; cursor?: unknown };
    const rows = page.items.map((item) => [item.createdAt, item.dispatchId, item.target, item.phase, item.status ?? '—', item.blockedReason ?? item.runId ?? '—']);
    return [table(['created', 'dispatch', 'target', 'phase', 'status', 'run / reason'], rows), ...nextPage('status', next, page.cursor)].join('\n');
  });
}

/** A dispatch as `GET /attention` lists it. */
export interface AttentionLine {
  readonly kind: string;
  readonly dispatchId: string;
  readonly origin: string;
  readonly target: string;
  readonly since: string;
  readonly reason: string | null;
}

/** A target whose every slot is held (CONTRACT §11), as `GET /attention` lists it. */
export type AtCapacityLine = TargetAtCapacity;

/** The ledger counts at most this many waiting dispatches for the list (`GET /attention`). */
const WAITING_SHOWN = WAITING_COUNTED;

const isAtCapacity = (item: AttentionLine | AtCapacityLine): item is AtCapacityLine => item.kind === 'at_capacity';

/**
 * `ledger attention`'s lists for people: targets at capacity first (held/limit, how many of the slots
 * runs of unknown status hold, how many dispatches wait, since when it is full), then the dispatches. Every cell escaped.
 */
export function describeAttention(items: ReadonlyArray<AttentionLine | AtCapacityLine>): string {
  if (items.length === 0) return 'nothing needs attention';
  const targets = items.filter(isAtCapacity);
  const dispatches = items.filter((item): item is AttentionLine => !isAtCapacity(item));
  const parts: string[] = [];
  if (targets.length > 0) {
    parts.push(
      table(
        ['at capacity', 'slots held', 'held by unknown runs', 'waiting', 'full since'],
        targets.map((item) => [item.target, `${item.held}/${item.limit}`, String(item.heldByUnknownRuns), item.waiting >= WAITING_SHOWN ? `${WAITING_SHOWN}+` : String(item.waiting), item.since ?? '—']),
      ),
    );
    // A run of unknown status keeps its slot (it may still be running): only the target's 404 frees it.
    for (const item of targets.filter((candidate) => candidate.heldByUnknownRuns > 0)) {
      parts.push(shown`${item.target}: ${item.heldByUnknownRuns} slot(s) held by runs whose status is unknown; for a run the target no longer knows (see: npx ledger attention --kind unknown): npx ledger slots release --target ${item.target} --run-id RUN --dispatch-id D --reason TEXT`);
    }
  }
  if (dispatches.length > 0) {
    if (parts.length > 0) parts.push('');
    parts.push(table(['kind', 'dispatch', 'origin', 'target', 'since', 'why'], dispatches.map((item) => [item.kind, item.dispatchId, item.origin, item.target, item.since, item.reason ?? '—'])));
  }
  return parts.join('\n');
}

/** `ledger attention [--kind K]`: work that needs a person, across all origins (operator). */
export async function attention(args: string[], print: (line: string) => void, connectTo: Connect = connect): Promise<number> {
  const { values } = parseCommandArgs({ args, options: { ...CONNECTION_OPTIONS, kind: { type: 'string' }, limit: { type: 'string', default: '50' }, cursor: { type: 'string' }, json: { type: 'boolean', default: false } } });
  const ledger = await connectTo(values);
  const answer = await ledger.raw('attention', { query: { limit: values.limit, kind: values.kind || undefined, cursor: values.cursor }, as: 'operator' });
  const next = [...(values.kind ? ['--kind', values.kind] : []), '--limit', values.limit, ...connectionArgs(values)];
  return printAnswer(answer, values.json, print, (body) => {
    const page = body as { items: Array<AttentionLine | AtCapacityLine>; cursor?: unknown };
    return [describeAttention(page.items), ...nextPage('attention', next, page.cursor)].join('\n');
  });
}
