import { parseArgs } from 'node:util';
import type { Rejection } from '../shared/ledger/port.js';
import { getJson, localInfo, originOf, postJson } from './dispatch.js';
import { LocalPlatformError } from './local.js';
import { shown, table } from './table.js';

type Print = (line: string) => void;

/** Prints an API answer: JSON for scripts, a line for people; exit 0 only for a 2xx. */
function report(answer: { status: number; body: unknown }, json: boolean, print: Print, human: () => string): number {
  const ok = answer.status >= 200 && answer.status < 300;
  if (json) print(JSON.stringify(answer.body));
  else print(ok ? human() : `${answer.status}: ${JSON.stringify(answer.body)}`);
  return ok ? 0 : 1;
}

/** `ledger approve <dispatchId> --approval-id A [--decision approve|cancel]`: forwarded to the target (CONTRACT §2). */
export async function approve(args: string[], print: Print): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { 'approval-id': { type: 'string' }, decision: { type: 'string', default: 'approve' }, origin: { type: 'string' }, json: { type: 'boolean', default: false } },
  });
  const dispatchId = positionals[0];
  if (!dispatchId || !values['approval-id'] || (values.decision !== 'approve' && values.decision !== 'cancel')) {
    throw new LocalPlatformError('usage: ledger approve <dispatchId> --approval-id A [--decision approve|cancel] [--origin O] [--json]');
  }
  const answer = await postJson(localInfo(), `/dispatches/${encodeURIComponent(dispatchId)}/approval`, originOf(values.origin), {
    approvalId: values['approval-id'],
    decision: values.decision,
  });
  return report(answer, values.json, print, () => shown`${values.decision === 'approve' ? 'approved' : 'cancelled'}: ${dispatchId} (approval ${values['approval-id']})`);
}

/** `ledger redispatch <dispatchId> --reason R [--force]`: a new attempt (CONTRACT §4); 409 while the run may be active. */
export async function redispatch(args: string[], print: Print): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { reason: { type: 'string' }, force: { type: 'boolean', default: false }, origin: { type: 'string' }, json: { type: 'boolean', default: false } },
  });
  const dispatchId = positionals[0];
  if (!dispatchId || !values.reason?.trim()) throw new LocalPlatformError('usage: ledger redispatch <dispatchId> --reason R [--force] [--origin O] [--json]');
  const answer = await postJson(localInfo(), `/dispatches/${encodeURIComponent(dispatchId)}/redispatch`, originOf(values.origin), {
    reason: values.reason,
    ...(values.force ? { force: true } : {}),
  });
  const attempt = (answer.body as { attempt?: unknown }).attempt;
  return report(answer, values.json, print, () => shown`redispatched: ${dispatchId}, attempt ${String(attempt)}` + (values.force ? ' (forced: the previous run is superseded)' : ''));
}

/** `ledger rejections [--limit N]`: unreadable and conflicting messages, newest first (operator). */
export async function rejections(args: string[], print: Print): Promise<number> {
  const { values } = parseArgs({ args, options: { limit: { type: 'string', default: '50' }, json: { type: 'boolean', default: false } } });
  const answer = await getJson(localInfo(), `/rejections?${new URLSearchParams({ limit: values.limit }).toString()}`, originOf(undefined));
  if (values.json || answer.status !== 200) return report(answer, true, print, () => '');
  const items = (answer.body as { items: Rejection[] }).items;
  if (items.length === 0) {
    print('no rejected messages');
    return 0;
  }
  print(table(['at', 'reason', 'message', 'dispatch', 'origin', 'preview'], items.map((item) => [item.at, item.reason, item.messageId, item.dispatchId ?? '—', item.origin ?? '—', item.bodyPreview]), 60));
  return 0;
}
