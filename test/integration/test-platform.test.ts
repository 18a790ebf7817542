import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startTestPlatform } from '../support/platform.js';

// The tests' own platform leaves nothing behind (was: every startTestPlatform left its state folder in
// /tmp, about 100 a run of the integration tests).
describe('startTestPlatform', () => {
  it('removes the state folder it made when it stops', async () => {
    const t = await startTestPlatform();
    const stateDir = dirname(t.platform.invocationLog);
    expect(existsSync(t.platform.invocationLog)).toBe(true);
    await t.stop();
    expect(existsSync(stateDir)).toBe(false);
  });

  it('hands each function its config, never through process.env: only the runtime\'s variables (region, endpoints, Powertools) are set there (issue 33)', async () => {
    const ledgerVariables = ['LEDGER_TABLE_NAME', 'EVIDENCE_BUCKET', 'API_BASE_URL', 'EVENT_BUS_NAME', 'PRINCIPAL_MODE', 'CLAIM_SECONDS', 'SUBMIT_RETRY_DELAYS_SECONDS'];
    const before = ledgerVariables.map((name) => process.env[name]);
    // A setting the shell gives reaches the functions under the platform's own (INBOX_SHARDS, say, to try it locally).
    const shell = process.env.INBOX_SHARDS;
    process.env.INBOX_SHARDS = '2';
    const t = await startTestPlatform().finally(() => {
      if (shell === undefined) delete process.env.INBOX_SHARDS;
      else process.env.INBOX_SHARDS = shell;
    });
    try {
      expect(ledgerVariables.map((name) => process.env[name])).toEqual(before);
      expect(process.env.AWS_ENDPOINT_URL_DYNAMODB).toBe(t.platform.info.dynamodbEndpoint);
      expect(t.platform.settings).toMatchObject({ LEDGER_TABLE_NAME: t.platform.resources.ledgerTable, CLAIM_SECONDS: '2', PRINCIPAL_MODE: 'open', INBOX_SHARDS: '2' });
      // And the functions run on it: a dispatch goes through intake, the target and the API.
      const dispatchId = `config-${Date.now()}`;
      await t.send(JSON.stringify({ dispatchId, origin: 'planner', target: 'demo-agent', task: { goal: 'config objects', behavior: 'complete' } }));
      const done = await t.viewWhen(dispatchId, (view) => view.phase === 'submitted' && view.execution.status === 'completed');
      expect(done.execution.status).toBe('completed');
    } finally {
      await t.stop();
    }
  });
});
