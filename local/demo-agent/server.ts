import { randomUUID } from 'node:crypto';
import { REQUEST_ID } from '@dispatch-ledger/protocol';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as pause } from 'node:timers/promises';
import type { SigV4Signing } from '../runtime/sigv4.js';
import { DEFAULT_TARGET_NAME, DemoAgentEngine, type RefusedOutcome } from './agent.js';
import type { DemoAgentFaults, DemoAgentStats, FaultsFired, Log, LogLine } from './model.js';

export type { AttemptStats, DemoAgentFaults, DemoAgentStats, FaultsFired, LogLine, SubmitFault } from './model.js';

/**
 * The demo agent's HTTP surface (CONTRACT §8 "Targets" and "The demo agent"): a thin adapter that
 * parses requests, calls the engine and maps its outcomes to status codes.
 */

const HOST = '127.0.0.1';
const MAX_BODY_BYTES = 1024 * 1024;

export interface DemoAgentOptions {
  /** Port to listen on, on 127.0.0.1 only. @default 0 (any free port) */
  readonly port?: number;
  /** Receives structured log lines. @default no output */
  readonly log?: (line: LogLine) => void;
  /** Tries per callback to the ledger (409/429/5xx/no answer are retried with backoff). @default 5 */
  readonly callbackTries?: number;
  /** The name the agent is registered under at its root URL, a key of `maxOpen` in its stats. @default 'demo-agent' */
  readonly targetName?: string;
  /**
   * More targets at the same agent, each with a base path of its own — `{url}/targets/{name}`, see
   * {@link DemoAgent.urlOf} — so `maxOpen` is kept per target name (CONTRACT V3 §8). @default none
   */
  readonly moreTargets?: readonly string[];
  /** A fault schedule, for reliability tests (the census). @default none: every request is answered normally */
  readonly faults?: DemoAgentFaults;
  /**
   * The agent's own credentials: its callbacks (run events, evidence) are then signed with SigV4, as
   * the ledger API's AWS_IAM auth wants (locally `ledger local up --sigv4`). @default unsigned
   */
  readonly signing?: SigV4Signing;
}

export interface DemoAgent {
  /** Base URL to register the target with, e.g. `http://127.0.0.1:43123`. */
  readonly url: string;
  readonly port: number;
  /** The base URL to register target `name` with: `url` for `targetName`, `{url}/targets/{name}` for one of `moreTargets`. */
  urlOf(name: string): string;
  /** Same shape as `GET /stats`. */
  stats(): DemoAgentStats;
  /** How often each fault of `options.faults` has fired since start (all 0 without a schedule). */
  faultsFired(): FaultsFired;
  /** Closes the server and drops every pending step and timer, so the process can exit. */
  stop(): Promise<void>;
}

/**
 * Starts the demo agent, a real HTTP target whose behaviour each submission picks with `task.behavior`.
 *
 * @example
 * const agent = await startDemoAgent({ log: (line) => console.log(JSON.stringify(line)) });
 * await fetch(`${agent.url}/runs`, {
 *   method: 'POST',
 *   headers: { 'content-type': 'application/json', 'idempotency-key': 'd-1:1' },
 *   body: JSON.stringify({ dispatchId: 'd-1', attempt: 1, origin: 'planner', task: { behavior: 'complete' },
 *     expectedEvidence: ['out/report.md'], callbackUrl: 'http://127.0.0.1:4000' }),
 * }); // 200 { runId: 'r-…', status: 'queued' }
 * await agent.stop();
 */
