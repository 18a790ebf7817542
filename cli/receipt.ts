import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import type { OperatorReceipt } from '../shared/dispatch/receipts.js';
import { localInfo, originOf, postJson } from './dispatch.js';
import { LocalPlatformError } from './local.js';
import { shown } from './table.js';

const USAGE =
  'usage: ledger receipt <dispatchId> --run R --kind artifact_acceptance|owner_delivery --state S --verified-by V ' +
  '[--evidence-ref REF] [--receipt-id ID] [--note N] [--origin O] [--json]';

/**
 * `ledger receipt`: records an operator receipt (CONTRACT §5) — artifact acceptance (accepted|rejected)
 * or owner delivery (confirmed|failed; confirmed needs --evidence-ref). Without --receipt-id one is
 * made up and printed: pass it again to retry safely (an identical retry answers with the stored receipt).
 */
export async function receipt(args: string[], print: (line: string) => void): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
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
  const dispatchId = positionals[0];
  if (!dispatchId || !values.run || !values.kind || !values.state || !values['verified-by']) throw new LocalPlatformError(USAGE);
  const body = {
    receiptId: values['receipt-id'] ?? `rc-${randomUUID()}`,
    runId: values.run,
    kind: values.kind,
    state: values.state,
    verifiedBy: values['verified-by'],
    ...(values['evidence-ref'] !== undefined ? { evidenceRef: values['evidence-ref'] } : {}),
    ...(values.note !== undefined ? { note: values.note } : {}),
  };
  const answer = await postJson(localInfo(), `/dispatches/${encodeURIComponent(dispatchId)}/receipts`, originOf(values.origin), body);
  const recorded = answer.status === 200 || answer.status === 201;
  if (values.json) {
    print(JSON.stringify(answer.body));
    return recorded ? 0 : 1;
  }
  if (!recorded) {
    print(`${answer.status}: ${JSON.stringify(answer.body)}`);
    return 1;
  }
  const stored = answer.body as OperatorReceipt;
  print(
    `${answer.status === 201 ? 'recorded' : 'already recorded (identical)'}: ` +
      shown`receipt ${stored.receiptId} — ${stored.kind} ${stored.state} for dispatch ${stored.dispatchId}, run ${stored.runId}, verified by ${stored.verifiedBy} ` +
      (stored.recordedBy ? shown`(recorded by ${stored.recordedBy}, ${stored.basis}, ${stored.recordedAt})` : shown`(${stored.basis}, ${stored.recordedAt})`),
  );
  return 0;
}
