import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEngines } from '../../local/engines/index.js';
import { isAlive } from '../../local/engines/process.js';
import type { LocalEndpoints } from '../../local/clients.js';

declare module 'vitest' {
  export interface ProvidedContext {
    engines: LocalEndpoints & { readonly pids: Readonly<Record<string, number>>; readonly logDir: string };
  }
}

/**
 * Starts the real engines once for the integration project — DynamoDB Local, fauxqs, moto — and stops
 * them by pid afterwards, checking that none is left running.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
  const logDir = mkdtempSync(join(tmpdir(), 'ledger-engines-'));
  const engines = await startEngines({ logDir });
  project.provide('engines', {
    dynamodbEndpoint: engines.dynamodbEndpoint,
    sqsEndpoint: engines.sqsEndpoint,
    s3Endpoint: engines.s3Endpoint,
    motoEndpoint: engines.motoEndpoint,
    pids: engines.pids,
    logDir,
  });
  return async () => {
    await engines.stop();
    const left = Object.entries(engines.pids).filter(([, pid]) => isAlive(pid));
    if (left.length > 0) throw new Error(`engines still running after teardown: ${JSON.stringify(left)}`);
    rmSync(logDir, { recursive: true, force: true });
  };
}
