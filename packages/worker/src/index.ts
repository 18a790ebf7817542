/** @dispatch-ledger/worker — the worker kit (CONTRACT §12). The entry points land here. */
export {};
