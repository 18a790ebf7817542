import { randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { isLedgerValidationError, type LedgerClient } from '@dispatch-ledger/client';
import { EXECUTION_BUCKETS } from '../shared/dispatch/counts.js';
import { PHASES } from '../shared/dispatch/transitions/legal.js';
import { clip } from '../shared/text.js';
import { ROUTES } from '@dispatch-ledger/protocol';
import { PAGE_BUILD } from './page-build.js';
import { proxyDecision, API_PREFIX, type ProxyDecision } from './routes.js';
import { SESSION_HEADER } from './session.js';

/**
 * The status page (CONTRACT §13, `ledger ui`): a small server on 127.0.0.1 that serves the page and
 * relays an allowlist of the ledger's read routes (ui/routes.ts) through a LedgerClient, as the
 * operator. It has no public face: it binds to loopback, answers only requests addressed to its own
 * `127.0.0.1:port` (a DNS-rebound name reaching the port is refused, so no web site can read the
 * ledger through the operator's credentials), only GET, and every answer carries a strict
 * Content-Security-Policy (no inline script, nothing but this origin).
 *
 * The Host check stops a page from reading answers, not from sending: a web page could still fire
 * blind GETs at the port (`?refresh=true` makes the ledger look runs up at their targets), and any
 * process of any user on the machine could read through it. So each start makes a secret: the URL it
 * prints carries it as `?token=…`; the page's script keeps it in this origin's storage, takes it out
 * of the address bar, and sends it in a header (`SESSION_HEADER`) on every read — config.json and
 * `/api/…` answer nothing without it; the page's own files (its HTML, script, styles and icon) are
 * public. Not a cookie: a browser sends a cookie for 127.0.0.1 to every port on 127.0.0.1, so any
 * local server the operator's browser visits would read it; storage is kept apart by origin, port
 * included, and no other page can make a browser send a custom header here (that needs a CORS
 * preflight, which this server never grants). A query, not a `#fragment`: the page's routes live in
 * the fragment. The query is never logged (Referrer-Policy is no-referrer, and no log line here
 * carries a query). Requests a browser marks `Sec-Fetch-Site: cross-site` or `same-site` are refused
 * before anything else: no other site's page acts here.
 */
export interface StatusPageOptions {
  /** The ledger to show, read as the operator (`as: 'operator'`: its credential under --sigv4, the caller's own remotely). */
  readonly client: LedgerClient;
  /** @default 0: a free port the system picks */
  readonly port?: number;
  /** How often the page polls the ledger. @default 3000 */
  readonly refreshMs?: number;
  /**
   * The connection flags the CLI commands the page suggests need (`['--stack', 'prod']`), so a command
   * copied from it acts on the same ledger. @default []: the local platform
   */
  readonly connection?: readonly string[];
  /** Structured log lines (refusals, a ledger that could not be reached). @default JSON lines on stderr */
  readonly log?: (line: Record<string, unknown>) => void;
}

export interface StatusPage {
  /** `http://127.0.0.1:PORT/?token=…`: the URL to open, with this start's secret. Print it; never log it. */
  readonly url: string;
  /** `http://127.0.0.1:PORT/`: where the page is, without the secret (for log lines). */
  readonly origin: string;
  readonly port: number;
  close(): Promise<void>;
}

/** The page's own files, read once at start. */
interface Assets {
  readonly html: string;
  readonly css: string;
  readonly js: string;
  readonly icon: string;
}

const PAGE_DIR = new URL('./page/', import.meta.url);


/**
 * From the repository's sources, app.ts is compiled for the browser when the server starts (esbuild,
 * ~50 ms; no build step, and nothing to drift from the page's code). In the `dispatch-ledger` package
 * the build compiled it once into `page/app.js` beside the page's other files (scripts/build-packages.ts),
 * so the installed CLI needs no esbuild. Kept in memory; nothing is written.
 */
async function compilePage(): Promise<Assets> {
  const page = {
    html: readFileSync(new URL('index.html', PAGE_DIR), 'utf8'),
    css: readFileSync(new URL('styles.css', PAGE_DIR), 'utf8'),
    icon: readFileSync(new URL('favicon.svg', PAGE_DIR), 'utf8'),
  };
  // The define itself, not RUNNING_BUILT: the bundler folds it here and drops compileScript (and esbuild).
  const js = typeof DISPATCH_LEDGER_CLI_BUNDLE !== 'undefined' ? readFileSync(new URL('app.js', PAGE_DIR), 'utf8') : await compileScript();
  return { ...page, js };
}

declare const DISPATCH_LEDGER_CLI_BUNDLE: boolean | undefined;

async function compileScript(): Promise<string> {
  const { build } = await import('esbuild');
  const result = await build({ ...PAGE_BUILD.options, conditions: [...PAGE_BUILD.options.conditions], target: [...PAGE_BUILD.options.target], entryPoints: [fileURLToPath(new URL(PAGE_BUILD.entry, PAGE_DIR))], write: false });
  const js = result.outputFiles[0]?.text;
  if (js === undefined) throw new Error('esbuild produced no bundle for the status page');
  return js;
}

// No inline script or style, no other origin, no framing, no plugins, no forms posting anywhere.
const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'cache-control': 'no-store',
} as const;

