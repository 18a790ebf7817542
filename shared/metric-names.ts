/**
 * The names of the ledger's own metrics that both the functions emit and the stack alarms on. Kept free
 * of imports: the CDK construct reads them, and must bundle nothing of the functions' runtime (Powertools
 * sets process-wide state when imported).
 */

/** Events that could not be put on the bus (the publisher; the stream retries them, then parks them). Alarmed on ≥ 1. */
export const PUBLISH_FAILURES_METRIC = 'PublishFailures';
/** Expired records whose objects could not be deleted (retention; the stream retries them, then parks them). Alarmed on ≥ 1. */
export const RETENTION_FAILURES_METRIC = 'RetentionFailures';
