import * as z from 'zod/mini';
import '@dispatch-ledger/protocol/english';
import { contentHash } from './canonical.js';
import { lazy } from '../lazy.js';
import { recordedBy, storedRecordFields } from './receipts.js';
import type { ManualAttestationKind } from '@dispatch-ledger/protocol';
import { MANUAL_ATTESTATION_FIELDS, type ManualAttestationBody } from '@dispatch-ledger/protocol/requests';

/**
 * Manual mode (CONTRACT §13, VALP): a person's attestations about a dispatch to a manual target. They
 * are useful audit records but never runtime proof: stored as items of their own with
 * `basis: "manual_attestation"` and the caller's principal, shown apart from the dispatch receipts,
 * and never written as `dispatch_submitted` or `dispatch_completed`. The three claims stay apart:
 * a written dispatch is not a result, a result is not a delivery.
 */

export { MANUAL_ATTESTATION_KINDS, type ManualAttestationKind } from '@dispatch-ledger/protocol';
/** The body of `POST /dispatches/{dispatchId}/manual`, as the protocol declares it. */
export { ManualAttestationBody } from '@dispatch-ledger/protocol/requests';

/** What a manual attestation rests on: a person's word about work no runtime did. */
export const MANUAL_ATTESTATION = 'manual_attestation';

/** One attestation as stored: one item per dispatch and attestationId, written once. */
export interface ManualAttestation {
  readonly attestationId: string;
  readonly dispatchId: string;
  readonly origin: string;
  /** The dispatch's attempt when it was recorded: a redispatch starts the manual work afresh. */
  readonly attempt: number;
  readonly kind: ManualAttestationKind;
  readonly note: string;
  readonly evidenceRef: string | null;
  readonly basis: typeof MANUAL_ATTESTATION;
  readonly recordedAt: string;
  /** The caller's principal id (its IAM identity in AWS, `local:<origin>` or `local:operator` locally), set by the ledger. */
  readonly recordedBy: string;
  /** `contentHash` of what the person submitted (`attestationPayload`): an identical retry has the same. */
  readonly payloadHash: string;
}

/** What the payload hash covers: the submitted fields, an absent evidenceRef the same as null. */
export function attestationPayload(body: ManualAttestationBody | ManualAttestation) {
  return { attestationId: body.attestationId, kind: body.kind, note: body.note, evidenceRef: body.evidenceRef ?? null };
}

/** The attestation to store for a validated body: bound to the dispatch, its origin and attempt, with who recorded it. */
export function manualAttestation(
  dispatch: { readonly dispatchId: string; readonly origin: string; readonly attempt: number },
  body: ManualAttestationBody,
  now: Date,
  recordedBy: string,
): ManualAttestation {
  const payload = attestationPayload(body);
  return {
    ...payload,
    dispatchId: dispatch.dispatchId,
    origin: dispatch.origin,
    attempt: dispatch.attempt,
    basis: MANUAL_ATTESTATION,
    recordedAt: now.toISOString(),
    recordedBy,
    payloadHash: contentHash(payload),
  };
}

/** A stored attestation, as read back for the view and the gate: its payload hash must still match. */
export const StoredManualAttestation = /* @__PURE__ */ lazy(() => z
  .strictObject({
    ...MANUAL_ATTESTATION_FIELDS(),
    ...storedRecordFields(),
    attempt: z.int().check(z.minimum(1)),
    basis: z.enum([MANUAL_ATTESTATION]),
    recordedBy: recordedBy(),
  })
  .check(
    z.superRefine((attestation, ctx) => {
      // Tampering or a partial write shows as a hash that no longer matches the fields it covers.
      if (contentHash(attestationPayload(attestation)) !== attestation.payloadHash) {
        ctx.addIssue({ code: 'custom', path: ['payloadHash'], message: 'does not match what it covers' });
      }
    }),
  ));
