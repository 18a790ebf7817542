import { randomUUID } from 'node:crypto';
import { OPERATOR_RECEIPT_KINDS } from '@dispatch-ledger/protocol';
import { ArgumentsError, onePositional, parseCommandArgs } from './args.js';
import type { OperatorReceipt } from '../shared/dispatch/receipts.js';
import { printCall, retryOnce } from './answer.js';
import { connect, CONNECTION_OPTIONS, type Connect } from './connect.js';
import { shown } from './table.js';

const USAGE =
  `usage: ledger receipt <dispatchId> --run R --kind ${OPERATOR_RECEIPT_KINDS.join('|')} --state S --verified-by V ` +
  '[--evidence-ref REF] [--receipt-id ID] [--note N] [--origin O] [--json]';

/**
 * `ledger receipt`: records an operator receipt (CONTRACT §5) — artifact acceptance (accepted or rejected)
 * or owner delivery (confirmed or failed; confirmed needs --evidence-ref). Without --receipt-id one is
 * made up and printed — with the answer, and with a failure whose outcome is unknown (no answer, a 5xx):
 * pass it again to retry safely (an identical retry answers with the stored receipt).
 */
export async function receipt(args: string[], print: (line: string) => void, connectTo: Connect = connect): Promise<number> {
  const { values, positionals } = parseCommandArgs({
    args,
    allowPositionals: true,
    options: {
      ...CONNECTION_OPTIONS,
      run: { type: 'string' },
      kind: { type: 'string' },
      state: { type: 'string' },
      'verified-by': { type: 'string' },
      'evidence-ref': { type: 'string' },
      'receipt-id': { type: 'string' },
      note: { type: 'string' },
      origin: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  const dispatchId = onePositional(positionals, USAGE);
  const missing = [!dispatchId && 'a <dispatchId>', !values.run && '--run', !values.kind && '--kind', !values.state && '--state', !values['verified-by'] && '--verified-by'].filter((word): word is string => typeof word === 'string');
  if (!dispatchId || missing.length > 0) throw new ArgumentsError(`receipt needs ${missing.join(', ')}\n${USAGE}`);
  const receiptId = values['receipt-id'] ?? `rc-${randomUUID()}`;
  // Made up here: said when the outcome is unknown, so a retry records the receipt once.
  const again = values['receipt-id'] === undefined ? retryOnce('the receipt may have been recorded', `--receipt-id ${receiptId}`) : undefined;
  const body = {
    receiptId,
    runId: values.run,
    kind: values.kind,
    state: values.state,
    verifiedBy: values['verified-by'],
    ...(values['evidence-ref'] !== undefined ? { evidenceRef: values['evidence-ref'] } : {}),
    ...(values.note !== undefined ? { note: values.note } : {}),
  };
  const ledger = await connectTo(values, values);
  // 201 recorded, 200 an identical retry (the stored receipt).
  return printCall(() => ledger.raw('recordReceipt', { params: { dispatchId }, body }), again, values.json, print, (answered, status) => {
    const stored = answered as OperatorReceipt;
    return (
      `${status === 201 ? 'recorded' : 'already recorded (identical)'}: ` +
      shown`receipt ${stored.receiptId} — ${stored.kind} ${stored.state} for dispatch ${stored.dispatchId}, run ${stored.runId}, verified by ${stored.verifiedBy} ` +
      (stored.recordedBy ? shown`(recorded by ${stored.recordedBy}, ${stored.basis}, ${stored.recordedAt})` : shown`(${stored.basis}, ${stored.recordedAt})`)
    );
  });
}
