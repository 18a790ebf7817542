#!/usr/bin/env node
// The `ledger` CLI. Runs the TypeScript sources through tsx, so a clone needs no build step.
const [major] = process.versions.node.split('.').map(Number);
if (major < 20) {
  process.stderr.write(`Dispatch Ledger needs Node.js 20 or newer (this is ${process.version})\n`);
  process.exit(1);
}
// The pinned AWS SDK warns on node 20 about SDK releases after January 2027; ours are pinned.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const { register } = await import('tsx/esm/api');
register();
const { cliMain } = await import('../cli/main.ts');
await cliMain();
