import { afterEach, describe, expect, it } from 'vitest';
import { readLedgerConfig } from '../../shared/adapters/config.js';

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
});
