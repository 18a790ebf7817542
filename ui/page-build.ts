/**
 * How the status page's script (page/app.ts) is compiled for the browser: by ui/server.ts when it runs
 * from the repository's sources, and once by scripts/build-packages.ts for the `dispatch-ledger`
 * package. No imports, so the build script can read it without loading the server.
 */
export const PAGE_BUILD = {
  entry: 'app.ts',
  options: {
    bundle: true,
    format: 'esm',
    platform: 'browser',
    // Workspace packages from their TypeScript sources; `module` is esbuild's default, kept.
    conditions: ['@dispatch-ledger/source', 'module'],
    target: ['es2022'],
    legalComments: 'none',
    logLevel: 'silent',
  },
} as const;
