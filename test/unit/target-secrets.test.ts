import { createServer, type Server } from 'node:http';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readLedgerConfig } from '../../shared/adapters/config.js';
import { SecretCache } from '../../shared/adapters/secrets.js';
import { buildLedgerAdapters } from '../../shared/adapters/wiring.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { loopbackOnly } from '../../local/loopback.js';

// CONTRACT §8 v2: target secrets live under `dispatch-ledger/{stackName}/targets/`; in AWS the
// functions refuse to read a secretRef outside it (a table entry cannot point them at another secret),
// the deploy-time targets' own secrets excepted. Secrets Manager has no local engine: a 127.0.0.1 stub
// speaks its JSON protocol.

const PREFIX = 'dispatch-ledger/DispatchLedger/targets/';
const ARN_PREFIX = 'arn:aws:secretsmanager:eu-west-1:111122223333:secret:';

let server: Server;
let endpoint = '';
const asked: string[] = [];
beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const { SecretId } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { SecretId: string };
      asked.push(SecretId);
      // What a real account would also answer for a secret the function may not read.
      if (SecretId.includes('prod/')) {
        res.writeHead(400, { 'content-type': 'application/x-amz-json-1.1' });
        res.end(JSON.stringify({ __type: 'AccessDeniedException', message: 'not authorized' }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' });
      res.end(JSON.stringify({ Name: SecretId, SecretString: `Bearer for ${SecretId}` }));
    });
  });
  await new Promise<void>((resolve) => server.listen({ port: 0, host: '127.0.0.1' }, () => resolve()));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('not listening on TCP');
  endpoint = `http://127.0.0.1:${address.port}`;
});
afterAll(
  () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
);
afterEach(() => {
  asked.length = 0;
});

const client = () => loopbackOnly(new SecretsManagerClient({ region: 'eu-west-1', endpoint, credentials: { accessKeyId: 'x', secretAccessKey: 'x' } }));

describe('trust boundaries: the secrets adapter reads only under the stack\'s prefix', () => {
  it('reads a secret under the prefix, by name or by ARN', async () => {
    const cache = new SecretCache(client(), 60_000, Date.now, { prefix: PREFIX });
    expect(await cache.get(`${PREFIX}research-agent`)).toBe(`Bearer for ${PREFIX}research-agent`);
    expect(await cache.get(`${ARN_PREFIX}${PREFIX}research-agent-AbCdEf`)).toContain('Bearer for');
    expect(asked).toHaveLength(2);
  });

  it('refuses, without asking Secrets Manager, a secretRef outside the prefix — another stack\'s, the v1 prefix, a look-alike', async () => {
    const cache = new SecretCache(client(), 60_000, Date.now, { prefix: PREFIX, exact: new Set([`${ARN_PREFIX}ResearchAgentAuth-123456`]) });
    for (const secretId of [
      'prod/database/password',
      'dispatch-ledger/targets/research-agent',
      'dispatch-ledger/OtherStack/targets/research-agent',
      'dispatch-ledger/DispatchLedger/targetsX/a',
      `x${PREFIX}a`,
      `${ARN_PREFIX}prod/database/password-AbCdEf`,
      `${ARN_PREFIX}dispatch-ledger/OtherStack/targets/a-AbCdEf`,
    ]) {
      await expect(cache.get(secretId), secretId).rejects.toThrow(/outside dispatch-ledger\/DispatchLedger\/targets\//);
    }
    expect(asked).toEqual([]);
    // A deploy-time target's own secret (addTarget's authSecret) is named exactly, and granted exactly.
    expect(await cache.get(`${ARN_PREFIX}ResearchAgentAuth-123456`)).toContain('Bearer for');
  });

  it('reads any secret when no scope is given (the local platform)', async () => {
    expect(await new SecretCache(client()).get('anything/at/all')).toBe('Bearer for anything/at/all');
  });
});

describe('trust boundaries: the functions\' wiring scopes the target secrets in AWS', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
  });

  it('makes a call whose secretRef is outside the prefix unavailable, before any secret is read or any connection made', async () => {
    Object.assign(process.env, {
      LEDGER_TABLE_NAME: 't',
      EVIDENCE_BUCKET: 'b',
      API_BASE_URL: 'https://api.example.test',
      PRINCIPAL_MODE: 'enforce',
      TARGET_SECRET_PREFIX: PREFIX,
      AWS_REGION: 'eu-west-1',
      AWS_ACCESS_KEY_ID: 'x',
      AWS_SECRET_ACCESS_KEY: 'x',
      AWS_ENDPOINT_URL_SECRETS_MANAGER: endpoint,
    });
    const adapters = buildLedgerAdapters(readLedgerConfig(), LedgerTable);
    const target = adapters.targetFor({ name: 'agent', kind: 'http', baseUrl: 'https://agents.example.test', secretRef: 'prod/database/password' });
    const request = { dispatchId: 'd-1', attempt: 1, origin: 'planner', task: {}, expectedEvidence: [], callbackUrl: 'https://api.example.test' };
    expect(await target.submit(request)).toEqual({
      kind: 'unavailable',
      reason: 'could not obtain the auth header (SecretOutsideScopeError)',
    });
    expect(asked).toEqual([]);
  });
});
