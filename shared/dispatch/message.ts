import { DISPATCH_ID, ORIGIN, TARGET_NAME } from './ids.js';
import { MAX_TASK_DEPTH } from './state.js';
import { MAX_BODY_DEPTH, MAX_TIMEOUT_SECONDS } from '@dispatch-ledger/protocol';

export { DISPATCH_ID, ORIGIN, TARGET_NAME };
/** The message's schema and rules live in the protocol (docs/protocol.md §1); the intake reads with them. */
export {
  DEFAULT_MAX_HOPS,
  DEFAULT_PRIORITY,
  DEFAULT_RESULT_DELIVERY,
  DEFAULT_TIMEOUTS,
  MAX_PRIORITY,
  NOT_BEFORE_MAX_DAYS,
  RESULT_DELIVERY_MODES,
  resultDeliveryOf,
  type ResultDelivery,
} from '@dispatch-ledger/protocol';
export { DispatchMessageSchema, notBeforeProblem, type DispatchMessage } from '@dispatch-ledger/protocol/message';
/** The intake's reader lives in the protocol too: the client and the MCP server read what they send with it. */
export {
  MAX_ERRORS,
  MAX_ERROR_TEXT,
  MAX_ERRORS_BYTES,
  readDispatchMessage,
  type FieldError,
  type ReadMessage,
  type UnreadableReason,
} from '@dispatch-ledger/protocol/message';
export { MAX_TIMEOUT_SECONDS };
/**
 * CONTRACT v2 §1: `task` nests at most 64 levels, the task object itself being level 1. The message
 * object is level 1 of the body and the task level 2, so a body nests at most 65 levels; every other
 * field is shallow, so a deeper body is always invalid, and its depth tells which field is at fault.
 * Arrays and objects both count as levels; scalars do not.
 */
export { MAX_BODY_DEPTH, MAX_TASK_DEPTH };
