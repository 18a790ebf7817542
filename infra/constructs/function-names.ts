/** The ledger's Lambda functions, each a thin handler under `functions/<name>/handler.ts` in the repository. */
export const LEDGER_FUNCTIONS = ['intake', 'api', 'monitor', 'publisher', 'retention', 'failures'] as const;
export type LedgerFunctionName = (typeof LEDGER_FUNCTIONS)[number];
