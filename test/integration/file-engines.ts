import { join } from 'node:path';
import { afterAll, inject } from 'vitest';
import { startDynamoDbLocal } from '../../local/engines/dynamodb-local.js';
import { isAlive, stopPid } from '../../local/engines/process.js';
import { useFileDynamoDb } from '../support/engines.js';

/**
 * Every integration file's own DynamoDB Local (a setup file: it runs in the file's worker before the
 * file, and its hook after the file's own). Files then run side by side without sharing a table engine,
 * and no file inherits what the ones before it wrote: one engine for the whole run slowed every write
 * in proportion to all the stream records before it (docs/performance.md, "The test suite's engines").
 * Stopped by pid when the file ends.
 */
const engine = await startDynamoDbLocal({ logFile: join(inject('engines').logDir, `dynamodb-local-${process.pid}.log`), shortLived: true });
useFileDynamoDb(engine.endpoint);

afterAll(async () => {
  await stopPid(engine.pid);
  if (isAlive(engine.pid)) throw new Error(`this file's DynamoDB Local (pid ${engine.pid}) is still running`);
});
