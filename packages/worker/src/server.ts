import { decodePathSegment, requestIdOf, routeParams, routePattern, TARGET_ROUTES, type TargetRouteName } from '@dispatch-ledger/protocol';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { CallbackClient } from './callbacks.js';
import { RunEngine } from './runs.js';
import { fileStore, type RunStore } from './store.js';
import { checkWorkerOptions, safeLog, type CommonWorkerOptions } from './options.js';
import { clipForMessage, type Log } from './model.js';
import { authorizerFor } from './auth.js';

/**
 * `createWorker()`: the CONTRACT §8 target protocol served from a node HTTP server — a thin adapter
 * that parses requests, calls the engine (`runs.ts`) and maps its outcomes to status codes.
 */

const MAX_BODY_BYTES = 2 * 1024 * 1024;

export interface WorkerOptions extends CommonWorkerOptions {
  /** Where run state lives. @default fileStore({ dir: `${process.cwd()}/.worker-state/${name}` }) */
  readonly store?: RunStore;
  /**
   * The target's secret: the `authorization` header value the ledger sends this target (the value of
   * the secret its registration names, as stored — e.g. `Bearer …`). Given it, every request to the
   * HTTP server without exactly that header is answered 401 and changes nothing (CONTRACT V3 §8).
   * A Lambda worker (`@dispatch-ledger/worker/lambda`) takes none: it is reached through IAM. @default none: every caller is served
   */
  readonly secret?: string;
  /** Instead of `secret`, during a rotation: `[current, previous]`, either accepted. */
  readonly secrets?: readonly string[];
}

export interface ListeningWorker {
  /** The base URL to register the target with, e.g. `http://127.0.0.1:43123`. */
  readonly url: string;
  readonly port: number;
  /** Stops serving; live runs' signals are aborted and their state left for the next start to report (`worker_restarted`). */
  close(): Promise<void>;
}

/**
 * One request to the target protocol, as `open().handle` takes it: what a node server, another HTTP
 * framework, or a layer in front of the kit read off the wire.
 */
export interface WorkerRequest {
  readonly method: string;
  /** The path and query as requested, e.g. `/runs/d-1%3A1`. */
  readonly url: string;
  /** Header names in lower case (node's `IncomingHttpHeaders` fits). */
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  /** The body's text (JSON), if any. Over 2 MB is answered 413. */
  readonly body?: string;
}

