#!/usr/bin/env node
// The `ledger` CLI from the TypeScript sources through tsx, for development and the tests that run
// the sources; `npx ledger` runs the built one (packages/cli, cli/bin.ts).
const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
if (major < 20 || (major === 20 && minor < 19)) {
  process.stderr.write(`Dispatch Ledger needs Node.js 20.19 or newer (this is ${process.version})\n`);
  process.exit(1);
}
// The pinned AWS SDK warns on node 20 about SDK releases after January 2027; ours are pinned.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const { register } = await import('tsx/esm/api');
register();
const { cliMain } = await import('../cli/main.ts');
await cliMain();
