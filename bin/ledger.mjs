#!/usr/bin/env node
// The `ledger` CLI from the TypeScript sources through tsx, for development and the tests that run the
// sources; `npx ledger` runs the built one (packages/cli). Both start at cli/bin.ts.
const { register } = await import('tsx/esm/api');
register();
await import('../cli/bin.ts');
