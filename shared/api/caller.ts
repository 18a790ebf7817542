import { ORIGIN } from '../dispatch/ids.js';
import { resolvePrincipal, type Principal, type PrincipalMode, type PrincipalRegistry } from '../principals/principals.js';
import { ApiError, type ApiRequest } from './http.js';

/**
 * Who is calling. In AWS the IAM identity API Gateway verified is looked up in the principal registry
 * (the request context carries no principal tags). Locally (`open`), the origin is the
 * `X-Ledger-Origin` header and target and operator routes are open.
 */
export type Caller = { readonly kind: 'open'; readonly origin: string | undefined } | { readonly kind: 'principal'; readonly principal: Principal | undefined };

export async function resolveCaller(request: ApiRequest, mode: PrincipalMode, registry: PrincipalRegistry): Promise<Caller> {
  if (mode === 'open') {
    const origin = request.headers['x-ledger-origin'];
    if (origin !== undefined && !ORIGIN.test(origin)) throw new ApiError('malformed', 'X-Ledger-Origin must be 1..64 characters of [a-z0-9-]');
    return { kind: 'open', origin };
  }
  return { kind: 'principal', principal: request.iamUserId ? await resolvePrincipal(registry, request.iamUserId) : undefined };
}

/** The origin the caller speaks for, if any. */
export function callerOrigin(caller: Caller): string | undefined {
  if (caller.kind === 'open') return caller.origin;
  return caller.principal?.role === 'origin' ? caller.principal.origin : undefined;
}

/**
 * The operator: the registered operator role in AWS (and under `--sigv4`); locally (`open`), a caller
 * that speaks for no origin (no `X-Ledger-Origin`), since operator routes are open there.
 */
export function isOperator(caller: Caller): boolean {
  return caller.kind === 'open' ? caller.origin === undefined : caller.principal?.role === 'operator';
}

export function requireOperator(caller: Caller): void {
  if (caller.kind === 'open') return;
  if (caller.principal?.role !== 'operator') throw new ApiError('forbidden', 'this route is for the operator role');
}
