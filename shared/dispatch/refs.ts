/**
 * Safe evidence refs (CONTRACT §6): the rule lives in the protocol package, with the other bounds the
 * ledger, the worker kit and the demo agent share.
 */
export { isSafeRef, MAX_REF_BYTES, refProblem, type RefProblem } from '@dispatch-ledger/protocol';
