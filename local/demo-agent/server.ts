import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as pause } from 'node:timers/promises';
import { z } from 'zod';
import { decodePathSegment, isFinalRunStatus, requestIdOf, RUN_STATUSES, TARGET_NAME } from '@dispatch-ledger/protocol';
import { createWorker, fetchTransport, memoryStore, readRequestText, type RetryPolicy, type Transport, type WorkerAnswer } from '@dispatch-ledger/worker';
import { signedHeaders, type SigV4Signing } from '../runtime/sigv4.js';
import { behaviorRun } from './behaviors.js';
import { planFor, type DemoAgentFaults, type DemoAgentStats, type FaultsFired, type Log, type LogLine, type Plan } from './model.js';
import { RunBook, type Counts } from './run-book.js';

export type { AttemptStats, DemoAgentFaults, DemoAgentStats, FaultsFired, LogLine, SubmitFault } from './model.js';

/**
 * The demo agent (CONTRACT §8 "Targets" and "The demo agent"): a worker built on the worker kit
 * (`createWorker`, CONTRACT §12), which serves the target protocol — idempotent runs, lookups, approvals,
 * cancels, numbered events and callbacks that ride out a ledger not ready yet. The behaviours' work is
 * the kit's `run` (`behaviors.ts`); what this file adds is a node HTTP layer in front of the kit's
 * request handler (`worker.open().handle`) that misbehaves on cue — submissions refused (`reject`,
 * `flaky_submit`, the fault schedule), answers held back (`hang`), lookups that answer 404 (`vanish`) or
 * 503 (`lookup_unavailable`, an outage) — keeps `GET /stats`, and a transport that drops or embellishes
 * the callbacks a behaviour says should never arrive or should lie.
 */

const HOST = '127.0.0.1';
/** The demo agent reads bodies up to 1 MB (the kit itself takes 2 MB). */
const MAX_BODY_BYTES = 1024 * 1024;
export const DEFAULT_TARGET_NAME = 'demo-agent';
/**
 * The stall window a submission without `timeouts` is taken to have: the kit then lets one heartbeat
 * through per second (a fifth of it), which is what `slow` promises. The ledger's submissions carry
 * their own window, and the kit coalesces to that.
 */
const STALL_HINT_SECONDS = 5;

export interface DemoAgentOptions {
  /** Port to listen on, on 127.0.0.1 only. @default 0 (any free port) */
  readonly port?: number;
  /** Receives structured log lines. @default no output */
  readonly log?: (line: LogLine) => void;
  /**
   * Tries per callback to the ledger (409 not_yet_recorded, 429, 5xx, no answer are retried with
   * backoff from 100 ms, doubling). @default the worker kit's budgets: 5 minutes, 30 for a final event or an evidence upload
   */
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
 * }); // 200 { runId: 'd-1:1', status: 'queued' }
 * await agent.stop();
 */
export async function startDemoAgent(options: DemoAgentOptions = {}): Promise<DemoAgent> {
  const targetName = options.targetName ?? DEFAULT_TARGET_NAME;
  if (targetName === '') throw new RangeError('the demo agent needs a non-empty targetName');
  const moreTargets: ReadonlySet<string> = new Set(options.moreTargets ?? []);
  for (const name of moreTargets) {
    if (!TARGET_NAME.test(name)) throw new RangeError(`not a target name: ${JSON.stringify(name.slice(0, 80))}`);
  }
  const faults = options.faults ?? NO_FAULTS;
  if (!Number.isFinite(faults.hangMs) || faults.hangMs < 0) {
    throw new RangeError(`faults.hangMs must be a finite number of milliseconds >= 0, got ${faults.hangMs}`);
  }
  const log = safeLog(options.log);
  const book = new RunBook([targetName, ...moreTargets]);
  const worker = createWorker({
    name: 'demo-agent',
    run: behaviorRun({ ended: (runId) => book.close(runId) }),
    // Runs live as long as the process, as they always have: nothing is left on disk.
    store: memoryStore(),
    log,
    stallHintSeconds: STALL_HINT_SECONDS,
    transport: liedTransport(book, log, options.signing),
    ...(options.callbackTries !== undefined && { retry: retryForTries(options.callbackTries) }),
  });
  const kit = await worker.open();
  /** Aborted by stop(): answers held back by a `hang` fault are dropped instead of kept waiting. */
  const stopped = new AbortController();
  const fired: Counts<FaultsFired> = { submit_unavailable: 0, submit_hang: 0, lookup_outage: 0 };
  const front: Front = { kit: kit.handle, book, faults, fired, log, stopped: stopped.signal, targetName, moreTargets };
  const server = createServer((req, res) => {
    const requestId = requestIdOf(header(req, 'x-request-id'));
    serve(front, req)
      .then(async (answer) => {
        if (answer.holdMs > 0 && !(await holdAnswer(res, answer.holdMs, stopped.signal))) return void res.destroy();
        send(res, answer, requestId);
      })
      .catch((error: unknown) => {
        log({ level: 'error', msg: 'request_failed', method: req.method, path: req.url, error: String(error) });
        if (res.headersSent) res.destroy();
        else send(res, { ...errorAnswer(500, 'internal_error', 'the demo agent failed to handle this request'), holdMs: 0 }, requestId);
      });
  });

  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ port: options.port ?? 0, host: HOST }, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (error) {
    await kit.close();
    throw error;
  }
  const port = boundPort(server.address());
  const url = `http://${HOST}:${port}`;
  log({ level: 'info', msg: 'demo_agent_listening', url });

  let stopping: Promise<void> | undefined;
  return {
    url,
    port,
    urlOf: (name) => {
      if (name === targetName) return url;
      if (!moreTargets.has(name)) throw new RangeError(`the demo agent serves no target ${JSON.stringify(name.slice(0, 80))}`);
      return `${url}/targets/${name}`;
    },
    stats: () => book.stats(),
    faultsFired: () => ({ ...fired }),
    stop: () => {
      stopping ??= (async () => {
        stopped.abort();
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeAllConnections();
        await kit.close();
        await closed;
        log({ level: 'info', msg: 'demo_agent_stopped', url });
      })();
      return stopping;
    },
  };
}

