/**
 * Every object key of the ledger's bucket, in one module (as ledger-items.ts holds every table key).
 * Per dispatch everything lives under three folders — `payloads/{id}/`, `evidence/{id}/`,
 * `sealed/{id}/` — which the retention function removes with the dispatch's anchor; dispatch ids never
 * contain `/`, so one dispatch's folder is never a prefix of another's keys.
 */

/** The hex of a `sha256:<hex>` content hash. */
const hexOf = (hash: string): string => hash.slice(hash.indexOf(':') + 1);

/**
 * One dispatch's payloads: intake spills a large task and keeps a large invalid body under it, one
 * sub-folder per content hash (so a conflicting message's spill lands here too, though no anchor names it).
 */
export const payloadFolder = (dispatchId: string): string => `payloads/${dispatchId}/`;

/** An attempt's evidence root (CONTRACT §5): `evidence/{dispatchId}/{attempt}/`. */
export const evidenceRoot = (dispatchId: string, attempt: number): string => `evidence/${dispatchId}/${attempt}/`;

export const OBJECTS = {
  /** A task spilled above the inline size: keyed by content, so a conflicting message can never overwrite the original's bytes. */
  task: (dispatchId: string, contentHash: string) => `${payloadFolder(dispatchId)}${hexOf(contentHash)}/task.json`,
  /** The original body of an invalid (blocked) message, when too large to keep inline. */
  invalidBody: (dispatchId: string, contentHash: string) => `${payloadFolder(dispatchId)}${hexOf(contentHash)}/invalid-body`,
  /** The body of a rejected message, by SQS message id. */
  rejectionBody: (messageId: string) => `rejections/${messageId}/body`,
  /**
   * One uploaded evidence file, under its attempt's root (CONTRACT §5), named by the SHA-256 of its
   * bytes and then its ref: every write of a key holds the same bytes (immutable by construction), so
   * a seal — the hash the check recorded — always names bytes that stay, and no copy is needed. Which
   * upload a ref holds now is the table's pointer (`EvidenceUpload`); only the API's PUT route writes here.
   */
  evidence: (dispatchId: string, attempt: number, sha256: string, ref: string) => `${evidenceRoot(dispatchId, attempt)}${sha256}/${ref}`,
  /**
   * Legacy: the checker's sealed copy of a checked file, written before uploads were content-addressed.
   * Nothing writes it any more; retention still clears the folder of dispatches that have one.
   */
  sealed: (dispatchId: string, attempt: number, ref: string, sha256: string) => `sealed/${dispatchId}/${attempt}/${sha256}/${ref}`,
} as const;

/** The folders holding every object of one dispatch. */
export const dispatchFolders = (dispatchId: string): string[] => [payloadFolder(dispatchId), `evidence/${dispatchId}/`, `sealed/${dispatchId}/`];