export async function startDemoAgent(options: DemoAgentOptions = {}): Promise<DemoAgent> {
  const log = safeLog(options.log);
  const moreTargets: ReadonlySet<string> = new Set(options.moreTargets ?? []);
  const engine = new DemoAgentEngine(log, {
    ...(options.callbackTries ? { callbackTries: options.callbackTries } : {}),
    ...(options.targetName !== undefined && { targetName: options.targetName }),
    ...(options.moreTargets !== undefined && { moreTargets: options.moreTargets }),
    ...(options.faults && { faults: options.faults }),
    ...(options.signing && { signing: options.signing }),
  });
  /** Aborted by stop(): answers held back by a `hang` fault are dropped instead of kept waiting. */
  const stopped = new AbortController();
  const server = createServer((req, res) => {
    res.setHeader('x-request-id', requestIdOf(req));
    handle({ engine, stopped: stopped.signal, moreTargets }, req, res).catch((error: unknown) => {
      log({ level: 'error', msg: 'request_failed', method: req.method, path: req.url, error: String(error) });
      if (res.headersSent) res.destroy();
      else sendError(res, 500, 'internal_error', 'the demo agent failed to handle this request');
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: options.port ?? 0, host: HOST }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = boundPort(server.address());
  const url = `http://${HOST}:${port}`;
  log({ level: 'info', msg: 'demo_agent_listening', url });

  let stopping: Promise<void> | undefined;
  return {
    url,
    port,
    urlOf: (name) => {
      if (name === (options.targetName ?? DEFAULT_TARGET_NAME)) return url;
      if (!moreTargets.has(name)) throw new RangeError(`the demo agent serves no target ${JSON.stringify(name.slice(0, 80))}`);
      return `${url}/targets/${name}`;
    },
    stats: () => engine.stats(),
    faultsFired: () => engine.faultsFired(),
    stop: () => {
      stopping ??= (async () => {
        stopped.abort();
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeAllConnections();
        await engine.stop();
        await closed;
        log({ level: 'info', msg: 'demo_agent_stopped', url });
      })();
      return stopping;
    },
  };
}

const RUNS = /^\/runs\/?$/;
const RUN = /^\/runs\/([^/]+)\/?$/;
const RUN_ACTION = /^\/runs\/([^/]+)\/(approval|cancel)\/?$/;
const STATS = /^\/stats\/?$/;
/** A target's own base path (CONTRACT V3 §8): `/targets/{name}`, then the protocol's paths. */
const TARGET_BASE = /^\/targets\/([^/]+)(\/.*)?$/;

interface Context {
  readonly engine: DemoAgentEngine;
  readonly stopped: AbortSignal;
  readonly moreTargets: ReadonlySet<string>;
}

async function handle({ engine, stopped, moreTargets }: Context, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', `http://${HOST}`);
  const method = req.method ?? 'GET';
  // Under a target's base path the request is that target's; at the root, the root's (`targetName`).
  let pathname = url.pathname;
  let target: string | undefined;
  const based = TARGET_BASE.exec(pathname);
  if (based) {
    const name = decodeSegment(based[1]);
    if (!moreTargets.has(name)) {
      req.resume();
      return sendError(res, 404, 'not_found', `no target ${name.slice(0, 80)} here`);
    }
    target = name;
    pathname = based[2] ?? '/';
  }

  if (RUNS.test(pathname)) {
    if (method !== 'POST') return methodNotAllowed(req, res, 'POST');
    const body = await readJsonBody(req);
    if (body.kind !== 'json') return sendBodyError(res, body);
    const { outcome, holdAnswerMs } = engine.submit(header(req, 'idempotency-key'), body.value, header(req, 'traceparent'), target);
    // The outcome is decided (a run created, if any) before the hold: only the answer is late, so a
    // caller that gives up and retries with the same key finds the same run.
    if (!(await holdAnswer(res, holdAnswerMs, stopped))) {
      res.destroy();
      return;
    }
    if (outcome.kind === 'refused') return sendRefusal(res, outcome);
    return sendJson(res, 200, outcome.run);
  }

  const action = RUN_ACTION.exec(pathname);
  if (action) {
    if (method !== 'POST') return methodNotAllowed(req, res, 'POST');
    const runId = decodeSegment(action[1]);
    if (action[2] === 'cancel') {
      req.resume(); // the body, if any, carries nothing we need
      const outcome = engine.cancel(runId);
      if (outcome.kind === 'refused') return sendRefusal(res, outcome);
      return sendJson(res, 200, outcome.run);
    }
    const body = await readJsonBody(req);
    if (body.kind !== 'json') return sendBodyError(res, body);
    const outcome = engine.decide(runId, body.value);
    if (outcome.kind === 'refused') return sendRefusal(res, outcome);
    return sendJson(res, 200, outcome.decision);
  }

  const run = RUN.exec(pathname);
  if (run) {
    if (method !== 'GET') return methodNotAllowed(req, res, 'GET');
    const outcome = engine.lookup(decodeSegment(run[1]));
    if (outcome.kind === 'refused') return sendRefusal(res, outcome);
    return sendJson(res, 200, outcome.view);
  }

  if (STATS.test(pathname)) {
    if (method !== 'GET') return methodNotAllowed(req, res, 'GET');
    return sendJson(res, 200, engine.stats());
  }

  req.resume();
  sendError(res, 404, 'not_found', `no route for ${method} ${pathname}`);
}

/**
 * Holds an answer back (a `hang` fault). Resolves true once `ms` have passed, false as soon as the
 * agent stops or the caller hangs up (the usual end of a hang: it timed out), so no timer outlives
 * either.
 */
async function holdAnswer(res: ServerResponse, ms: number, stopped: AbortSignal): Promise<boolean> {
  if (ms <= 0) return true;
  const hungUp = new AbortController();
  const onClose = (): void => hungUp.abort();
  res.once('close', onClose);
  try {
    await pause(ms, undefined, { signal: AbortSignal.any([stopped, hungUp.signal]) });
    return true;
  } catch (error) {
    if (error instanceof Error && error.name === 'AbortError') return false;
    throw error;
  } finally {
    res.off('close', onClose);
  }
}

type BodyOutcome =
  | { readonly kind: 'json'; readonly value: unknown }
  | { readonly kind: 'too_large' }
  | { readonly kind: 'malformed'; readonly message: string };

/**
 * Reads a JSON body of at most MAX_BODY_BYTES. An oversized body is still drained (not kept) before
 * answering 413: closing mid-upload would make most clients report a broken pipe instead of the 413.
 * An empty body reads as `undefined`, which the schemas then refuse with a precise message.
 */
function readJsonBody(req: IncomingMessage): Promise<BodyOutcome> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    req.on('error', reject);
    req.on('end', () => {
      if (size > MAX_BODY_BYTES) return resolve({ kind: 'too_large' });
      const text = Buffer.concat(chunks).toString('utf8');
      if (text.trim() === '') return resolve({ kind: 'json', value: undefined });
      try {
        resolve({ kind: 'json', value: JSON.parse(text) as unknown });
      } catch (error) {
        resolve({ kind: 'malformed', message: error instanceof Error ? error.message : 'invalid JSON' });
      }
    });
  });
}

