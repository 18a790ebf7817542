import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { routeParams, routePattern, ROUTES, type RouteName } from '@dispatch-ledger/protocol';

/**
 * A recording proxy in front of the ledger's API: a client pointed at `url` reaches the API unchanged,
 * and every request is recorded as the entry of the protocol's route table it named (method and path).
 * It shows which routes a test suite called, without touching the platform.
 */
export interface RouteRecorder {
  readonly url: string;
  /** The entries called so far, each with how many times. */
  readonly called: ReadonlyMap<RouteName, number>;
  stop(): Promise<void>;
}

const PATTERNS = (Object.keys(ROUTES) as RouteName[]).map((name) => ({ name, method: ROUTES[name].method, pattern: routePattern(ROUTES[name]) }));

/** The table entry a request names, if any. */
export function routeOf(method: string, path: string): RouteName | undefined {
  const segments = new URL(path, 'http://recorder.invalid').pathname.split('/').slice(1);
  return PATTERNS.find((entry) => entry.method === method && routeParams(entry.pattern, segments) !== undefined)?.name;
}

export async function startRouteRecorder(apiUrl: string): Promise<RouteRecorder> {
  const upstream = new URL(apiUrl);
  const called = new Map<RouteName, number>();
  const server: Server = createServer((req, res) => {
    const name = routeOf(req.method ?? '', req.url ?? '/');
    if (name) called.set(name, (called.get(name) ?? 0) + 1);
    const forward = httpRequest({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forward.on('error', () => {
      res.writeHead(502);
      res.end();
    });
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    called,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