/** The kit's answer to a {@link WorkerRequest}: always a JSON body. */
export interface WorkerAnswer {
  readonly status: number;
  /** `content-type`, `x-request-id`, and `allow` on a 405. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/** A started worker without a server of its own: you serve `handle`. */
export interface OpenWorker {
  /** Answers one request exactly as `listen`'s server would (auth, routes, errors). Never rejects. */
  handle(request: WorkerRequest): Promise<WorkerAnswer>;
  /** As `ListeningWorker.close`, without a server to close. */
  close(): Promise<void>;
}

export interface Worker {
  /**
   * Reports what a previous process left unfinished in the store (`failed`, `worker_restarted`), then
   * serves the target protocol on `host:port`.
   */
  listen(port?: number, host?: string): Promise<ListeningWorker>;
  /**
   * The same start as `listen`, without a server: the protocol as a function from request to answer,
   * for serving it from another HTTP server or putting a layer of your own in front of it. One of
   * `listen` and `open` at a time (one live worker per store).
   */
  open(): Promise<OpenWorker>;
}

/**
 * A worker: the four endpoints of an `http` target, an idempotent run per dispatch attempt, run state in
 * a store, events numbered per run and callbacks that ride out a ledger that has not caught up yet.
 *
 * @example
 * const worker = createWorker({
 *   name: 'report-writer',
 *   async run(task, ctx) {
 *     await ctx.putEvidence('out/report.md', `# ${String(task.goal)}\n`);
 *     return { summary: 'report written' };
 *   },
 * });
 * const { url, close } = await worker.listen(8080);
 */
export function createWorker(options: WorkerOptions): Worker {
  checkWorkerOptions(options, 'createWorker');
  const { stallHintSeconds } = options;
  const authorized = authorizerFor(options.secret, options.secrets);
  const log = safeLog(options.name, options.log);
  const store = options.store ?? fileStore({ dir: join(process.cwd(), '.worker-state', options.name) });
  let listening = false;

  /** Starts the engine on the store and reports what a previous process left; `stop` undoes it. */
  const start = async (): Promise<{ readonly engine: RunEngine; readonly stop: () => Promise<void> }> => {
    if (listening) throw new Error(`worker ${options.name} is already listening; one live worker per store`);
    listening = true;
    const stopSignal = new AbortController();
    const engine = new RunEngine({
      run: options.run,
      store,
      log,
      stallHintSeconds,
      ...(options.clock ? { clock: options.clock } : {}),
      callbacks: new CallbackClient({
        log,
        stopSignal: stopSignal.signal,
        signer: options.signer,
        retry: options.retry,
        ...(options.transport ? { transport: options.transport } : {}),
      }),
    });
    // Before anything is recovered: another live process's runs are not this one's to report failed.
    let lock: { release(): Promise<void> } | undefined;
    const stop = async (): Promise<void> => {
      stopSignal.abort();
      await engine.close();
      await lock?.release();
      listening = false;
    };
    try {
      lock = await store.lock?.();
      const { restarted, resent } = await engine.recover();
      if (restarted.length > 0 || resent.length > 0) log({ level: 'info', msg: 'worker_recovered', restarted: restarted.length, resent: resent.length });
    } catch (error) {
      await stop();
      throw error;
    }
    return { engine, stop };
  };

  return {
    async open() {
      const { engine, stop } = await start();
      const refusals = refusalLog(log);
      let closing: Promise<void> | undefined;
      return {
        async handle(request) {
          const requestId = requestIdOf(header(request.headers, 'x-request-id'));
          const method = request.method;
          const path = request.url;
          if (authorized && !authorized(header(request.headers, 'authorization'))) {
            refusals.refused(method, path);
            return withRequestId(unauthorized(), requestId);
          }
          const answer = await route(engine, { method, url: path, headers: request.headers, body: async () => bodyOf(request.body), drain: () => undefined }).catch((error: unknown) =>
            failed(log, method, path, error),
          );
          return withRequestId(answer, requestId);
        },
        close: () => (closing ??= stop()),
      };
    },
    async listen(port = 0, host = '127.0.0.1') {
      const { engine, stop } = await start();
      let server: Server;
      try {
        const refusals = refusalLog(log);
        server = createServer((req, res) => {
          const requestId = requestIdOf(header(req.headers, 'x-request-id'));
          const method = req.method ?? 'GET';
          const path = req.url ?? '/';
          // CONTRACT V3 §8: with a secret, nothing is read, routed or changed for a caller without it —
          // not even which routes exist. The body is drained unread.
          if (authorized && !authorized(header(req.headers, 'authorization'))) {
            req.resume();
            refusals.refused(method, path);
            return send(res, withRequestId(unauthorized(), requestId));
          }
          route(engine, { method, url: path, headers: req.headers, body: () => readJsonBody(req), drain: () => void req.resume() })
            .then((answer) => send(res, withRequestId(answer, requestId)))
            .catch((error: unknown) => {
              if (res.headersSent) res.destroy();
              else send(res, withRequestId(failed(log, method, path, error), requestId));
            });
        });
        await new Promise<void>((resolve, reject) => {
          server.once('error', reject);
          server.listen({ port, host }, () => {
            server.off('error', reject);
            resolve();
          });
        });
      } catch (error) {
        await stop();
        throw error;
      }
      const bound = boundPort(server.address());
      const url = `http://${host.includes(':') ? `[${host}]` : host}:${bound}`;
      log({ level: 'info', msg: 'worker_listening', url });

      let closing: Promise<void> | undefined;
      return {
        url,
        port: bound,
        close: () => {
          closing ??= (async () => {
            const closed = new Promise<void>((resolve) => server.close(() => resolve()));
            server.closeAllConnections();
            await stop();
            await closed;
            log({ level: 'info', msg: 'worker_closed', url });
          })();
          return closing;
        },
      };
    },
  };
}

const unauthorized = (): WorkerAnswer => errorAnswer(401, 'unauthorized', 'the authorization header is missing or not the target secret');

/** At most this many refusals logged a minute: a stranger hammering a worker cannot flood its logs. */
const REFUSALS_LOGGED_PER_MINUTE = 10;

interface RefusalLog {
  refused(method: string, path: string): void;
}

/** Logs refused requests up to REFUSALS_LOGGED_PER_MINUTE a minute; the rest are counted, and the count rides on the next line logged. */
function refusalLog(log: Log, now: () => number = Date.now): RefusalLog {
  let windowStart = Number.NEGATIVE_INFINITY;
  let logged = 0;
  let suppressed = 0;
  return {
    refused(method, path) {
      if (now() - windowStart >= 60_000) {
        windowStart = now();
        logged = 0;
      }
      if (logged >= REFUSALS_LOGGED_PER_MINUTE) {
        suppressed += 1;
        return;
      }
      logged += 1;
      log({
        level: 'warn',
        msg: 'request_unauthorized',
        method: clipForMessage(method),
        path: clipForMessage(path),
        ...(suppressed > 0 ? { suppressed } : {}),
        ...(logged === REFUSALS_LOGGED_PER_MINUTE ? { more: 'further refusals this minute are counted and reported with the next one logged' } : {}),
      });
      suppressed = 0;
    },
  };
}

/** The target protocol's routes (CONTRACT §8) as path segments. */
const TARGET_PATTERNS = Object.entries(TARGET_ROUTES).map(([name, spec]) => ({ name: name as TargetRouteName, pattern: routePattern(spec) }));

/**
 * Which route of the target protocol a path is, and its run id (decoded; a malformed escape left as
 * typed, so it simply names no run). One trailing slash is allowed; an empty run id is no route.
 */
function targetRouteOf(pathname: string): { readonly name: TargetRouteName; readonly runId: string } | undefined {
  const segments = pathname.replace(/\/$/, '').split('/').slice(1);
  for (const { name, pattern } of TARGET_PATTERNS) {
    const params = routeParams(pattern, segments, decodePathSegment);
    if (params && params.runId !== '') return { name, runId: params.runId ?? '' };
  }
  return undefined;
}
const HEALTH = /^\/health\/?$/;

/** A request as the router sees it: the body is read only by a route that needs one, else drained. */
interface Routed {
  readonly method: string;
  readonly url: string;
  readonly headers: WorkerRequest['headers'];
  body(): Promise<BodyOutcome>;
  drain(): void;
}

/** Maps a request to the engine's operation and its outcome to an answer (CONTRACT §8). */
async function route(engine: RunEngine, req: Routed): Promise<WorkerAnswer> {
  const { pathname } = new URL(req.url, 'http://worker.invalid');
  const { method } = req;

  const target = targetRouteOf(pathname);
  if (target?.name === 'submit') {
    if (method !== 'POST') return methodNotAllowed(req, 'POST');
    const body = await req.body();
    if (body.kind !== 'json') return bodyError(body);
    const outcome = await engine.submit(header(req.headers, 'idempotency-key'), body.value, header(req.headers, 'traceparent'));
    if (outcome.kind === 'refused') return errorAnswer(outcome.httpStatus, outcome.code, outcome.message);
    return jsonAnswer(outcome.kind === 'created' ? 201 : 200, outcome.run);
  }
  if (target?.name === 'cancel' || target?.name === 'decide') {
    if (method !== 'POST') return methodNotAllowed(req, 'POST');
    if (target.name === 'cancel') {
      req.drain(); // a cancel's body, if any, carries nothing the kit needs
      const outcome = await engine.cancel(target.runId);
      if (outcome.kind === 'refused') return errorAnswer(outcome.httpStatus, outcome.code, outcome.message);
      return jsonAnswer(200, outcome.run);
    }
    const body = await req.body();
    if (body.kind !== 'json') return bodyError(body);
    const outcome = await engine.decide(target.runId, body.value);
    if (outcome.kind === 'refused') return errorAnswer(outcome.httpStatus, outcome.code, outcome.message);
    return jsonAnswer(200, { approvalId: outcome.approvalId, decision: outcome.decision });
  }
  if (target?.name === 'lookUp') {
    if (method !== 'GET') return methodNotAllowed(req, 'GET');
    req.drain();
    const view = await engine.lookup(target.runId);
    if (!view) return errorAnswer(404, 'run_not_found', `no run ${clipForMessage(target.runId)}`);
    return jsonAnswer(200, view);
  }

  req.drain();
  if (HEALTH.test(pathname)) return jsonAnswer(engine.closed ? 503 : 200, { ok: !engine.closed });
  return errorAnswer(404, 'not_found', `no route for ${clipForMessage(method)} ${clipForMessage(pathname)}`);
}

/** A route that threw: logged, answered 500 without saying why. */
function failed(log: Log, method: string, path: string, error: unknown): WorkerAnswer {
  log({ level: 'error', msg: 'request_failed', method: clipForMessage(method), path: clipForMessage(path), error: error instanceof Error ? error.message : String(error) });
  return errorAnswer(500, 'internal_error', 'the worker failed to handle this request');
}

type BodyOutcome = { readonly kind: 'json'; readonly value: unknown } | { readonly kind: 'too_large' } | { readonly kind: 'malformed'; readonly message: string };

/** A request body as text, or `too_large` past the bound (the rest is drained, never kept). */
export type RequestText = { readonly kind: 'text'; readonly text: string } | { readonly kind: 'too_large' };

/**
 * Reads a request's body as UTF-8 text of at most `maxBytes` (the kit's own bound, 2 MB, by default); an
 * oversized one is drained, not kept, so the 413 can still be answered. For a layer in front of
 * `worker.open()` that needs to read a body before it hands the request on.
 */
export function readRequestText(req: IncomingMessage, maxBytes: number = MAX_BODY_BYTES): Promise<RequestText> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= maxBytes) chunks.push(chunk);
    });
    req.on('error', reject);
    req.on('end', () => resolve(size > maxBytes ? { kind: 'too_large' } : { kind: 'text', text: Buffer.concat(chunks).toString('utf8') }));
  });
}

