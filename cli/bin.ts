#!/usr/bin/env node
// `ledger`'s entry: built into the `dispatch-ledger` package (scripts/build-packages.ts), and run from
// the TypeScript sources by the repository's bin/ledger.mjs.
// The pinned AWS SDK warns on node 20 about SDK releases after January 2027; ours are pinned.
const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
if (major < 20 || (major === 20 && minor < 19)) {
  process.stderr.write(`Dispatch Ledger needs Node.js 20.19 or newer (this is ${process.version})\n`);
  process.exit(1);
}
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const { cliMain } = await import('./main.js');
await cliMain();