function answer(response: ServerResponse, status: number, contentType: string, body: string, extra: Record<string, string> = {}): void {
  response.writeHead(status, { ...SECURITY_HEADERS, 'content-type': contentType, ...extra });
  response.end(body);
}

const json = (response: ServerResponse, status: number, body: unknown, extra: Record<string, string> = {}): void =>
  answer(response, status, 'application/json; charset=utf-8', JSON.stringify(body), extra);

/** A presented secret equals ours, compared in constant time. */
function sameSecret(presented: string | undefined, secret: Buffer): boolean {
  if (presented === undefined) return false;
  const given = Buffer.from(presented);
  return given.length === secret.length && timingSafeEqual(given, secret);
}

const refusal = (response: ServerResponse, status: number, code: string, message: string, extra: Record<string, string> = {}): void =>
  json(response, status, { error: { code, message } }, extra);

/**
 * Starts the status page; resolves once it listens. Stop it with `close()`.
 *
 * @example
 * const page = await startStatusPage({ client: await connect({}) });
 * console.log(`status page: ${page.url}`);
 */
/** The path templates of the routes the page reads, from the protocol's table (the page fills them: ui/page/api.ts routeUrl). */
const PAGE_ROUTES = { getDispatch: ROUTES.getDispatch.path, listDispatches: ROUTES.listDispatches.path, attention: ROUTES.attention.path, counts: ROUTES.counts.path };

