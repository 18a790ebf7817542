/**
 * Every object key of the ledger's bucket, in one module (as ledger-items.ts holds every table key):
 * nothing else spells a key. Per dispatch everything lives under the folders of `DISPATCH_FOLDERS` —
 * `payloads/{id}/`, `evidence/{id}/`, `sealed/{id}/` (legacy sealed copies), `results/{id}/` — which the
 * retention function removes with the dispatch's anchor (CONTRACT §7); every key builder of a dispatch
 * starts with one of them, so a new kind of object cannot be missed by retention. Dispatch ids never
 * contain `/`, so one dispatch's folder is never a prefix of another's keys.
 */

/** The top-level prefix of each kind of object a dispatch has; each holds one folder per dispatch id. */
export const DISPATCH_FOLDERS = ['payloads', 'evidence', 'sealed', 'results'] as const;
type DispatchFolder = (typeof DISPATCH_FOLDERS)[number];
const folderOf = (kind: DispatchFolder, dispatchId: string): string => `${kind}/${dispatchId}/`;

/** The hex of a `sha256:<hex>` content hash. */
const hexOf = (hash: string): string => hash.slice(hash.indexOf(':') + 1);

/**
 * One dispatch's payloads: intake spills a large task and keeps a large invalid body under it, one
 * sub-folder per content hash (so a conflicting message's spill lands here too, though no anchor names it).
 */
export const payloadFolder = (dispatchId: string): string => folderOf('payloads', dispatchId);

export const OBJECTS = {
  /** A task spilled above the inline size: keyed by content, so a conflicting message can never overwrite the original's bytes. */
  task: (dispatchId: string, contentHash: string) => `${payloadFolder(dispatchId)}${hexOf(contentHash)}/task.json`,
  /** The original body of an invalid (blocked) message, when too large to keep inline. */
  invalidBody: (dispatchId: string, contentHash: string) => `${payloadFolder(dispatchId)}${hexOf(contentHash)}/invalid-body`,
  /** The body of a rejected message, by SQS message id. */
  rejectionBody: (messageId: string) => `rejections/${messageId}/body`,
} as const;

/**
 * One uploaded evidence file, under its attempt's root (`evidence/{dispatchId}/{attempt}/`, CONTRACT §5),
 * named by the SHA-256 of its bytes and then its ref: every write of a key holds the same bytes
 * (immutable by construction), so a seal — the hash the check recorded — always names bytes that stay,
 * and no copy is needed. Which upload a ref holds now is the table's pointer (`EvidenceUpload`); only
 * the API's PUT route writes here. (A function of its own, not one of `OBJECTS`: the API and the
 * monitor bundle this key alone.)
 */
export const evidenceObjectKey = (dispatchId: string, attempt: number, sha256: string, ref: string): string => `${folderOf('evidence', dispatchId)}${attempt}/${sha256}/${ref}`;

/**
 * Legacy: where an upload lived before uploads were content-addressed (`evidence/{id}/{attempt}/{ref}`).
 * Nothing writes it any more; a check that finds no pointer for a ref looks here once, so a file
 * uploaded before the upgrade still counts (`settleEvidence` adopts it under its hash).
 */
export const legacyEvidenceKey = (dispatchId: string, attempt: number, ref: string): string => `${folderOf('evidence', dispatchId)}${attempt}/${ref}`;

/**
 * Legacy: where the checker kept a sealed copy of a checked file before uploads were content-addressed.
 * Nothing writes it any more; retention still clears the `sealed/` folder of dispatches that have one.
 */
export const legacySealedKey = (dispatchId: string, attempt: number, ref: string, sha256: string): string => `${folderOf('sealed', dispatchId)}${attempt}/${sha256}/${ref}`;

/**
 * A final event's `result.body` above the inline limit (CONTRACT §10): one object per body a final event
 * carried, named by its content digest too — two reports of one seq with different bodies never
 * overwrite each other's; the state names the one it recorded. Bodies stored before the digest have none.
 * (A function of its own: the API bundles it.)
 */
export const resultBodyKey = (dispatchId: string, attempt: number, seq: number, digest?: string): string => `${folderOf('results', dispatchId)}${attempt}/${seq}${digest ? `-${digest}` : ''}.json`;

/** The folders holding every object of one dispatch: what retention deletes with its anchor. */
export const dispatchFolders = (dispatchId: string): string[] => DISPATCH_FOLDERS.map((kind) => folderOf(kind, dispatchId));