/** A JSON body of at most MAX_BODY_BYTES; an oversized one is drained (not kept) before the 413. */
async function readJsonBody(req: IncomingMessage): Promise<BodyOutcome> {
  const read = await readRequestText(req);
  return read.kind === 'too_large' ? read : parseJson(read.text);
}

/** A body handed to `handle` as text, held to the same bound. */
function bodyOf(text: string | undefined): BodyOutcome {
  if (text === undefined) return { kind: 'json', value: undefined };
  if (Buffer.byteLength(text, 'utf8') > MAX_BODY_BYTES) return { kind: 'too_large' };
  return parseJson(text);
}

function parseJson(text: string): BodyOutcome {
  if (text.trim() === '') return { kind: 'json', value: undefined };
  try {
    return { kind: 'json', value: JSON.parse(text) as unknown };
  } catch (error) {
    return { kind: 'malformed', message: error instanceof Error ? error.message : 'invalid JSON' };
  }
}

function bodyError(body: Exclude<BodyOutcome, { kind: 'json' }>): WorkerAnswer {
  if (body.kind === 'too_large') return errorAnswer(413, 'payload_too_large', `request bodies are limited to ${MAX_BODY_BYTES} bytes`);
  return errorAnswer(400, 'malformed_json', `the body is not JSON: ${clipForMessage(body.message)}`);
}

