import { ManualAttestationBody } from '../dispatch/manual.js';
import { recordManualAttestation } from '../usecases/manual.js';
import { isOperator } from './caller.js';
import { ApiError, json } from './http.js';
import { parseJson } from './lifecycle-routes.js';
import { recordedBy } from './receipt-routes.js';
import { ownedState, type Route } from './route-kit.js';
import { ROUTES } from '@dispatch-ledger/protocol';

/**
 * Manual mode (CONTRACT §13): `POST /dispatches/{dispatchId}/manual`, a person's attestation about a
 * dispatch to a manual target — by its owning origin or an operator (404 for anyone else, as for any
 * dispatch not theirs). 201 new; 200 with the stored attestation on an identical retry; 409 on the
 * same attestationId with any change, a result or block for a dispatch no longer waiting for a person
 * (or the retry of one that never moved it), an attestationId of an earlier attempt, or a dispatch not
 * yet recorded as waiting for a person; 422 for a dispatch whose target the registry does not name
 * manual, or a bad body (an unsafe evidenceRef).
 */
export const MANUAL_ROUTES: readonly Route[] = [
  {
    spec: ROUTES.attestManual,
    handle: async (deps, request, params, caller) => {
      // The operator may attest too (it is a person's word either way), never only read.
      const state = await ownedState(deps, params.dispatchId ?? '', caller, true);
      const body = parseJson(request.body, ManualAttestationBody());
      // The operator locally speaks for no origin: named as the operator, as a slot release is.
      const by = caller.kind === 'open' && isOperator(caller) ? 'local:operator' : recordedBy(caller, request.iamUserId);
      const outcome = await recordManualAttestation(deps, state, body, by);
      switch (outcome.kind) {
        case 'recorded':
          return json(201, outcome.attestation);
        case 'identical':
          return json(200, outcome.attestation);
        case 'changed':
          throw new ApiError('conflict', `attestation ${outcome.existing.attestationId} is recorded with other content; the original stands`, { recordedAt: outcome.existing.recordedAt });
        case 'not_manual':
          throw new ApiError('invalid', `target "${outcome.target}" is not manual`);
        case 'not_waiting':
          throw new ApiError('conflict', outcome.why);
        case 'conflict':
          throw new ApiError('conflict', 'the dispatch changed meanwhile; retry');
      }
    },
  },
];
