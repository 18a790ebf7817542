import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * Who may call the kit's HTTP server (CONTRACT V3 §8): the ledger, known by the `authorization` header
 * it sends an `http` target registered with a secret — the secret's value, sent as stored (so a secret
 * stored as `Bearer abc…` arrives as exactly that). During a rotation the worker holds two values,
 * `[current, previous]`; any other header, or none, is refused before the request is read.
 *
 * Compared in constant time over SHA-256 digests: `timingSafeEqual` needs equal lengths, and digesting
 * first keeps the length of the secret out of the timing too. Every held secret is compared, whichever
 * matches, so the timing does not say which one did.
 */

/** At most this many secrets at once: the current one and the one being rotated out. */
export const MAX_SECRETS = 2;
/** A header value Node will carry: visible ASCII and spaces, at most 8 KB. */
const HEADER_VALUE = /^[\x21-\x7e](?:[\x20-\x7e]{0,8190}[\x21-\x7e])?$/;

export type Authorizer = (authorization: string | undefined) => boolean;

/**
 * The check for `secret` / `secrets` as `createWorker` takes them; undefined when neither is given
 * (every caller is let in, as before V3 §8).
 * @throws TypeError for both given, none of `secrets`, more than two, or a value no header could carry.
 */
export function authorizerFor(secret: string | undefined, secrets: readonly string[] | undefined): Authorizer | undefined {
  if (secret !== undefined && secrets !== undefined) throw new TypeError('createWorker takes secret or secrets, not both');
  const held = secret !== undefined ? [secret] : secrets;
  if (held === undefined) return undefined;
  if (!Array.isArray(held) || held.length < 1 || held.length > MAX_SECRETS) {
    throw new TypeError(`secrets must hold 1 to ${MAX_SECRETS} values ([current, previous] during a rotation), got ${Array.isArray(held) ? held.length : typeof held}`);
  }
  for (const value of held) {
    // Never quoted: it is a secret.
    if (typeof value !== 'string' || !HEADER_VALUE.test(value)) throw new TypeError('a secret must be the authorization header value the ledger sends: 1..8192 visible ASCII characters, spaces inside');
  }
  const digests = held.map(digest);
  return (authorization) => {
    const sent = digest(authorization ?? '');
    let matched = false;
    for (const expected of digests) matched = timingSafeEqual(sent, expected) || matched;
    return authorization !== undefined && matched;
  };
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}