function methodNotAllowed(req: Routed, allow: string): WorkerAnswer {
  req.drain();
  const answer = errorAnswer(405, 'method_not_allowed', `use ${allow}`);
  return { ...answer, headers: { ...answer.headers, allow } };
}

/** CONTRACT §2's error shape, which targets share. */
function errorAnswer(status: number, code: string, message: string): WorkerAnswer {
  return jsonAnswer(status, { error: { code, message } });
}

function jsonAnswer(status: number, body: unknown): WorkerAnswer {
  return { status, headers: { 'content-type': 'application/json; charset=utf-8' }, body: JSON.stringify(body) };
}

function withRequestId(answer: WorkerAnswer, requestId: string): WorkerAnswer {
  return { ...answer, headers: { ...answer.headers, 'x-request-id': requestId } };
}

function send(res: ServerResponse, answer: WorkerAnswer): void {
  res.writeHead(answer.status, { ...answer.headers, 'content-length': Buffer.byteLength(answer.body) });
  res.end(answer.body);
}

function header(headers: WorkerRequest['headers'], name: string): string | undefined {
  const value = headers[name];
  return typeof value === 'string' ? value : value?.[0];
}



function boundPort(address: AddressInfo | string | null): number {
  if (address === null || typeof address === 'string') throw new Error(`the worker is not listening on TCP: ${String(address)}`);
  return address.port;
}

/** A logger that throws must not take a request or a run down with it. */
