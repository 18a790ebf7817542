import { randomUUID } from 'node:crypto';

/**
 * A new dispatch id for a message that names none (`ledger send`, `ledger mcp`'s `dispatch`): the day
 * and 8 random hex digits. Random, so a caller that retries must reuse the id it got, or the retry is
 * a second dispatch.
 *
 * @example
 * newDispatchId(new Date('2026-12-02T09:00:00Z')) // 'd-2026-12-02-3f9a1c0e' (the hex varies)
 */
export const newDispatchId = (now: Date = new Date()): string => `d-${now.toISOString().slice(0, 10)}-${randomUUID().slice(0, 8)}`;
