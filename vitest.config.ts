import { defineConfig } from 'vitest/config';
import { TEST_MS } from './test/support/bounds.js';

// Four projects, by feedback speed (see README "Tests"):
// - unit: pure code and adapters against in-memory fakes or aws-sdk-client-mock; no servers.
// - integration: the real local engines: fauxqs and moto started once by the global setup, a DynamoDB
//   Local per file (its setup file), each stopped by pid afterwards. After unit and infra (groupOrder 1).
// - infra: CDK template assertions, cdk-nag and cfn-lint on the synthesized stack; no servers.
// - census: the CI-sized census, alone and last (groupOrder 2).
/**
 * Workspace packages (packages/protocol) are read from their TypeScript sources through the `@dispatch-ledger/source`
 * export condition, never from a dist/ that may be stale — except the two built from the repository's
 * sources: `@dispatch-ledger/cdk` (the infra tests use the construct as a consumer does) and the `ledger`
 * bin of `dispatch-ledger` (local-cli.test.ts): `npm test` and each `npm run test:*` build first. The rest
 * are Vitest's defaults for node (Vite's without `module`). Each
 * project names it (an inline project does not inherit the root's `resolve`), for SSR too: tests run in
 * Vite's SSR environment, which takes its conditions from `ssr.resolve`.
 */
const resolve = { conditions: ['@dispatch-ledger/source', 'node', 'development|production'] };

const CENSUS = 'test/integration/census.test.ts';
/** Integration files at once: most of their time is spent waiting on ticks and polls, not on the CPU. */
const INTEGRATION_WORKERS = 3;

export default defineConfig({
  test: {
    reporters: ['default', './test/support/summary-reporter.ts'],
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    projects: [
      {
        resolve,
        ssr: { resolve },
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          environment: 'node',
          // With infra, before the integration files: one file per core.
          maxWorkers: 2,
        },
      },
      {
        resolve,
        ssr: { resolve },
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          environment: 'node',
          exclude: [CENSUS],
          globalSetup: ['test/integration/global-setup.ts'],
          // Each file's own DynamoDB Local; fauxqs and moto are shared (every file names its own queues and buses).
          setupFiles: ['test/integration/file-engines.ts'],
          // The tests' fixed clock lies in the past: TTL off on their tables (see local/resources.ts).
          env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', DISPATCH_LEDGER_LOCAL_TTL: 'off' },
          // A bound on liveness, not a check of speed (see test/support/bounds.ts).
          testTimeout: TEST_MS,
          hookTimeout: 120_000,
          // Files side by side: a file counts operations on its own clients and its own table engine.
          maxWorkers: INTEGRATION_WORKERS,
          sequence: { groupOrder: 1 },
        },
      },
      {
        resolve,
        ssr: { resolve },
        test: {
          // The census alone, last: it runs with CPU hogs on every core, which would slow the files beside it.
          name: 'census',
          include: [CENSUS],
          environment: 'node',
          globalSetup: ['test/integration/global-setup.ts'],
          setupFiles: ['test/integration/file-engines.ts'],
          env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', DISPATCH_LEDGER_LOCAL_TTL: 'off' },
          testTimeout: 60_000,
          hookTimeout: 120_000,
          maxWorkers: 1,
          sequence: { groupOrder: 2 },
        },
      },
      {
        resolve,
        ssr: { resolve },
        test: {
          name: 'infra',
          include: ['test/infra/**/*.test.ts'],
          environment: 'node',
          // The files share their worker's modules (they keep no state between files): aws-cdk-lib is loaded
          // once per worker instead of once per file, most of this project's time (docs/performance.md).
          isolate: false,
          maxWorkers: 2,
          // Synthesis and cfn-lint take seconds, not milliseconds.
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
