import { ArgumentsError, onePositional, parseCommandArgs } from './args.js';
import { contentHash } from '../shared/dispatch/canonical.js';
import { MANUAL_ATTESTATION_KINDS, type ManualAttestation, type ManualAttestationKind } from '../shared/dispatch/manual.js';
import { printAnswer } from './answer.js';
import { connect, CONNECTION_OPTIONS, type Connect } from './connect.js';
import { shown } from './table.js';

const USAGE =
  `usage: ledger manual <dispatchId> --kind ${MANUAL_ATTESTATION_KINDS.join('|')} --note N ` +
  '[--evidence-ref REF] [--attestation-id ID] [--origin O | --operator] [--json]';

/** What each kind says, for the line printed after it is recorded. */
const SAYS: Readonly<Record<ManualAttestationKind, string>> = {
  manual_dispatch_written: 'a person says the work was handed on by hand',
  manual_delivery_attested: 'a person says the result reached its owner (owner delivery confirmed on that basis)',
  manual_result_attested: "a person says the work is done (the gate rests on their word: it is not runtime proof)",
  manual_blocked: 'a person says the work cannot be done (the dispatch is blocked with their note)',
};

/**
 * `ledger manual`: records a person's attestation about a dispatch to a manual target (CONTRACT §13)
 * — `POST /dispatches/{id}/manual`. Without --attestation-id the id is derived from what is attested
 * (dispatch, kind, note, evidence ref), so running the same command again after a timeout is an
 * identical retry (answered with the stored attestation), never a second attestation.
 */
export async function manual(args: string[], print: (line: string) => void, connectTo: Connect = connect): Promise<number> {
  const { values, positionals } = parseCommandArgs({
    args,
    allowPositionals: true,
    options: {
      ...CONNECTION_OPTIONS,
      kind: { type: 'string' },
      note: { type: 'string' },
      'evidence-ref': { type: 'string' },
      'attestation-id': { type: 'string' },
      origin: { type: 'string' },
      operator: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
    },
  });
  const dispatchId = onePositional(positionals, USAGE);
  const kind = MANUAL_ATTESTATION_KINDS.find((known) => known === values.kind);
  const problem = !dispatchId ? 'manual needs a <dispatchId>' : !kind ? `--kind must be one of ${MANUAL_ATTESTATION_KINDS.join(', ')}` : values.note === undefined ? 'manual needs --note' : values.operator && values.origin !== undefined ? '--operator and --origin: give one' : undefined;
  if (problem !== undefined || !dispatchId || !kind || values.note === undefined) throw new ArgumentsError(`${problem}\n${USAGE}`);
  const evidenceRef = values['evidence-ref'];
  // 16 hex digits of SHA-256 over the attested content: the same command, the same id.
  const derived = `ma-${contentHash({ dispatchId, kind, note: values.note, evidenceRef: evidenceRef ?? null }).slice('sha256:'.length, 'sha256:'.length + 16)}`;
  const body = { attestationId: values['attestation-id'] ?? derived, kind, note: values.note, ...(evidenceRef !== undefined ? { evidenceRef } : {}) };
  const ledger = await connectTo(values, values);
  const answer = await ledger.raw('attestManual', { params: { dispatchId }, body, as: values.operator ? 'operator' : 'origin' });
  // 201 recorded, 200 an identical retry (the stored attestation).
  return printAnswer(answer, values.json, print, (answered, status) => {
    const stored = answered as ManualAttestation;
    return (
      `${status === 201 ? 'recorded' : 'already recorded (identical)'}: ` +
      shown`attestation ${stored.attestationId} — ${stored.kind} for dispatch ${stored.dispatchId} (attempt ${String(stored.attempt)}), recorded by ${stored.recordedBy}, ${stored.basis}, ${stored.recordedAt}` +
      (stored.evidenceRef ? shown`; evidence ${stored.evidenceRef}` : '') +
      `\n${SAYS[stored.kind] ?? shown`${stored.kind}`}`
    );
  });
}
