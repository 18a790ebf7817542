import { readLedgerConfig } from '../../shared/adapters/config.js';
import { CONFIG, createHandler } from './function.js';

/** The orchestrators function's Lambda entry: its config read from the environment the stack sets, once, at cold start (the local platform calls `createHandler` with its own). */
export const handler = createHandler(readLedgerConfig(CONFIG));