// --- The layer in front of the kit ----------------------------------------------------------------------

const NO_FAULTS: DemoAgentFaults = { submit: () => 'none', lookupDown: () => false, hangMs: 0 };

const RUNS = /^\/runs\/?$/;
const RUN = /^\/runs\/([^/]+)\/?$/;
const RUN_ACTION = /^\/runs\/([^/]+)\/(approval|cancel)\/?$/;
const STATS = /^\/stats\/?$/;
/** A target's own base path (CONTRACT V3 §8): `/targets/{name}`, then the protocol's paths. */
const TARGET_BASE = /^\/targets\/([^/]+)(\/.*)?$/;

/** Enough of a body to count it, and to show it to the fault schedule and the plan, even if the kit refuses it. */
const DispatchIdOnly = z.object({ dispatchId: z.string().min(1) });
const AttemptNamed = z.object({ dispatchId: z.string().min(1), attempt: z.number().int().min(1) });
const Planned = AttemptNamed.extend({ task: z.record(z.string(), z.unknown()), expectedEvidence: z.array(z.string()).nullish() });
const RunAnswer = z.object({ runId: z.string(), status: z.enum(RUN_STATUSES) });
const DecisionAnswer = z.object({ decision: z.string() });

interface Front {
  readonly kit: (request: { method: string; url: string; headers: IncomingMessage['headers']; body?: string }) => Promise<WorkerAnswer>;
  readonly book: RunBook;
  readonly faults: DemoAgentFaults;
  readonly fired: Counts<FaultsFired>;
  readonly log: Log;
  readonly stopped: AbortSignal;
  readonly targetName: string;
  readonly moreTargets: ReadonlySet<string>;
}

/** An answer, and how long to hold it back (a `hang` fault; otherwise 0). */
interface Answer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  readonly holdMs: number;
}

