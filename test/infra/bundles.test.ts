import { describe, expect, it } from 'vitest';
import { build } from 'esbuild';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { buildFunctionBundles, ESBUILD_OPTIONS, FUNCTIONS_DIST, handlerEntry, LEDGER_FUNCTIONS, type LedgerFunctionName } from '../../infra/bundling.js';
import { BUDGET, measureBundles } from '../../scripts/bundle-report.js';

/** A function's bundle as `@dispatch-ledger/cdk` ships it (`npm run build` made it; the first test holds it to a rebuild). */
const shippedText = (name: LedgerFunctionName): string => readFileSync(path.join(FUNCTIONS_DIST, name, 'index.mjs'), 'utf8');

describe('Lambda bundles (the deployed esbuild options)', () => {
  it('ships, for every function, exactly what a rebuild from the sources makes (the build is deterministic, and no shipped bundle is stale)', async () => {
    const again = mkdtempSync(path.join(tmpdir(), 'ledger-rebuild-'));
    try {
      await buildFunctionBundles(again);
      for (const name of LEDGER_FUNCTIONS) {
        const rebuilt = readFileSync(path.join(again, name, 'index.mjs'));
        expect(rebuilt.length, name).toBeGreaterThan(100_000);
        expect(rebuilt.equals(readFileSync(path.join(FUNCTIONS_DIST, name, 'index.mjs'))), `${name}: the shipped bundle differs from a rebuild`).toBe(true);
      }
    } finally {
      rmSync(again, { recursive: true, force: true });
    }
  });

  it(`keeps every function within ${BUDGET} × a bundle of only the AWS SDK clients and commands it uses`, async () => {
    const report = await measureBundles();
    for (const name of LEDGER_FUNCTIONS) {
      const { bytes, sdkOnlyBytes, topContributors, withinBudget } = report.functions[name];
      expect(sdkOnlyBytes, name).toBeGreaterThan(100_000);
      // The exact ratio, not the report's (rounded to 3 decimals, it let 1.3004 pass as 1.300).
      expect(bytes / sdkOnlyBytes, `${name}: ${bytes} B vs ${sdkOnlyBytes} B; largest: ${topContributors.map((c) => `${c.name} ${c.bytes}`).join(', ')}`).toBeLessThanOrEqual(BUDGET);
      expect(withinBudget, name).toBe(true);
    }
  });

  it('bundles @dispatch-ledger/protocol from its TypeScript sources (the `@dispatch-ledger/source` condition), never from a dist/ that may be stale, and loads no zod for it', async () => {
    const built = await build({ entryPoints: [handlerEntry('publisher')], bundle: true, platform: 'node', format: 'esm', conditions: [...ESBUILD_OPTIONS.conditions], write: false, metafile: true, outfile: 'publisher.mjs' });
    const inputs = Object.keys(built.metafile.inputs);
    expect(inputs).toContain('packages/protocol/src/index.ts');
    expect(inputs.some((input) => input.startsWith('packages/protocol/dist/'))).toBe(false);
  });

  it('keeps zod and the table adapters out of the publisher (it validates nothing; its one table write, the counters of GET /counts, has a module of its own)', async () => {
    const built = await build({ entryPoints: [handlerEntry('publisher')], bundle: true, platform: 'node', format: 'esm', conditions: [...ESBUILD_OPTIONS.conditions], write: false, metafile: true, outfile: 'publisher.mjs' });
    const inputs = Object.keys(built.metafile.inputs);
    expect(inputs.some((input) => input.includes('node_modules/zod/'))).toBe(false);
    for (const adapter of ['shared/adapters/ledger-table.ts', 'shared/adapters/ledger-feeds.ts']) expect(inputs.some((input) => input.includes(adapter)), adapter).toBe(false);
    expect(inputs.some((input) => input.includes('shared/adapters/dispatch-counters.ts'))).toBe(true);
    expect(inputs.some((input) => input.includes('node_modules/@aws-sdk/client-eventbridge/'))).toBe(true);
  });

  it('nothing forgotten: keeps zod, EventBridge and the table adapter out of retention (it decodes stream images, looks two items up by key and talks to S3)', async () => {
    const built = await build({ entryPoints: [handlerEntry('retention')], bundle: true, platform: 'node', format: 'esm', conditions: [...ESBUILD_OPTIONS.conditions], write: false, metafile: true, outfile: 'retention.mjs' });
    const inputs = Object.keys(built.metafile.inputs);
    for (const kept of ['node_modules/zod/', 'node_modules/@aws-sdk/client-eventbridge/', 'shared/adapters/ledger-table.ts']) expect(inputs.some((input) => input.includes(kept)), kept).toBe(false);
    expect(inputs.some((input) => input.includes('node_modules/@aws-sdk/client-s3/'))).toBe(true);
  });

  it('leaves the operator-receipt schemas out of every bundle but the API: a schema is built on first use, and one no code uses is dropped (esbuild kept and built them all at import while they were plain module-level values)', async () => {
    // Messages only the operator receipts' schemas (the request body and the stored receipt) carry.
    const RECEIPT_SCHEMA_TEXT = /verifiedBy is blank|does not match the receipt it covers/;
    for (const name of ['intake', 'monitor', 'failures'] as const) expect(RECEIPT_SCHEMA_TEXT.test(shippedText(name)), name).toBe(false);
    // The control: the API records and validates receipts, so its bundle has them.
    expect(RECEIPT_SCHEMA_TEXT.test(shippedText('api'))).toBe(true);
  });

  it('leaves the writes only other functions make (LedgerWrites: the accepted message, claims, rejections, deferrals, registrations) out of the API bundle: its table adapter is LedgerTableCore', async () => {
    // Minified class methods keep their names.
    const WRITES = /putAcceptedMessage|renewClaim|putRejection|deferDue|putLambdaFailure|putOriginSettings|putPrincipal/;
    expect(WRITES.test(shippedText('api'))).toBe(false);
    // The control: intake writes the accepted message, so its bundle has it.
    expect(WRITES.test(shippedText('intake'))).toBe(true);
  });

  it('compiles the census fault-injection point out of every deployed bundle: nothing there can inject a fault', async () => {
    const bundleText = async (name: LedgerFunctionName, define: Record<string, string>): Promise<string> => {
      const built = await build({ entryPoints: [handlerEntry(name)], bundle: true, platform: 'node', format: 'esm', conditions: [...ESBUILD_OPTIONS.conditions], minify: true, write: false, outfile: `${name}.mjs`, define, logLevel: 'silent' });
      return built.outputFiles.map((file) => file.text).join('');
    };
    // The only code that makes a fault: the crash and the DynamoDB throttle, timeout and unavailability.
    const FAULT_TEXT = /injected (crash|throttle|timeout|unavailability)/;
    // And the DynamoDB client carries no fault middleware at all (was: kept, asking nothing, in every bundle).
    for (const name of LEDGER_FUNCTIONS) {
      const text = shippedText(name);
      expect(FAULT_TEXT.test(text), `${name} injects faults`).toBe(false);
      expect(text, `${name} adds the fault middleware`).not.toContain('dispatchLedgerFaults');
    }
    // The control: the same entry built without the deployed define carries them, so the checks above can fail.
    expect(FAULT_TEXT.test(await bundleText('intake', {}))).toBe(true);
    expect(await bundleText('intake', {})).toContain('dispatchLedgerFaults');
    // Likewise the local platform's switch that lets an enforcing API reach loopback targets (--sigv4).
    for (const name of ['intake', 'api', 'monitor'] as const) expect(shippedText(name), name).not.toContain('LOCAL_TARGETS_ON_LOOPBACK');
    expect(await bundleText('api', {})).toContain('LOCAL_TARGETS_ON_LOOPBACK');
  });
});
