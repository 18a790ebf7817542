import type { Route } from './routes.js';

/**
 * The operator's lists (CONTRACT §2 v2): `GET /dispatches` (every origin's dispatches, newest first)
 * and `GET /counts` (counts by phase, execution status and evidence outcome).
 */
export const OPERATOR_LIST_ROUTES: readonly Route[] = [];
