import { functionLogger, functionMetrics } from '../../shared/adapters/powertools.js';
import type { LedgerConfig, ReadConfigOptions } from '../../shared/adapters/config.js';
import { parseStaticRegistry } from '../../shared/adapters/static-registry.js';
import { buildLedgerAdapters, dispatchWorkDeps } from '../../shared/adapters/wiring.js';
import { HotPathTable } from '../../shared/adapters/hot-path-table.js';
import type { IntakeDeps } from '../../shared/usecases/intake.js';
import { cachedPrincipals } from '../../shared/principals/principals.js';

/** Composition root of the intake function: what it reads of the config, and its adapters built from it once per execution environment. */
export const logger = functionLogger('intake');
export const metrics = functionMetrics();

/** The settings the intake needs: every one but the bus, and the deploy-time registry read. */
export const CONFIG: ReadConfigOptions = { parseRegistry: parseStaticRegistry };

export function intakeDeps(config: LedgerConfig): IntakeDeps {
  const adapters = buildLedgerAdapters(config, HotPathTable);
  return {
    ...dispatchWorkDeps(config, adapters),
    store: adapters.table,
    // Each message's sender is resolved (enforce mode): reused as registrations are, not read per message.
    principals: cachedPrincipals(adapters.table, config.targetCacheMs),
    principalMode: config.principalMode,
  };
}
