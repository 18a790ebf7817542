import { localHandlerEnvironment, type LocalEndpoints } from '../local/clients.js';

/** How long the intake benches let the in-process target answer a submission. */
export const INTAKE_TARGET_TIMEOUT_MS = 5000;

/**
 * The environment the real intake handler (functions/intake/handler.ts) runs with in the intake benches
 * (intake-throughput.ts, profile-intake.ts), set before its import: its dependencies are built then.
 * A module of its own so that importing it starts nothing.
 */
export function oursEnvironment(endpoints: LocalEndpoints, tableName: string, bucket: string): Record<string, string> {
  return {
    ...localHandlerEnvironment(endpoints),
    LEDGER_TABLE_NAME: tableName,
    EVIDENCE_BUCKET: bucket,
    API_BASE_URL: 'http://127.0.0.1:9/',
    PRINCIPAL_MODE: 'open',
    POWERTOOLS_LOG_LEVEL: 'ERROR',
    POWERTOOLS_METRICS_DISABLED: 'true',
    TARGET_TIMEOUT_MS: String(INTAKE_TARGET_TIMEOUT_MS),
  };
}