async function serve(front: Front, req: IncomingMessage): Promise<Answer> {
  const url = new URL(req.url ?? '/', `http://${HOST}`);
  const method = req.method ?? 'GET';
  // Under a target's base path the request is that target's; at the root, the root's (`targetName`).
  let pathname = url.pathname;
  let target = front.targetName;
  const based = TARGET_BASE.exec(pathname);
  if (based) {
    const name = decodePathSegment(based[1]);
    if (!front.moreTargets.has(name)) {
      req.resume();
      return now(errorAnswer(404, 'not_found', `no target ${name.slice(0, 80)} here`));
    }
    target = name;
    pathname = based[2] ?? '/';
  }
  const body = method === 'POST' ? await readRequestText(req, MAX_BODY_BYTES) : (req.resume(), undefined);
  if (body?.kind === 'too_large') return now(errorAnswer(413, 'payload_too_large', `request bodies are limited to ${MAX_BODY_BYTES} bytes`));
  const text = body?.text;
  const kit = async (): Promise<WorkerAnswer> => front.kit({ method, url: `${pathname}${url.search}`, headers: req.headers, ...(text === undefined ? {} : { body: text }) });

  if (RUNS.test(pathname) && method === 'POST') return submit(front, req, target, text ?? '', kit);

  const action = RUN_ACTION.exec(pathname);
  if (action && method === 'POST') {
    const runId = decodePathSegment(action[1]);
    if (front.book.plan(runId)?.plan?.behavior === 'vanish') return now(runNotFound(runId));
    const answer = await kit();
    if (answer.status !== 200) return now(answer);
    if (action[2] === 'approval') {
      if (parsedJson(DecisionAnswer, answer.body)?.decision === 'cancel') front.book.close(runId);
      return now(answer);
    }
    front.book.cancelAsked(runId);
    const run = parsedJson(RunAnswer, answer.body);
    if (!run || isFinalRunStatus(run.status)) return now(answer);
    // The kit aborts the run's code and reports it cancelled once the code has returned; for the
    // demo agent (and `open`) it is cancelled from this answer on.
    front.book.close(runId);
    return now(jsonAnswer(200, { runId: run.runId, status: 'cancelled' }));
  }

  const run = RUN.exec(pathname);
  if (run && method === 'GET') {
    const runId = decodePathSegment(run[1]);
    if (front.faults.lookupDown(runId)) {
      front.fired.lookup_outage += 1;
      front.log({ level: 'info', msg: 'fault_fired', fault: 'lookup_outage', runId });
      return now(errorAnswer(503, 'lookup_unavailable', 'the status endpoint is down (fault schedule: lookup outage)'));
    }
    const behavior = front.book.plan(runId)?.plan?.behavior;
    // A vanished run was accepted, then forgotten: every later question about it gets a 404.
    if (behavior === 'vanish') return now(runNotFound(runId));
    if (behavior === 'lookup_unavailable') return now(errorAnswer(503, 'lookup_unavailable', 'the status endpoint is down on purpose (behavior: lookup_unavailable)'));
    return now(await kit());
  }

  if (STATS.test(pathname)) {
    if (method !== 'GET') return now({ ...errorAnswer(405, 'method_not_allowed', 'use GET'), headers: { ...JSON_HEADERS, allow: 'GET' } });
    return now(jsonAnswer(200, front.book.stats()));
  }
  // Everything else is the kit's to answer: a wrong method, an unknown route, /health.
  return now(await kit());
}

/**
 * `POST /runs`. Every request is counted (and its `traceparent` header kept) before anything can refuse
 * it, then the fault schedule has its say, then the plan (an unknown behaviour, `reject`, a first
 * `flaky_submit`), then the kit. The kit's 201 for a new run is answered 200, as the demo agent always has.
 */
async function submit(front: Front, req: IncomingMessage, target: string, text: string, kit: () => Promise<WorkerAnswer>): Promise<Answer> {
  const value = parseJson(text);
  const named = AttemptNamed.safeParse(value);
  const key = named.success ? `${named.data.dispatchId}:${named.data.attempt}` : undefined;
  const readable = DispatchIdOnly.safeParse(value);
  front.book.submitted(readable.success ? readable.data.dispatchId : undefined, key, header(req, 'traceparent'));
  if (!named.success) return now(await kit());

  const { dispatchId, attempt } = named.data;
  const fault = front.faults.submit(dispatchId, attempt);
  if (fault === 'unavailable') {
    front.fired.submit_unavailable += 1;
    front.log({ level: 'info', msg: 'fault_fired', fault: 'submit_unavailable', dispatchId, attempt });
    return now(errorAnswer(503, 'temporarily_unavailable', 'submission refused by the fault schedule; retry'));
  }

  const planned = Planned.safeParse(value);
  let plan: Plan | undefined;
  if (planned.success && header(req, 'idempotency-key') === key && key !== undefined && !front.book.hasKey(key)) {
    const outcome = planFor(planned.data.task);
    if (outcome.kind === 'invalid') return now(errorAnswer(422, outcome.code, outcome.message));
    plan = outcome.plan;
    if (plan.behavior === 'reject') return now(errorAnswer(422, 'submission_rejected', 'the demo agent rejects this task (behavior: reject)'));
    if (plan.behavior === 'flaky_submit' && front.book.flakes(dispatchId)) {
      return now(errorAnswer(503, 'temporarily_unavailable', 'first submission refused on purpose (behavior: flaky_submit); retry'));
    }
  }

  const answer = await kit();
  let answered: WorkerAnswer = answer;
  if (answer.status === 201) {
    const run = parsedJson(RunAnswer, answer.body);
    if (run && key) {
      front.book.created(run.runId, dispatchId, key, { target, plan, expectedEvidence: planned.success ? (planned.data.expectedEvidence ?? []) : [] });
      front.log({ level: 'info', msg: 'run_planned', runId: run.runId, dispatchId, behavior: plan?.behavior ?? 'read_from_ledger' });
    }
    answered = { ...answer, status: 200 };
  }
  if (fault !== 'hang') return now(answered);
  // The run is created (if any) before the hold: only the answer is late, so a caller that gives up and
  // retries with the same key finds the same run.
  front.fired.submit_hang += 1;
  front.log({ level: 'info', msg: 'fault_fired', fault: 'submit_hang', dispatchId, attempt, holdMs: front.faults.hangMs });
  return { ...answered, holdMs: front.faults.hangMs };
}

