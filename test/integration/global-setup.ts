import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { checkPrerequisites } from '../../local/engines/index.js';
import { ensureDynamoDbLocal } from '../../local/engines/dynamodb-local.js';
import { startFauxqs } from '../../local/engines/fauxqs.js';
import { startMoto } from '../../local/engines/moto.js';
import { isAlive, isOurs, stopPid } from '../../local/engines/process.js';
import type { LocalEndpoints } from '../../local/clients.js';

/** The suffix of the files (in the run's log folder) naming each file's DynamoDB Local pid, for the teardown. */
export const FILE_ENGINE_PID = '.dynamodb-local.pid';

/** The engines every file of the run shares: fauxqs (SQS, S3) and moto (EventBridge, Secrets Manager). */
export type SharedEngines = Omit<LocalEndpoints, 'dynamodbEndpoint'> & { readonly pids: Readonly<Record<string, number>>; readonly logDir: string };

declare module 'vitest' {
  export interface ProvidedContext {
    engines: SharedEngines;
  }
}

/**
 * Starts the engines the integration files share — fauxqs and moto — and stops them by pid afterwards,
 * checking that none is left running. DynamoDB Local is not shared: each file starts its own
 * (test/integration/file-engines.ts), because one engine slows down with everything written to it
 * (its stream bookkeeping is read on every write: docs/performance.md, "The test suite's engines").
 * Here it is only fetched, once, before files start it side by side.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
  checkPrerequisites();
  const logDir = mkdtempSync(join(tmpdir(), 'ledger-engines-'));
  const started = await Promise.allSettled([
    startFauxqs({ logFile: join(logDir, 'fauxqs.log') }),
    startMoto({ logFile: join(logDir, 'moto.log') }),
    ensureDynamoDbLocal(),
  ] as const);
  const [fauxqs, moto, fetched] = started;
  if (fauxqs.status === 'rejected' || moto.status === 'rejected' || fetched.status === 'rejected') {
    // What did start is stopped (and the log folder removed) before the first failure is rethrown.
    for (const result of [fauxqs, moto]) if (result.status === 'fulfilled') await stopPid(result.value.pid);
    rmSync(logDir, { recursive: true, force: true });
    throw started.find((result): result is PromiseRejectedResult => result.status === 'rejected')?.reason;
  }
  const pids = { fauxqs: fauxqs.value.pid, moto: moto.value.pid };
  project.provide('engines', { sqsEndpoint: fauxqs.value.endpoint, s3Endpoint: fauxqs.value.endpoint, motoEndpoint: moto.value.endpoint, pids, logDir });
  return async () => {
    // Each file stops its own DynamoDB Local; one whose process died first left its pid here.
    const fileEngines = readdirSync(logDir).filter((name) => name.endsWith(FILE_ENGINE_PID)).map((name) => Number(readFileSync(join(logDir, name), 'utf8')));
    const orphans = fileEngines.filter((pid) => Number.isSafeInteger(pid) && pid > 0 && isOurs('dynamodbLocal', pid));
    await Promise.all([...Object.values(pids), ...orphans].map((pid) => stopPid(pid)));
    const left = [...Object.entries(pids), ...orphans.map((pid) => ['dynamodbLocal', pid] as const)].filter(([, pid]) => isAlive(pid));
    if (left.length > 0) throw new Error(`engines still running after teardown: ${JSON.stringify(left)}`);
    rmSync(logDir, { recursive: true, force: true });
  };
}
