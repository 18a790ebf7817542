import { parseCommandArgs } from './args.js';
import { printAnswer } from './answer.js';
import { connect, CONNECTION_OPTIONS, connectionArgs, originOf, type Connect } from './connect.js';
import { dispatchCommand, shellWord } from '../shared/dispatch/commands.js';
import { UsageError } from './operations.js';
import { shown } from './table.js';

export { describeFailure } from './answer.js';

/**
 * Flow control from the command line (CONTRACT §2 v2, §11): `ledger cancel` (the owning origin) and
 * `ledger slots release` (the operator). Each prints a line for people — every value escaped, the
 * target's answer included — or the API body as it came with `--json`; exit 0 only for a 2xx.
 */

type Print = (line: string) => void;

export const CANCEL_USAGE = 'usage: ledger cancel <dispatchId> --reason R [--origin O] [--json]';
export const SLOTS_USAGE = 'usage: ledger slots release --target T --run-id R --reason TEXT [--dispatch-id D] [--json]';

/** `POST /dispatches/{id}/cancel`'s 202 body, as much of it as a person reads. */
interface CancelAnswer {
  readonly dispatchId?: string;
  readonly phase?: string;
  readonly status?: string | null;
  readonly cancelRequestedAt?: string | null;
  readonly cancel?: { readonly asks?: number; readonly answer?: string | null; readonly nextAskAt?: string | null } | null;
  readonly cancelled?: boolean;
  readonly askedNow?: boolean;
}

/** `POST /targets/{t}/slots/release`'s 200 body. */
interface ReleaseAnswer {
  readonly target?: string;
  readonly runId?: string;
  readonly dispatchId?: string;
  readonly status?: string | null;
  readonly releasedBy?: string;
}

/**
 * What a cancel came to: cancelled at once (never submitted), confirmed by the target, or asked of it and
 * its answer. The check it suggests names the origin that cancelled and the connection flags as given.
 */
export function describeCancel(answer: unknown, origin = 'planner', connection: readonly string[] = []): string {
  const body = answer as CancelAnswer;
  const id = body.dispatchId ?? '?';
  if (body.phase === 'cancelled') return shown`cancelled at once: ${id} was never submitted, so its target never sees it`;
  if (body.cancelled) return shown`cancelled: ${id}; the target confirmed it (run ${body.status ?? 'cancelled'})`;
  const asks = body.cancel?.asks ?? 0;
  const head = body.askedNow
    ? shown`cancel asked of the target: ${id} (requested at ${body.cancelRequestedAt ?? '?'})`
    : shown`cancel already asked: ${id} (requested at ${body.cancelRequestedAt ?? '?'}, asked ${asks} time(s))`;
  const said = body.cancel?.answer ? shown`; the target's answer: ${body.cancel.answer}` : '; no answer from the target yet';
  const again = body.cancel?.nextAskAt ? shown`; asked again at ${body.cancel.nextAskAt}` : '';
  return `${head}${said}${again}\n${shown`the run is cancelled only when the target says so: ${dispatchCommand({ dispatchId: id, origin }, 'check', ['--refresh', ...connection.map(shellWord)].join(' '))}`}`;
}

/** What a slot release did: whose slot, by whom, and that the run itself stays as unknown as it was. */
export function describeRelease(answer: unknown): string {
  const body = answer as ReleaseAnswer;
  return shown`released: the slot of run ${body.runId ?? '?'} (dispatch ${body.dispatchId ?? '?'}) of target ${body.target ?? '?'}, by ${body.releasedBy ?? '?'}; the run stays ${body.status ?? 'unknown'}`;
}

/** `ledger cancel <dispatchId> --reason R`: cancels it at once if never submitted, else asks its target (CONTRACT §2 v2). */
export async function cancel(args: readonly string[], print: Print, connectTo: Connect = connect): Promise<number> {
  const { values, positionals } = parseCommandArgs({
    args: [...args],
    allowPositionals: true,
    options: { ...CONNECTION_OPTIONS, reason: { type: 'string' }, origin: { type: 'string' }, json: { type: 'boolean', default: false } },
  });
  const [dispatchId, ...extra] = positionals;
  if (!dispatchId || extra.length > 0) throw new UsageError(`cancel needs exactly one <dispatchId>\n${CANCEL_USAGE}`);
  if (!values.reason?.trim()) throw new UsageError(`cancel needs --reason (why, recorded with the cancel)\n${CANCEL_USAGE}`);
  const ledger = await connectTo(values, values);
  const answer = await ledger.raw('cancel', { params: { dispatchId }, body: { reason: values.reason } });
  return printAnswer(answer, values.json, print, (body) => describeCancel(body, originOf(values.origin), connectionArgs(values)));
}

/** `ledger slots release --target T --run-id R --reason TEXT [--dispatch-id D]`: frees the slot of a run its target no longer knows (operator). */
export async function slots(args: readonly string[], print: Print, connectTo: Connect = connect): Promise<number> {
  const [command, ...rest] = args;
  if (command !== 'release') throw new UsageError(SLOTS_USAGE);
  const { values, positionals } = parseCommandArgs({
    args: rest,
    allowPositionals: true,
    options: { ...CONNECTION_OPTIONS, target: { type: 'string' }, 'run-id': { type: 'string' }, reason: { type: 'string' }, 'dispatch-id': { type: 'string' }, json: { type: 'boolean', default: false } },
  });
  if (positionals.length > 0) throw new UsageError(`slots release takes no positional arguments\n${SLOTS_USAGE}`);
  const missing = (['target', 'run-id', 'reason'] as const).filter((flag) => !values[flag]?.trim());
  if (missing.length > 0) throw new UsageError(`slots release needs ${missing.map((flag) => `--${flag}`).join(', ')}\n${SLOTS_USAGE}`);
  const { target = '', 'run-id': runId, reason, 'dispatch-id': dispatchId } = values;
  const ledger = await connectTo(values);
  const answer = await ledger.raw('releaseSlot', { params: { target }, body: { runId, reason, ...(dispatchId ? { dispatchId } : {}) }, as: 'operator' });
  return printAnswer(answer, values.json, print, describeRelease);
}