// --- Callbacks that lie ---------------------------------------------------------------------------------

const EVENTS_PATH = /\/runs\/([^/]+)\/events$/;
const RunEventBody = z.looseObject({ type: z.string() });
const DROPPED = { status: 202, text: '{"applied":true}' } as const;

/**
 * How the kit's callbacks leave the demo agent: `vanish` sends nothing at all, `lose_callback` never
 * reports its completion, `complete_without_evidence` claims the expected refs it never uploaded — each
 * dropped or rewritten here, answered as if the ledger took it. Then signed, when the agent has
 * credentials (after any rewrite, so the signature covers what is sent).
 */
function liedTransport(book: RunBook, log: Log, signing: SigV4Signing | undefined): Transport {
  return async (url, init) => {
    const parsed = new URL(url);
    const eventOf = EVENTS_PATH.exec(parsed.pathname);
    const runId = eventOf ? decodePathSegment(eventOf[1]) : (parsed.searchParams.get('runId') ?? '');
    const booked = book.plan(runId);
    let body = init.body;
    if (booked) {
      const type = eventOf && typeof body === 'string' ? parsedJson(RunEventBody, body)?.type : undefined;
      const behavior = booked.plan?.behavior;
      if (behavior === 'vanish' || (behavior === 'lose_callback' && type === 'completed')) {
        log({ level: 'info', msg: 'callback_dropped', runId, behavior, ...(type === undefined ? {} : { type }) });
        return DROPPED;
      }
      if (behavior === 'complete_without_evidence' && type === 'completed' && typeof body === 'string') {
        body = JSON.stringify({ ...RunEventBody.parse(JSON.parse(body)), evidence: booked.expectedEvidence });
      }
    }
    const headers = signing ? await signedHeaders(url, { method: init.method, headers: init.headers, ...(body === undefined ? {} : { body }) }, signing) : init.headers;
    return fetchTransport(url, { ...init, headers, ...(body === undefined ? {} : { body }) });
  };
}

/**
 * The kit retries by time, from 100 ms doubling: `tries` tries take the pauses between them, plus half
 * the next pause as slack for the tries' own time.
 *
 * @example
 * retryForTries(1) // { budgetMs: 50, finalBudgetMs: 50 }: one try, no retry
 */
function retryForTries(tries: number): Partial<RetryPolicy> {
  if (!Number.isInteger(tries) || tries < 1) throw new RangeError(`callbackTries must be an integer >= 1, got ${tries}`);
  const firstPauseMs = 100;
  const budgetMs = firstPauseMs * (2 ** (tries - 1) - 1) + firstPauseMs * 2 ** (tries - 2);
  return { firstPauseMs, budgetMs, finalBudgetMs: budgetMs };
}

// --- Plumbing -------------------------------------------------------------------------------------------

/**
 * Holds an answer back (a `hang` fault). Resolves true once `ms` have passed, false as soon as the
 * agent stops or the caller hangs up (the usual end of a hang: it timed out), so no timer outlives
 * either.
 */
async function holdAnswer(res: ServerResponse, ms: number, stopped: AbortSignal): Promise<boolean> {
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

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function parsedJson<T>(schema: z.ZodType<T>, text: string): T | undefined {
  const parsed = schema.safeParse(parseJson(text));
  return parsed.success ? parsed.data : undefined;
}

const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8' } as const;

function jsonAnswer(status: number, body: unknown): WorkerAnswer {
  return { status, headers: JSON_HEADERS, body: JSON.stringify(body) };
}

function errorAnswer(status: number, code: string, message: string): WorkerAnswer {
  return jsonAnswer(status, { error: { code, message } });
}

const runNotFound = (runId: string): WorkerAnswer => errorAnswer(404, 'run_not_found', `no run ${runId.slice(0, 128)}`);

const now = (answer: WorkerAnswer): Answer => ({ ...answer, holdMs: 0 });

function send(res: ServerResponse, answer: Answer, requestId: string): void {
  res.writeHead(answer.status, { ...answer.headers, 'x-request-id': requestId, 'content-length': Buffer.byteLength(answer.body) });
  res.end(answer.body);
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
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
