import { APPROVAL_DECISIONS } from '@dispatch-ledger/protocol';
import { ArgumentsError, onePositional, parseCommandArgs } from './args.js';
import type { Rejection } from '../shared/dispatch/records.js';
import { printAnswer, printCall } from './answer.js';
import { connect, CONNECTION_OPTIONS, connectionArgs, originOf, type Connect } from './connect.js';
import { dispatchCommand, shellWord } from '../shared/dispatch/commands.js';
import { nextPage, shown, table } from './table.js';

type Print = (line: string) => void;

/** `ledger approve <dispatchId> --approval-id A [--decision D]` (one of APPROVAL_DECISIONS): forwarded to the target (CONTRACT §2). */
export async function approve(args: string[], print: Print, connectTo: Connect = connect): Promise<number> {
  const { values, positionals } = parseCommandArgs({
    args,
    allowPositionals: true,
    options: { ...CONNECTION_OPTIONS, 'approval-id': { type: 'string' }, decision: { type: 'string', default: 'approve' }, origin: { type: 'string' }, json: { type: 'boolean', default: false } },
  });
  const usage = `usage: ledger approve <dispatchId> --approval-id A [--decision ${APPROVAL_DECISIONS.join('|')}] [--origin O] [--json]`;
  const dispatchId = onePositional(positionals, usage);
  const decision = APPROVAL_DECISIONS.find((known) => known === values.decision);
  const problem = !dispatchId ? 'approve needs a <dispatchId>' : !values['approval-id'] ? 'approve needs --approval-id' : !decision ? `--decision must be ${APPROVAL_DECISIONS.join(' or ')}` : undefined;
  if (problem !== undefined || !dispatchId || !decision) throw new ArgumentsError(`${problem}\n${usage}`);
  const ledger = await connectTo(values, values);
  const answer = await ledger.raw('decideApproval', { params: { dispatchId }, body: { approvalId: values['approval-id'], decision } });
  return printAnswer(answer, values.json, print, () => shown`${values.decision === 'approve' ? 'approved' : 'cancelled'}: ${dispatchId} (approval ${values['approval-id']})`);
}

/** `ledger redispatch <dispatchId> --reason R [--force]`: a new attempt (CONTRACT §4); 409 while the run may be active. */
export async function redispatch(args: string[], print: Print, connectTo: Connect = connect): Promise<number> {
  const { values, positionals } = parseCommandArgs({
    args,
    allowPositionals: true,
    options: { ...CONNECTION_OPTIONS, reason: { type: 'string' }, force: { type: 'boolean', default: false }, origin: { type: 'string' }, json: { type: 'boolean', default: false } },
  });
  const usage = 'usage: ledger redispatch <dispatchId> --reason R [--force] [--origin O] [--json]';
  const dispatchId = onePositional(positionals, usage);
  if (!dispatchId || !values.reason?.trim()) throw new ArgumentsError(`${dispatchId ? 'redispatch needs --reason (why, recorded with the new attempt)' : 'redispatch needs a <dispatchId>'}\n${usage}`);
  const ledger = await connectTo(values, values);
  // A new attempt is made once per call: an unknown outcome is looked at before a second (a second --force
  // would supersede the attempt the first one made).
  const lookFirst = shown`the dispatch may have been redispatched: look before running this again — ${dispatchCommand({ dispatchId, origin: originOf(values.origin) }, 'check', ['--refresh', ...connectionArgs(values)].map(shellWord).join(' '))}`;
  const body = { reason: values.reason, ...(values.force ? { force: true } : {}) };
  return printCall(() => ledger.raw('redispatch', { params: { dispatchId }, body }), lookFirst, values.json, print, (body) => shown`redispatched: ${dispatchId}, attempt ${String((body as { attempt?: unknown }).attempt)}` + (values.force ? ' (forced: the previous run is superseded)' : ''));
}

/** `ledger rejections [--limit N]`: unreadable and conflicting messages, newest first (operator). */
export async function rejections(args: string[], print: Print, connectTo: Connect = connect): Promise<number> {
  const { values } = parseCommandArgs({ args, options: { ...CONNECTION_OPTIONS, limit: { type: 'string', default: '50' }, cursor: { type: 'string' }, json: { type: 'boolean', default: false } } });
  const ledger = await connectTo(values);
  const answer = await ledger.raw('rejections', { query: { limit: Number(values.limit), cursor: values.cursor }, as: 'operator' });
  const next = ['--limit', values.limit, ...connectionArgs(values)];
  return printAnswer(answer, values.json, print, (body) => {
    const { items, cursor } = body as { items: Rejection[]; cursor?: unknown };
    if (items.length === 0) return ['no rejected messages', ...nextPage('rejections', next, cursor)].join('\n');
    const rows = items.map((item) => [item.at, item.reason, item.messageId, item.dispatchId ?? '—', item.origin ?? '—', item.bodyPreview]);
    return [table(['at', 'reason', 'message', 'dispatch', 'origin', 'preview'], rows, { clip: { preview: 60 } }), ...nextPage('rejections', next, cursor)].join('\n');
  });
}
