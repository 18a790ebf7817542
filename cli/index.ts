/**
 * `dispatch-ledger` as a module: a `ledger` command run in-process. `run(argv)` prints what the command
 * prints and resolves to its exit code (0 done, 1 failed, 2 a usage mistake or a request the ledger
 * would refuse). For a typed API to the ledger itself, use `@dispatch-ledger/client`.
 */
export { run } from './main.js';
