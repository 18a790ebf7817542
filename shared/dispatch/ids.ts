/**
 * CONTRACT §1 field rules for the identifiers, apart from the message schema: the API and the monitor
 * check ids without carrying the message schema (and zod's share of it) in their bundles. The rules
 * live in the protocol package.
 */
export { DISPATCH_ID, ORIGIN, TARGET_NAME } from '@dispatch-ledger/protocol';
