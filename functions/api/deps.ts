import { functionLogger } from '../../shared/adapters/powertools.js';
import type { LedgerConfig, ReadConfigOptions } from '../../shared/adapters/config.js';
import { parseStaticRegistry } from '../../shared/adapters/static-registry.js';
import { LedgerFeedsTable } from '../../shared/adapters/ledger-feeds.js';
import { InboxTable } from '../../shared/adapters/inbox-table.js';
import { buildLedgerAdapters, dispatchWorkDeps } from '../../shared/adapters/wiring.js';
import { LedgerTableCore } from '../../shared/adapters/ledger-table.js';
import type { ApiDeps } from '../../shared/api/routes.js';
import { nudgingAdmission } from '../../shared/adapters/admission-nudge.js';

/** Composition root of the API function. */
export const logger = functionLogger('api');

/** API_BASE_URL is set locally; in AWS the function URL is its own and arrives with each request. */
export const CONFIG: ReadConfigOptions = { requireApiBaseUrl: false, parseRegistry: parseStaticRegistry };

export function apiDeps(config: LedgerConfig): ApiDeps {
  const adapters = buildLedgerAdapters(config, LedgerTableCore);
  // A write that frees a slot nudges the monitor to admit the next waiting dispatch at once (CONTRACT §11).
  const store = adapters.admissionNudge ? nudgingAdmission(adapters.table, adapters.admissionNudge, (error) => logger.warn('admission nudge failed; the next tick admits', { error })) : adapters.table;
  return {
    ...dispatchWorkDeps(config, adapters),
    store,
    feeds: new LedgerFeedsTable(adapters.documents, { tableName: config.tableName, retentionSeconds: config.retentionSeconds }),
    principals: adapters.table,
    principalMode: config.principalMode,
    inbox: new InboxTable(adapters.documents, { tableName: config.tableName, retentionSeconds: config.retentionSeconds, inboxShards: config.inboxShards }),
    inboxShards: config.inboxShards,
  };
}
