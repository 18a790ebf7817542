import { functionLogger, functionMetrics } from '../../shared/adapters/powertools.js';
import { readLedgerConfig } from '../../shared/adapters/config.js';
import { parseStaticRegistry } from '../../shared/adapters/static-registry.js';
import { buildLedgerAdapters, dispatchWorkDeps } from '../../shared/adapters/wiring.js';
import { HotPathTable } from '../../shared/adapters/hot-path-table.js';
import type { IntakeDeps } from '../../shared/usecases/intake.js';
import { cachedPrincipals } from '../../shared/principals/principals.js';

/** Composition root of the intake function: config and clients built once per execution environment. */
export const logger = functionLogger('intake');
export const metrics = functionMetrics();

const config = readLedgerConfig({ parseRegistry: parseStaticRegistry });
const adapters = buildLedgerAdapters(config, HotPathTable);

export const intakeDeps: IntakeDeps = {
  ...dispatchWorkDeps(config, adapters),
  store: adapters.table,
  // Each message's sender is resolved (enforce mode): reused as registrations are, not read per message.
  principals: cachedPrincipals(adapters.table, config.targetCacheMs),
  principalMode: config.principalMode,
};
