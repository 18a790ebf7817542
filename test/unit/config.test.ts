import { afterEach, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { LEDGER_SETTINGS, ledgerConfigFrom, readLedgerConfig } from '../../shared/adapters/config.js';
import { parseStaticRegistry } from '../../shared/adapters/static-registry.js';
import { submissionBody } from '../../shared/adapters/submission-body.js';

const SUBMISSION = { dispatchId: 'd-1', attempt: 1, origin: 'planner', expectedEvidence: [] };

describe('readLedgerConfig', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
  });
  const base = { LEDGER_TABLE_NAME: 't', EVIDENCE_BUCKET: 'b', API_BASE_URL: 'http://127.0.0.1:1' };

  it('keeps a claim at least twice the target timeout (regression: equal values let overlapping ticks void each other)', () => {
    Object.assign(process.env, base, { CLAIM_SECONDS: '2', TARGET_TIMEOUT_MS: '2000' });
    expect(readLedgerConfig().claimSeconds).toBe(4);
    Object.assign(process.env, { CLAIM_SECONDS: '60', TARGET_TIMEOUT_MS: '10000' });
    expect(readLedgerConfig().claimSeconds).toBe(60);
  });

  it("takes the API's URL without its trailing slash (regression: a function URL ends in '/', so the stack's API_BASE_URL made every callbackUrl and taskRef '…on.aws//dispatches/…', which no route matches)", () => {
    const config = ledgerConfigFrom({ ...base, API_BASE_URL: 'https://abc.lambda-url.eu-west-1.on.aws/' });
    expect(config.apiBaseUrl).toBe('https://abc.lambda-url.eu-west-1.on.aws');
    const body = JSON.parse(submissionBody({ ...SUBMISSION, callbackUrl: config.apiBaseUrl, task: { text: 'x'.repeat(300_000) } })) as { taskRef: string };
    expect(body.taskRef).toBe('https://abc.lambda-url.eu-west-1.on.aws/dispatches/d-1/task');
    expect(new URL(body.taskRef).pathname).toBe('/dispatches/d-1/task');
    expect(ledgerConfigFrom(base).apiBaseUrl).toBe('http://127.0.0.1:1');
  });

  it('fails fast on a missing table name and on an unknown principal mode', () => {
    Object.assign(process.env, base);
    delete process.env.LEDGER_TABLE_NAME;
    expect(() => readLedgerConfig()).toThrow('LEDGER_TABLE_NAME');
    Object.assign(process.env, base, { PRINCIPAL_MODE: 'maybe' });
    expect(() => readLedgerConfig()).toThrow('PRINCIPAL_MODE');
  });

  it('lets targets live on loopback only locally: open mode, or the local --sigv4 switch (compiled out of deployed bundles; see bundles.test.ts)', () => {
    Object.assign(process.env, base, { PRINCIPAL_MODE: 'enforce' });
    delete process.env.LOCAL_TARGETS_ON_LOOPBACK;
    expect(readLedgerConfig().targetAddressPolicy).toBe('public-only');
    Object.assign(process.env, { LOCAL_TARGETS_ON_LOOPBACK: 'true' });
    expect(readLedgerConfig().targetAddressPolicy).toBe('allow-loopback');
    Object.assign(process.env, { PRINCIPAL_MODE: 'open', LOCAL_TARGETS_ON_LOOPBACK: 'no' });
    expect(readLedgerConfig().targetAddressPolicy).toBe('allow-loopback');
  });

  it('is the one config every function reads, each requiring only what it uses (issue 33: the failures, publisher and retention functions read the environment themselves)', () => {
    Object.assign(process.env, { LEDGER_TABLE_NAME: 't', RETENTION_DAYS: '2', INBOX_SHARDS: '4' });
    delete process.env.EVIDENCE_BUCKET;
    delete process.env.API_BASE_URL;
    delete process.env.EVENT_BUS_NAME;
    // The failures function: no bucket, no API URL.
    const failures = readLedgerConfig({ requireApiBaseUrl: false, requireBucket: false });
    expect(failures).toMatchObject({ tableName: 't', retentionSeconds: 2 * 86_400, inboxShards: 4, bucketName: '', apiBaseUrl: '', eventBusName: '' });
    expect(() => readLedgerConfig({ requireApiBaseUrl: false })).toThrow('EVIDENCE_BUCKET');
    // The publisher: its bus is required.
    expect(() => readLedgerConfig({ requireApiBaseUrl: false, requireBucket: false, requireEventBus: true })).toThrow('EVENT_BUS_NAME');
    Object.assign(process.env, { EVENT_BUS_NAME: 'bus', PUBLISHED_EVENTS: 'attention' });
    expect(readLedgerConfig({ requireApiBaseUrl: false, requireBucket: false, requireEventBus: true })).toMatchObject({ eventBusName: 'bus', publishedEvents: 'attention' });
  });

  it('reads LEDGER_REGISTRY only with the parser a function passes (the publisher and retention carry no zod), and fails the cold start on a malformed one', () => {
    Object.assign(process.env, base, { PRINCIPAL_MODE: 'enforce', LEDGER_REGISTRY: JSON.stringify({ principals: [], targets: [{ name: 'agent', kind: 'http', baseUrl: 'https://agent.example.com' }] }) });
    expect(readLedgerConfig().registry.targets.size).toBe(0);
    expect(readLedgerConfig({ parseRegistry: parseStaticRegistry }).registry.targets.get('agent')).toMatchObject({ kind: 'http' });
    Object.assign(process.env, { LEDGER_REGISTRY: '{not json' });
    expect(() => readLedgerConfig({ parseRegistry: parseStaticRegistry })).toThrow(/LEDGER_REGISTRY/);
  });

  it('reads a settings record without process.env: what the local platform hands each function (issue 33: it set process.env for them)', () => {
    Object.assign(process.env, base, { LEDGER_TABLE_NAME: 'from-env', CLAIM_SECONDS: '99' });
    const config = ledgerConfigFrom({ ...base, LEDGER_TABLE_NAME: ' local-table ', CLAIM_SECONDS: '7', PRINCIPAL_MODE: 'open' });
    expect(config).toMatchObject({ tableName: 'local-table', claimSeconds: 20, principalMode: 'open', targetAddressPolicy: 'allow-loopback' });
    expect(() => ledgerConfigFrom({ EVIDENCE_BUCKET: 'b', API_BASE_URL: 'u' })).toThrow('LEDGER_TABLE_NAME is not set');
    expect(() => ledgerConfigFrom({ ...base, RETENTION_DAYS: 'ninety' })).toThrow('RETENTION_DAYS must be a number');
  });

  it('names every setting it reads in LEDGER_SETTINGS, the list the local platform hands each function from', () => {
    const source = readFileSync(new URL('../../shared/adapters/config.ts', import.meta.url), 'utf8');
    const read = [...source.matchAll(/\b(?:text|number|optionalText)\('([A-Z_]+)'/g)].map((match) => match[1]);
    expect(read.length).toBeGreaterThan(15);
    expect([...new Set(read)].sort()).toEqual([...LEDGER_SETTINGS].sort());
  });
});
