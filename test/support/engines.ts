import { randomUUID } from 'node:crypto';
import { inject } from 'vitest';
import { localClients, type LocalClients, type LocalEndpoints } from '../../local/clients.js';

let fileDynamoDb: string | undefined;

/** Called once per file by test/integration/file-engines.ts, with the DynamoDB Local it started. */
export function useFileDynamoDb(endpoint: string): void {
  fileDynamoDb = endpoint;
}

/**
 * The engines of this integration file: fauxqs and moto, which every file shares (the global setup
 * started them), and a DynamoDB Local of the file's own (test/integration/file-engines.ts).
 */
export function testEngines(): LocalEndpoints & { readonly logDir: string } {
  if (fileDynamoDb === undefined) throw new Error('no DynamoDB Local for this file: only integration files get one (test/integration/file-engines.ts)');
  const { sqsEndpoint, s3Endpoint, motoEndpoint, logDir } = inject('engines');
  return { dynamodbEndpoint: fileDynamoDb, sqsEndpoint, s3Endpoint, motoEndpoint, logDir };
}

/** Clients for this file's engines. */
export function engineClients(): LocalClients {
  return localClients(testEngines());
}

/** A name no other test uses: tests share the engines, never their resources. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

export { loopbackOnly } from '../../local/loopback.js';