function sendBodyError(res: ServerResponse, body: Exclude<BodyOutcome, { kind: 'json' }>): void {
  if (body.kind === 'too_large') {
    return sendError(res, 413, 'payload_too_large', `request bodies are limited to ${MAX_BODY_BYTES} bytes`);
  }
  sendError(res, 400, 'malformed_json', `the body is not JSON: ${body.message}`);
}

function sendRefusal(res: ServerResponse, outcome: RefusedOutcome): void {
  sendError(res, outcome.httpStatus, outcome.code, outcome.message);
}

function methodNotAllowed(req: IncomingMessage, res: ServerResponse, allow: string): void {
  req.resume();
  res.setHeader('allow', allow);
  sendError(res, 405, 'method_not_allowed', `use ${allow}`);
}

function sendError(res: ServerResponse, status: number, code: string, message: string): void {
  sendJson(res, status, { error: { code, message } });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(payload),
  });
  res.end(payload);
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * Every answer names its request, so a submitter holds proof from our side: the caller's own
 * `x-request-id` when it is short and inert, else a fresh one (never an arbitrary string echoed back).
 */
function requestIdOf(req: IncomingMessage): string {
  const sent = header(req, 'x-request-id');
  return sent !== undefined && REQUEST_ID.test(sent) ? sent : randomUUID();
}

/** A malformed escape is left as typed: it then simply matches no run. */
function decodeSegment(segment: string | undefined): string {
  if (segment === undefined) return '';
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

function boundPort(address: AddressInfo | string | null): number {
  if (address === null || typeof address === 'string') throw new Error(`demo agent is not listening on TCP: ${address}`);
  return address.port;
}

/** A logger that throws must not take a request or a run down with it. */
function safeLog(log: Log | undefined): Log {
  if (!log) return () => {};
  return (line) => {
    try {
      log({ at: new Date().toISOString(), ...line });
    } catch {
      // Deliberately ignored: logging is best effort.
    }
  };
}
