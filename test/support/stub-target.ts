import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';

/**
 * A stub HTTP target on 127.0.0.1 for the http target adapter's tests: it records each request and
 * answers with the handler a test sets — or leaves the answer open, to play a target that hangs.
 */

const HOST = '127.0.0.1';

export function listen(server: Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: 0, host: HOST }, () => {
      const address = server.address();
      if (address === null || typeof address === 'string') return reject(new Error('not listening on TCP'));
      resolve(address.port);
    });
  });
}

export function close(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** A URL on which nothing listens: a server we started, then closed. */
export async function closedUrl(): Promise<string> {
  const server = createServer();
  const port = await listen(server);
  await close(server);
  return `http://${HOST}:${port}`;
}

export interface StubRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** Answers each request; may leave `res` open to play a target that hangs. */
export type StubHandler = (request: StubRequest, res: ServerResponse) => void;

export interface Stub {
  readonly url: string;
  readonly requests: StubRequest[];
  answer(handler: StubHandler): void;
  close(): Promise<void>;
}

export async function startStub(): Promise<Stub> {
  const requests: StubRequest[] = [];
  let handler: StubHandler = (_request, res) => json(res, 500, { error: { code: 'no_handler', message: 'no handler' } });
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      requests.push(request);
      handler(request, res);
    });
  });
  const port = await listen(server);
  return {
    url: `http://${HOST}:${port}`,
    requests,
    answer: (next) => {
      handler = next;
    },
    close: () => close(server),
  };
}

export function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}
