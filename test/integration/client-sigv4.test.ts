import { describe, expect, it } from 'vitest';
import { clientRoundTrip, roundTripped } from '../support/client-script.js';
import { startTestPlatform } from '../support/platform.js';

/**
 * docs/protocol.md §15 under `ledger local up --sigv4`: the client finds the credentials file named in the
 * state directory and signs as the origin (a file of its own: one platform's configuration per process).
 */
describe('the client from a plain node ESM script against the local platform with --sigv4', () => {
  it('signs with the origin’s credential from the state directory: the same round trip as without', async () => {
    const t = await startTestPlatform({}, { sigv4: true });
    try {
      const { dispatchId, printed } = await clientRoundTrip(t);
      expect(printed).toEqual(roundTripped(dispatchId));
    } finally {
      await t.stop();
    }
  });
});
