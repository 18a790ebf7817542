import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, inject } from 'vitest';
import { startDynamoDbLocal } from '../../local/engines/dynamodb-local.js';
import { isAlive, stopPid } from '../../local/engines/process.js';
import { useFileDynamoDb } from '../support/engines.js';
import { FILE_ENGINE_PID } from './global-setup.js';

/**
 * Every integration file's own DynamoDB Local (a setup file: it runs in the file's worker before the
 * file, and its hook after the file's own). Files then run side by side without sharing a table engine,
 * and no file inherits what the ones before it wrote: one engine for the whole run slowed every write
 * in proportion to all the stream records before it (docs/performance.md, "The test suite's engines").
 * Stopped by pid when the file ends.
 */
const { logDir } = inject('engines');
const engine = await startDynamoDbLocal({ logFile: join(logDir, `dynamodb-local-${process.pid}.log`), shortLived: true });
// For the global teardown, should this file's process die before its afterAll (a kill, a bail).
writeFileSync(join(logDir, `${engine.pid}${FILE_ENGINE_PID}`), String(engine.pid));
useFileDynamoDb(engine.endpoint);

afterAll(async () => {
  await stopPid(engine.pid);
  if (isAlive(engine.pid)) throw new Error(`this file's DynamoDB Local (pid ${engine.pid}) is still running`);
});
