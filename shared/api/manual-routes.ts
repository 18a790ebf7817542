import type { Route } from './routes.js';

/** Manual mode (CONTRACT §13): `POST /dispatches/{dispatchId}/manual`, a person's attestation. */
export const MANUAL_ROUTES: readonly Route[] = [];
