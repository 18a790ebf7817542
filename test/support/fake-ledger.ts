import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLedgerClient, type LedgerClient } from '@dispatch-ledger/client';

/** How a fake ledger answers one request: its status and body, after a delay if one is given. */
export interface PlannedAnswer {
  readonly status: number;
  readonly body: unknown;
  readonly delayMs?: number;
  readonly headers?: Record<string, string>;
}

export interface FakeLedger {
  readonly server: Server;
  readonly apiUrl: string;
  /** A client of origin `planner`, pointed at it as at a local platform. */
  readonly client: LedgerClient;
  /** Every request it was sent, as `METHOD /path?query`, in order. */
  readonly seen: string[];
  stop(): Promise<void>;
}

/**
 * An HTTP server on 127.0.0.1 that answers each request as `plan` says (by its path): a
 * ledger that misbehaves on purpose, for the client's edge cases.
 */
export async function startFakeLedger(plan: (path: string) => PlannedAnswer): Promise<FakeLedger> {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    seen.push(`${req.method ?? ''} ${req.url ?? ''}`);
    const planned = plan(req.url ?? '');
    setTimeout(() => {
      res.writeHead(planned.status, { 'content-type': 'application/json', ...planned.headers });
      res.end(JSON.stringify(planned.body));
    }, planned.delayMs ?? 0);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const client = createLedgerClient({ origin: 'planner', local: { apiUrl, dispatchQueueUrl: `${apiUrl}/queue`, sqsEndpoint: apiUrl } });
  return {
    server,
    apiUrl,
    client,
    seen,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
