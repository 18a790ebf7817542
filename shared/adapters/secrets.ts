import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';

/**
 * Target auth headers from Secrets Manager, cached per execution environment for `ttlMs` so a busy
 * function does not call Secrets Manager per request, and a rotated secret is picked up within the TTL.
 */
export class SecretCache {
  private readonly cache = new Map<string, { value: string; until: number }>();

  constructor(
    private readonly client: SecretsManagerClient,
    private readonly ttlMs = 5 * 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  async get(secretId: string): Promise<string> {
    const hit = this.cache.get(secretId);
    if (hit && hit.until > this.now()) return hit.value;
    const { SecretString } = await this.client.send(new GetSecretValueCommand({ SecretId: secretId }));
    if (SecretString === undefined) throw new Error(`secret ${secretId} has no string value`);
    this.cache.set(secretId, { value: SecretString, until: this.now() + this.ttlMs });
    return SecretString;
  }
}
