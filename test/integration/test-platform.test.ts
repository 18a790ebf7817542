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
});
