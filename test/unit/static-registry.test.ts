import { afterEach, describe, expect, it } from 'vitest';
import { readLedgerConfig } from '../../shared/adapters/config.js';
import { EMPTY_REGISTRY, parseStaticRegistry } from '../../shared/adapters/static-registry.js';

describe('parseStaticRegistry (LEDGER_REGISTRY, written by the CDK construct)', () => {
  it('reads principals and targets, the secret only where given', () => {
    const registry = parseStaticRegistry(
      JSON.stringify({
        principals: [
          { id: 'AROAPLANNER', principal: { role: 'origin', origin: 'planner' } },
          { id: 'AROAONCALL', principal: { role: 'operator' } },
        ],
        targets: [
          { name: 'research-agent', kind: 'http', baseUrl: 'https://agents.example.com', secretRef: 'arn:aws:secretsmanager:eu-west-1:1:secret:x' },
          { name: 'open-agent', kind: 'http', baseUrl: 'https://open.example.com' },
        ],
      }),
    );
    expect(registry.principals.get('AROAPLANNER')).toEqual({ role: 'origin', origin: 'planner' });
    expect(registry.principals.get('AROAONCALL')).toEqual({ role: 'operator' });
    expect(registry.targets.get('research-agent')).toMatchObject({ secretRef: expect.stringContaining('secretsmanager') });
    expect(registry.targets.get('open-agent')).toEqual({ name: 'open-agent', kind: 'http', baseUrl: 'https://open.example.com' });
  });

  it('is empty when unset', () => {
    expect(parseStaticRegistry('')).toBe(EMPTY_REGISTRY);
  });

  it('fails the cold start, naming the field, rather than authorizing from a malformed registry', () => {
    expect(() => parseStaticRegistry('{')).toThrow('LEDGER_REGISTRY is not JSON');
    expect(() => parseStaticRegistry(JSON.stringify({ principals: [{ id: 'A', principal: { role: 'admin' } }], targets: [] }))).toThrow(/LEDGER_REGISTRY is malformed: principals\.0\.principal\.role/);
    expect(() => parseStaticRegistry(JSON.stringify({ principals: [{ id: 'A', principal: { role: 'origin' } }], targets: [] }))).toThrow('principal A has role origin but names no origin');
    const twice = { id: 'A', principal: { role: 'operator' } };
    expect(() => parseStaticRegistry(JSON.stringify({ principals: [twice, twice], targets: [] }))).toThrow('principal A twice');
  });

  it('carries maxConcurrentRuns (CONTRACT §11) into both kinds of target registration', () => {
    const registry = parseStaticRegistry(
      JSON.stringify({
        principals: [],
        targets: [
          { name: 'research-agent', kind: 'http', baseUrl: 'https://agents.example.com', maxConcurrentRuns: 1 },
          { name: 'summarizer', kind: 'lambda', functionArn: 'arn:aws:lambda:eu-west-1:1:function:summarizer', timeoutSeconds: 60, maxConcurrentRuns: 10_000 },
        ],
      }),
    );
    expect(registry.targets.get('research-agent')).toEqual({ name: 'research-agent', kind: 'http', baseUrl: 'https://agents.example.com', maxConcurrentRuns: 1 });
    expect(registry.targets.get('summarizer')).toEqual({ name: 'summarizer', kind: 'lambda', functionArn: 'arn:aws:lambda:eu-west-1:1:function:summarizer', timeoutSeconds: 60, maxConcurrentRuns: 10_000 });
  });

  it('refuses a maxConcurrentRuns outside 1..10,000 or not an integer, for either kind, naming the field', () => {
    const http = (maxConcurrentRuns: number) => ({ name: 'a', kind: 'http', baseUrl: 'https://a.example.com', maxConcurrentRuns });
    const lambda = (maxConcurrentRuns: number) => ({ name: 'l', kind: 'lambda', functionArn: 'arn:aws:lambda:eu-west-1:1:function:l', timeoutSeconds: 60, maxConcurrentRuns });
    for (const entry of [http(0), http(10_001), http(1.5), lambda(0), lambda(10_001), lambda(-1)]) {
      expect(() => parseStaticRegistry(JSON.stringify({ principals: [], targets: [entry] }))).toThrow(RangeError);
      expect(() => parseStaticRegistry(JSON.stringify({ principals: [], targets: [entry] }))).toThrow(/LEDGER_REGISTRY is malformed: targets\.0\.maxConcurrentRuns/);
    }
  });

  it('reads per-origin result settings (CONTRACT §10), defaults filled in, and refuses out-of-range or repeated ones', () => {
    const registry = parseStaticRegistry(JSON.stringify({ principals: [], targets: [], origins: [{ origin: 'planner', resultTtlHours: 2 }] }));
    expect(registry.origins?.get('planner')).toEqual({ maxDeliveryAttempts: 5, resultTtlHours: 2 });
    expect(() => parseStaticRegistry(JSON.stringify({ principals: [], targets: [], origins: [{ origin: 'planner', maxDeliveryAttempts: 0 }] }))).toThrow(RangeError);
    expect(() => parseStaticRegistry(JSON.stringify({ principals: [], targets: [], origins: [{ origin: 'a' }, { origin: 'a' }] }))).toThrow('twice');
  });
});

describe('readLedgerConfig and the API function', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
  });

  it('lets only the API function run without API_BASE_URL (it takes its URL from each request)', () => {
    Object.assign(process.env, { LEDGER_TABLE_NAME: 't', EVIDENCE_BUCKET: 'b' });
    delete process.env.API_BASE_URL;
    expect(() => readLedgerConfig()).toThrow('API_BASE_URL');
    expect(readLedgerConfig({ requireApiBaseUrl: false }).apiBaseUrl).toBe('');
  });
});
