import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLedgerClient } from '@dispatch-ledger/client';
import { originOf, type Connect } from '../../cli/connect.js';
import type { LocalInfo } from '../../local/state.js';

/**
 * A fake of the ledger API on 127.0.0.1 for the CLI's unit tests: it records each request and answers
 * the canned status and JSON, standing in for the ledger only to pin what a command sends and prints.
 * `connect` hands a command `@dispatch-ledger/client` on it, as the local platform (`extra` adds to its info: a `--sigv4`
 * credentials file, say). Close what it started with `closeFakeApis()` after each test.
 */
export interface SeenRequest {
  readonly method: string;
  readonly path: string;
  readonly origin: string | undefined;
  /** The access key the request was signed with (`--sigv4`), if any. */
  readonly accessKey: string | undefined;
  readonly body: unknown;
}

export interface FakeApi {
  readonly connect: Connect;
  readonly seen: SeenRequest[];
  readonly server: Server;
}

const servers: Server[] = [];

export async function fakeApi(answer: (seen: SeenRequest) => { status: number; body: unknown }, extra: Partial<LocalInfo> = {}): Promise<FakeApi> {
  const seen: SeenRequest[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const header = request.headers['x-ledger-origin'];
      const accessKey = /Credential=([A-Z0-9]+)\//.exec(request.headers.authorization ?? '')?.[1];
      const one: SeenRequest = { method: request.method ?? '', path: request.url ?? '', origin: Array.isArray(header) ? header[0] : header, accessKey, body: text ? (JSON.parse(text) as unknown) : undefined };
      seen.push(one);
      const { status, body } = answer(one);
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  const info: LocalInfo = {
    region: 'us-east-1', apiUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, dispatchQueueUrl: '', dlqUrl: '', sqsEndpoint: '', dynamodbEndpoint: '', s3Endpoint: '',
    eventBridgeEndpoint: '', eventBusName: 'dispatch-ledger', eventLog: '', demoAgentUrl: '', ...extra,
  };
  return { connect: async (_values, as = {}) => createLedgerClient({ origin: originOf(as.origin), local: info }), seen, server };
}

export async function closeFakeApis(): Promise<void> {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
}
