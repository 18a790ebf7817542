import { fileURLToPath } from 'node:url';

/**
 * The platform's own node processes (the supervisor, fauxqs) and how to start them: from the
 * repository's TypeScript sources through tsx, or, in the `dispatch-ledger` package, the built
 * files beside this module's chunk (scripts/build-packages.ts defines DISPATCH_LEDGER_CLI_BUNDLE and
 * names them `<name>.js`). Their names carry the markers `isOurs` looks for (engines/process.ts).
 */
declare const DISPATCH_LEDGER_CLI_BUNDLE: boolean | undefined;

const SOURCES = {
  'supervisor-main': './supervisor-main.ts',
  'fauxqs-main': './engines/fauxqs-main.ts',
} as const;

export type NodeEntry = keyof typeof SOURCES;

/** True in the built CLI package; false when running from the repository's sources. */
export const RUNNING_BUILT = typeof DISPATCH_LEDGER_CLI_BUNDLE !== 'undefined';

/** The arguments to `node` that run `entry` (then its own arguments follow). */
export function nodeArgsOf(entry: NodeEntry): string[] {
  if (RUNNING_BUILT) return [fileURLToPath(new URL(`./${entry}.js`, import.meta.url))];
  return ['--import', 'tsx', fileURLToPath(new URL(SOURCES[entry], import.meta.url))];
}
