import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';

/**
 * Which secrets the functions may read for targets (CONTRACT §8 v2): those whose name starts with the
 * stack's own prefix (`dispatch-ledger/{stackName}/targets/`), named by name or by ARN, and the
 * deploy-time targets' own secrets, named exactly.
 */
export interface SecretScope {
  readonly prefix: string;
  readonly exact?: ReadonlySet<string>;
}

/** A secretRef outside the scope: refused before Secrets Manager is asked. */
export class SecretOutsideScopeError extends Error {
  override readonly name = 'SecretOutsideScopeError';
}

/** Whether the functions may read `secretId`: by name, or by ARN (`arn:…:secret:NAME-6RANDM`; the suffix does not matter to a prefix). */
export function inSecretScope(secretId: string, scope: SecretScope): boolean {
  return scope.exact?.has(secretId) === true || (scope.prefix !== '' && secretId.replace(/^arn:[^:]+:secretsmanager:[^:]*:[^:]*:secret:/, '').startsWith(scope.prefix));
}

/**
 * Target auth headers from Secrets Manager, cached per execution environment for `ttlMs` so a busy
 * function does not call Secrets Manager per request, and a rotated secret is picked up within the TTL.
 * With a `scope`, a secretId outside it is refused (a table entry cannot point the functions at another
 * secret their role happens to be able to read); without one (the local platform) any id is read.
 */
export class SecretCache {
  private readonly cache = new Map<string, { value: string; until: number }>();

  constructor(
    private readonly client: SecretsManagerClient,
    private readonly ttlMs = 5 * 60_000,
    private readonly now: () => number = Date.now,
    private readonly scope?: SecretScope,
  ) {}

  /** @throws SecretOutsideScopeError for a secretId outside the scope, before any call. */
  async get(secretId: string): Promise<string> {
    if (this.scope && !inSecretScope(secretId, this.scope)) {
      throw new SecretOutsideScopeError(`secret ${secretId.slice(0, 256)} is outside ${this.scope.prefix}`);
    }
    const hit = this.cache.get(secretId);
    if (hit && hit.until > this.now()) return hit.value;
    const { SecretString } = await this.client.send(new GetSecretValueCommand({ SecretId: secretId }));
    if (SecretString === undefined) throw new Error(`secret ${secretId} has no string value`);
    this.cache.set(secretId, { value: SecretString, until: this.now() + this.ttlMs });
    return SecretString;
  }
}