export async function startStatusPage(options: StatusPageOptions): Promise<StatusPage> {
  const { client } = options;
  const log = options.log ?? ((line) => process.stderr.write(`${JSON.stringify({ at: new Date().toISOString(), component: 'status-page', ...line })}\n`));
  const assets = await compilePage();
  // The filter's lists travel with the config: the shared modules that hold them cannot be bundled for a browser (ui/page/api.ts).
  const config = JSON.stringify({ refreshMs: options.refreshMs ?? 3000, connection: options.connection ?? [], remote: !(await client.endpoints()).local, phases: PHASES, statuses: EXECUTION_BUCKETS, routes: PAGE_ROUTES });
  let ownHost = '';
  // Per start, written nowhere but the printed URL, the local state file (mode 0600) and the page's storage for this origin.
  const token = randomBytes(24).toString('base64url');
  const secret = Buffer.from(token);

  // The page's own files: the same for everyone, served without the secret (its script brings the secret).
  const publicFiles: Record<string, { type: string; body: string }> = {
    '/': { type: 'text/html; charset=utf-8', body: assets.html },
    '/index.html': { type: 'text/html; charset=utf-8', body: assets.html },
    '/styles.css': { type: 'text/css; charset=utf-8', body: assets.css },
    '/app.js': { type: 'text/javascript; charset=utf-8', body: assets.js },
    // The browser asks for an icon on its own; a 404 there would be a console error of the page.
    '/favicon.svg': { type: 'image/svg+xml', body: assets.icon },
  };

  const relay = async (decision: Extract<ProxyDecision, { kind: 'proxy' }>, response: ServerResponse): Promise<void> => {
    const { path } = decision;
    try {
      const { status, body } = await client.raw(decision.route, { params: decision.params, query: decision.query, as: 'operator' });
      // The ledger's answer travels as data, whatever its status: a route that is missing or failing
      // is something the page shows in its section ("could not load"), and a non-2xx subresource would
      // also be reported by the browser as a console error of the page itself.
      json(response, 200, { status, body });
    } catch (error) {
      const message = clip(error instanceof Error ? error.message : String(error), 300);
      // A filter the ledger would refuse never leaves: it is answered as the ledger's 400 would be.
      if (isLedgerValidationError(error)) return json(response, 200, { status: 400, body: { error: { code: 'malformed', message } } });
      log({ level: 'error', msg: 'ledger unreachable', path: clip(path, 200), error: message });
      json(response, 200, { status: 502, body: { error: { code: 'ledger_unreachable', message: `the status page could not reach the ledger: ${message}` } } });
    }
  };

  /** A request that passed every check, the secret too: the page's config, or a relayed read. */
  const serve = (url: URL, response: ServerResponse): void => {
    if (url.pathname === '/config.json') {
      answer(response, 200, 'application/json; charset=utf-8', config);
      return;
    }
    if (url.pathname !== API_PREFIX && !url.pathname.startsWith(`${API_PREFIX}/`)) {
      refusal(response, 404, 'not_found', 'no such page');
      return;
    }
    const decision = proxyDecision(url.pathname, url.searchParams);
    if (decision.kind === 'refused') {
      log({ level: 'warn', msg: 'request refused: route', path: clip(url.pathname, 200), code: decision.code });
      refusal(response, decision.status, decision.code, decision.message);
      return;
    }
    void relay(decision, response).catch((error: unknown) => failed(error, response));
  };

  const handle = (request: IncomingMessage, response: ServerResponse): void => {
    // DNS rebinding: a foreign name resolving to 127.0.0.1 still sends its own Host.
    if (request.headers.host !== ownHost) {
      log({ level: 'warn', msg: 'request refused: foreign Host', host: clip(String(request.headers.host ?? ''), 200) });
      refusal(response, 403, 'forbidden_host', `this status page answers only requests to ${ownHost}`);
      return;
    }
    // A browser says where a request comes from; only this page itself (same-origin) or a person
    // (none: typed, bookmarked, opened from the terminal) may act here.
    const site = request.headers['sec-fetch-site'];
    if (site === 'cross-site' || site === 'same-site') {
      log({ level: 'warn', msg: 'request refused: cross-site', site });
      refusal(response, 403, 'cross_site', 'the status page answers only its own page');
      return;
    }
    if (request.method !== 'GET') {
      log({ level: 'warn', msg: 'request refused: method', method: clip(String(request.method), 20) });
      refusal(response, 405, 'method_not_allowed', 'the status page only reads: GET', { allow: 'GET' });
      return;
    }
    // The request line is the client's: `GET http://[/ HTTP/1.1` is no URL, and must not be a crash.
    const base = `http://${ownHost}`;
    if (!URL.canParse(request.url ?? '/', base)) {
      log({ level: 'warn', msg: 'request refused: malformed URL' });
      refusal(response, 400, 'malformed', 'the request target is not a URL');
      return;
    }
    const url = new URL(request.url ?? '/', base);
    // A stale printed URL (an earlier start's) is refused at once, not left to every read of the page — on any
    // path: the page's script keeps whatever token it is loaded with (a review: `/index.html?token=x` replaced the good one).
    if (url.searchParams.has('token') && !sameSecret(url.searchParams.get('token') ?? undefined, secret)) {
      log({ level: 'warn', msg: 'request refused: wrong token' });
      refusal(response, 403, 'forbidden_token', 'this is not the URL this status page printed: open the one `ledger ui` (or `npm start`) printed');
      return;
    }
    const file = publicFiles[url.pathname];
    if (file) {
      answer(response, 200, file.type, file.body);
      return;
    }
    const presented = request.headers[SESSION_HEADER];
    if (!sameSecret(typeof presented === 'string' ? presented : undefined, secret)) {
      log({ level: 'warn', msg: 'request refused: no session', path: clip(url.pathname, 200) });
      refusal(response, 403, 'forbidden_token', 'open the URL `ledger ui` (or `npm start`) printed, with its token');
      return;
    }
    serve(url, response);
  };

  /** A handler that threw: a structured line for the operator, a bare 500 for the client (no stack). */
  const failed = (error: unknown, response: ServerResponse): void => {
    log({ level: 'error', msg: 'request failed', error: clip(error instanceof Error ? error.message : String(error), 300) });
    if (response.headersSent) response.destroy();
    else refusal(response, 500, 'internal', 'the status page failed to answer this request');
  };

  const server = createServer((request, response) => {
    try {
      handle(request, response);
    } catch (error) {
      failed(error, response);
    }
  });
  await new Promise<void>((resolveListen, rejectListen) => {
    server.once('error', rejectListen);
    server.listen(options.port ?? 0, '127.0.0.1', () => {
      server.off('error', rejectListen);
      resolveListen();
    });
  });
  const { port } = server.address() as AddressInfo;
  ownHost = `127.0.0.1:${port}`;
  return {
    url: `http://${ownHost}/?token=${token}`,
    origin: `http://${ownHost}/`,
    port,
    close: () =>
      new Promise<void>((resolveClose) => {
        server.closeAllConnections();
        server.close(() => resolveClose());
      }),
  };
}
