import { ttlCache } from '../ttl-cache.js';

/**
 * The principal registry (CONTRACT §2): maps a caller's IAM identity — SQS `SenderId` at intake, the
 * IAM request context at the API — to what it may act as. One registry serves both doors, so an origin
 * can never be claimed through one that the other would refuse.
 */
export type Principal =
  | { readonly role: 'origin'; readonly origin: string }
  | { readonly role: 'target'; readonly target: string }
  | { readonly role: 'operator' };

export interface PrincipalRegistry {
  /** What the identity is registered as, or undefined if it is not registered. */
  resolve(principalId: string): Promise<Principal | undefined>;
}

/**
 * `registry` with what it resolves reused for `ttlMs` (intake asks for every message's sender, which
 * changes rarely): a registration is seen at once, a change or removal within `ttlMs`. Kept by the id
 * asked for, as `resolvePrincipal` resolves it: a role session (`AROA…:session`, as SQS reports a role)
 * whose role is registered costs no read of the session's own id per message.
 */
export function cachedPrincipals(registry: PrincipalRegistry, ttlMs: number, clock: () => number = Date.now): PrincipalRegistry {
  return { resolve: ttlCache(ttlMs, (id: string) => resolvePrincipal(registry, id), clock) };
}

/** How intake and API decide. `open` is the local platform's mode: every caller may act for any origin. */
export type PrincipalMode = 'open' | 'enforce';

/**
 * The ids to look an IAM caller up by, most specific first. SQS reports a role session as
 * `AROA…:session-name` and a user as `AIDA…`; registering the role id covers all its sessions.
 */
export function principalIdCandidates(principalId: string): string[] {
  const colon = principalId.indexOf(':');
  return colon > 0 ? [principalId, principalId.slice(0, colon)] : [principalId];
}

/** What an IAM caller is registered as, trying its most specific id first (a role session, then the role). */
export async function resolvePrincipal(registry: PrincipalRegistry, principalId: string): Promise<Principal | undefined> {
  for (const id of principalIdCandidates(principalId)) {
    const principal = await registry.resolve(id);
    if (principal) return principal;
  }
  return undefined;
}

export async function mayActForOrigin(
  registry: PrincipalRegistry,
  mode: PrincipalMode,
  principalId: string | undefined,
  origin: string,
): Promise<boolean> {
  if (mode === 'open') return true;
  if (!principalId) return false;
  const principal = await resolvePrincipal(registry, principalId);
  return principal?.role === 'origin' && principal.origin === origin;
}

/** Message attribute `ledger dlq redrive` sets to the message's first `SenderId` (read by every function fed by a queue). */
export const REDRIVEN_FOR = 'LedgerRedrivenFor';

/**
 * Who a message speaks for. A message an operator moved back from a DLQ (`ledger dlq redrive`)
 * carries its first sender's id, because SQS stamps the mover as `SenderId`; that claim is honoured
 * only when the mover is a registered operator, so no origin can borrow another's identity with it.
 */
export async function effectiveSender(
  registry: PrincipalRegistry,
  mode: PrincipalMode,
  senderId: string | undefined,
  redrivenFor: string | undefined,
): Promise<string | undefined> {
  if (!redrivenFor || mode === 'open' || !senderId) return senderId;
  return (await resolvePrincipal(registry, senderId))?.role === 'operator' ? redrivenFor : senderId;
}
