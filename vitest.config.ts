import { defineConfig } from 'vitest/config';

// Three projects, by feedback speed (see README "Tests"):
// - unit: pure code and adapters against in-memory fakes or aws-sdk-client-mock; no servers.
// - integration: the real local engines (DynamoDB Local, fauxqs, moto), started once by the
//   global setup and stopped by pid afterwards.
// - infra: CDK template assertions, cdk-nag and cfn-lint on the synthesized stack; no servers.
/**
 * Workspace packages (packages/protocol) are read from their TypeScript sources through the `source`
 * export condition, never from a dist/ that may be stale; the rest are Vitest's defaults for node (Vite's without `module`). Each
 * project names it (an inline project does not inherit the root's `resolve`), for SSR too: tests run in
 * Vite's SSR environment, which takes its conditions from `ssr.resolve`.
 */
const resolve = { conditions: ['source', 'node', 'development|production'] };

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
        },
      },
      {
        resolve,
        ssr: { resolve },
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          environment: 'node',
          globalSetup: ['test/integration/global-setup.ts'],
          // The tests' fixed clock lies in the past: TTL off on their tables (see local/resources.ts).
          env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', DISPATCH_LEDGER_LOCAL_TTL: 'off' },
          testTimeout: 60_000,
          hookTimeout: 120_000,
          // Engines are shared; files run one at a time so counted operations stay exact.
          fileParallelism: false,
        },
      },
      {
        resolve,
        ssr: { resolve },
        test: {
          name: 'infra',
          include: ['test/infra/**/*.test.ts'],
          environment: 'node',
          // Synthesis bundles four functions with esbuild: seconds, not milliseconds.
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
