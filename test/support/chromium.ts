import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

/** Debian's chromium (`.ci/run` installs it; never a browser download). */
export const CHROMIUM = '/usr/bin/chromium';

/** A headless Chromium with a profile of its own, for a file's page tests; `close` removes the profile too. */
export async function launchChromium(): Promise<{ readonly context: BrowserContext; readonly close: () => Promise<void> }> {
  const userDataDir = mkdtempSync(join(tmpdir(), 'ledger-chromium-'));
  const context = await chromium
    .launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM,
      headless: true,
      viewport: { width: 1280, height: 800 },
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    })
    .catch((error: unknown) => {
      rmSync(userDataDir, { recursive: true, force: true });
      throw error;
    });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}
