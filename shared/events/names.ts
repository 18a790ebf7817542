import type { DetailType } from './catalog.js';

/**
 * The event names the publisher needs at run time, apart from the detail schemas in `catalog.ts`:
 * the publisher never validates its own output (the tests do), so its bundle carries no zod.
 */

/** Every event's source on the bus. */
export const EVENT_SOURCE = 'dispatch-ledger';

/** The CloudWatch metric (CONTRACT §7, dimension Target only) each published event of these detail-types counts in. */
export const METRIC_OF_DETAIL_TYPE: Readonly<Partial<Record<DetailType, string>>> = {
  'Run Stalled': 'StalledRuns',
  'Run Unobservable': 'UnobservableRuns',
  'Approval Wait Expired': 'ApprovalWaitsExpired',
  'Run Recovered': 'RecoveredRuns',
  'Dispatch Orphaned': 'OrphanedDispatches',
  'Result Dropped': 'DroppedResults',
};
