import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureLedgerTable } from '../../local/resources.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import { parseStaticRegistry } from '../../shared/adapters/static-registry.js';
import { mayActForOrigin } from '../../shared/principals/principals.js';
import { engineClients, uniqueName } from '../support/engines.js';

const clients = engineClients();
let tableName: string;
const documents = DynamoDBDocumentClient.from(clients.dynamodb, { marshallOptions: { removeUndefinedValues: true } });

beforeAll(async () => {
  tableName = uniqueName('registry');
  await ensureLedgerTable(clients.dynamodb, tableName);
});
afterAll(() => clients.destroy());

describe('principal and target registry: deploy-time entries over table entries', () => {
  const registry = parseStaticRegistry(
    JSON.stringify({
      principals: [{ id: 'AROADEPLOYED', principal: { role: 'origin', origin: 'planner' } }],
      targets: [{ name: 'research-agent', kind: 'http', baseUrl: 'https://deployed.example.com' }],
    }),
  );

  it('resolves a deployed principal even when a table entry for the same id says otherwise', async () => {
    const table = new LedgerTable(documents, { tableName, retentionSeconds: 86_400, registry });
    await table.putPrincipal('AROADEPLOYED', { role: 'origin', origin: 'intruder' });
    expect(await table.resolve('AROADEPLOYED')).toEqual({ role: 'origin', origin: 'planner' });
    // A role session (AROA…:session) is looked up by its role id too.
    expect(await mayActForOrigin(table, 'enforce', 'AROADEPLOYED:worker-7', 'planner')).toBe(true);
    expect(await mayActForOrigin(table, 'enforce', 'AROADEPLOYED:worker-7', 'intruder')).toBe(false);
  });

  it('falls back to the table for principals and targets registered after deployment', async () => {
    const table = new LedgerTable(documents, { tableName, retentionSeconds: 86_400, registry });
    await table.putPrincipal('AROALATER', { role: 'operator' });
    await table.putTarget({ name: 'late-agent', kind: 'http', baseUrl: 'https://late.example.com' });
    expect(await table.resolve('AROALATER')).toEqual({ role: 'operator' });
    expect(await table.getTarget('late-agent')).toEqual({ name: 'late-agent', kind: 'http', baseUrl: 'https://late.example.com' });
    expect(await table.getTarget('research-agent')).toEqual({ name: 'research-agent', kind: 'http', baseUrl: 'https://deployed.example.com' });
    expect(await table.resolve('AROAUNKNOWN')).toBeUndefined();
  });
});

describe('target registrations read from the table', () => {
  it('are reused for targetCacheMs (intake reads one per message), and read fresh without a cache', async () => {
    const cached = new LedgerTable(documents, { tableName, retentionSeconds: 86_400, targetCacheMs: 60_000 });
    const fresh = new LedgerTable(documents, { tableName, retentionSeconds: 86_400 });
    await fresh.putTarget({ name: 'moving-agent', kind: 'http', baseUrl: 'https://one.example.com' });
    expect(await cached.getTarget('moving-agent')).toMatchObject({ baseUrl: 'https://one.example.com' });
    await fresh.putTarget({ name: 'moving-agent', kind: 'http', baseUrl: 'https://two.example.com' });
    expect(await cached.getTarget('moving-agent')).toMatchObject({ baseUrl: 'https://one.example.com' });
    expect(await fresh.getTarget('moving-agent')).toMatchObject({ baseUrl: 'https://two.example.com' });
    // An unknown target is never cached: registering it takes effect at once.
    expect(await cached.getTarget('late-comer')).toBeUndefined();
    await fresh.putTarget({ name: 'late-comer', kind: 'http', baseUrl: 'https://late.example.com' });
    expect(await cached.getTarget('late-comer')).toMatchObject({ baseUrl: 'https://late.example.com' });
  });
});
