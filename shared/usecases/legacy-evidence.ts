import { legacyEvidenceKey } from '../ledger/objects.js';
import { evidenceKey, sha256Of, type UnpointedRef } from './evidence-check.js';

/**
 * A ref with no pointer may have been uploaded before uploads were content-addressed, under the
 * attempt's root as it was (`legacyEvidenceKey`). Found there, it is adopted: stored once under its
 * hash with a pointer, as an upload is today, so the seal names immutable bytes. (Nothing writes the old
 * key any more, so this runs once per such file, for dispatches in flight across the upgrade.)
 */
export const adoptLegacyUpload: UnpointedRef = async (deps, dispatchId, attempt, ref, now) => {
  const bytes = await deps.blobs.getBytes(legacyEvidenceKey(dispatchId, attempt, ref));
  if (!bytes) return undefined;
  const sha256 = sha256Of(bytes);
  await deps.blobs.put(evidenceKey(dispatchId, attempt, sha256, ref), bytes, 'application/octet-stream');
  await deps.store.putEvidenceUpload({ dispatchId, attempt, ref, sha256, bytes: bytes.length, at: now.toISOString() });
  return { sha256, bytes: bytes.length };
};

