import { describe, expect, it } from 'vitest';
import { loadHandler, LOCAL_FUNCTIONS, type LocalFunction } from '../../local/functions.js';

/** The local platform makes each handler from its module's `createHandler` and `CONFIG`, on the settings it gives (never process.env). */
describe('loadHandler', () => {
  const settings = { LEDGER_TABLE_NAME: 'local-table', EVIDENCE_BUCKET: 'local-bucket', API_BASE_URL: 'http://127.0.0.1:1', EVENT_BUS_NAME: 'local-bus', PRINCIPAL_MODE: 'open' };
  const fake = (module: Awaited<ReturnType<LocalFunction['module']>>): LocalFunction => ({ name: 'fake', module: async () => module, trigger: { kind: 'http', timeoutSeconds: 30 } });

  it('makes the handler on the config read from the settings it is given', async () => {
    const seen: unknown[] = [];
    const handler = await loadHandler(fake({ CONFIG: { requireApiBaseUrl: false }, createHandler: (config: unknown) => { seen.push(config); return async () => ({ statusCode: 200 }); } }), settings);
    expect(typeof handler).toBe('function');
    expect(seen).toEqual([expect.objectContaining({ tableName: 'local-table', bucketName: 'local-bucket', principalMode: 'open' })]);
  });

  it('refuses a module without createHandler or without CONFIG, naming the function (was: a missing CONFIG loaded with the defaults)', async () => {
    await expect(loadHandler(fake({ CONFIG: {} }), settings)).rejects.toThrow(/fake function's module exports no function named "createHandler"/);
    await expect(loadHandler(fake({ createHandler: () => async () => undefined }), settings)).rejects.toThrow(/fake function's module exports no CONFIG/);
  });

  it('finds createHandler and CONFIG in every function the platform runs', async () => {
    for (const fn of LOCAL_FUNCTIONS) {
      const loaded = await fn.module();
      expect(typeof loaded.createHandler, fn.name).toBe('function');
      expect(loaded.CONFIG, fn.name).toBeDefined();
    }
  });
});
