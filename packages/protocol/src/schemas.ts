/**
 * zod schemas on the protocol's rules (`@dispatch-ledger/protocol/schemas`), apart from the rules
 * themselves so that importing a status or a bound never loads zod. `zod/mini`, and every top-level
 * construction `/* @__PURE__ *\/` (the package has no side effects): a Lambda bundle keeps only the
 * schemas its code uses.
 */
import * as z from 'zod/mini';
import { DISPATCH_ID, DISPATCH_ID_RULE, MAX_RUN_ID_CHARS, MAX_SEQ, NATIVE_STATUS, NATIVE_STATUS_RULE, refProblem, RUN_STATUSES } from './index.js';

/** A run status a target reports (CONTRACT §2). */
export const runStatusSchema = /* @__PURE__ */ z.enum(RUN_STATUSES);
/** A final run's own word for its status (CONTRACT V3 §2). */
export const nativeStatusSchema = /* @__PURE__ */ z.string().check(z.regex(NATIVE_STATUS, NATIVE_STATUS_RULE));
/** A dispatch id (CONTRACT §1). */
export const dispatchIdSchema = /* @__PURE__ */ z.string().check(z.regex(DISPATCH_ID, DISPATCH_ID_RULE));
/** A target's run id (CONTRACT §8). */
export const runIdSchema = /* @__PURE__ */ z.string().check(z.minLength(1), z.maxLength(MAX_RUN_ID_CHARS));
/** A run event's sequence number (CONTRACT §2). */
export const seqSchema = /* @__PURE__ */ z.int().check(z.minimum(0), z.maximum(MAX_SEQ));
/** A safe evidence ref (CONTRACT §6). */
export const safeRefSchema = /* @__PURE__ */ z.string().check(z.refine((ref) => refProblem(ref) === undefined, 'unsafe evidence ref'));
