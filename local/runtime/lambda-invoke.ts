import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { withinTimeout } from './context.js';

/**
 * A local Lambda for lambda targets (CONTRACT §12): the Invoke API's asynchronous form
 * (`POST /2015-03-31/functions/{name}/invocations`, `X-Amz-Invocation-Type: Event`) on 127.0.0.1, so the
 * ledger's own LambdaClient reaches it through `AWS_ENDPOINT_URL_LAMBDA` unchanged. Like Lambda, it
 * answers 202 with a request id at once, runs the handler later, retries a failed or timed-out
 * invocation twice, and then hands the on-failure destination Lambda's record of it.
 */

export type LocalLambdaHandler = (event: unknown, context: { readonly awsRequestId: string; readonly functionName: string; readonly getRemainingTimeInMillis: () => number }) => Promise<unknown>;

export interface LocalLambdaFunction {
  readonly name: string;
  readonly handler: LocalLambdaHandler;
  /** The function's timeout: an invocation still running after it counts as failed (`Task timed out`). */
  readonly timeoutMs: number;
  /** Without an on-failure destination (the ledger's own monitor, nudged to admit): a failed event is only logged, as Lambda drops it. */
  readonly noDestination?: boolean;
}

/** What Lambda puts on an on-failure destination (the fields the ledger reads, as Lambda names them). */
export interface DestinationRecord {
  readonly version: '1.0';
  readonly timestamp: string;
  readonly requestContext: { readonly requestId: string; readonly functionArn: string; readonly condition: 'RetriesExhausted'; readonly approximateInvokeCount: number };
  readonly requestPayload: unknown;
  readonly responseContext: { readonly statusCode: 200; readonly executedVersion: '$LATEST'; readonly functionError: 'Unhandled' };
  readonly responsePayload: { readonly errorType: string; readonly errorMessage: string };
}

export interface LocalLambdaOptions {
  readonly functions: readonly LocalLambdaFunction[];
  readonly region: string;
  readonly accountId?: string;
  /** Lambda waits about 1 and 2 minutes between tries; locally scaled down. @default [1000, 2000] */
  readonly retryDelaysMs?: readonly number[];
  readonly onFailure: (record: DestinationRecord) => Promise<void>;
  readonly onError?: (error: unknown) => void;
}

export interface LocalLambda {
  readonly url: string;
  /** Invocations accepted, tried, and handed to the on-failure destination, per function name. */
  readonly stats: () => Record<string, { readonly accepted: number; readonly tries: number; readonly failed: number }>;
  /** Resolves when every accepted invocation has finished its tries. */
  readonly idle: () => Promise<void>;
  close(): Promise<void>;
}

const INVOKE_PATH = /^\/2015-03-31\/functions\/([^/]+)\/invocations$/;

/** The largest payload an asynchronous (Event) invocation takes: 1 MB (Lambda's Invoke API). */
export const MAX_ASYNC_PAYLOAD_BYTES = 1_048_576;

export async function startLocalLambda(options: LocalLambdaOptions): Promise<LocalLambda> {
  const account = options.accountId ?? '000000000000';
  const arnOf = (name: string) => `arn:aws:lambda:${options.region}:${account}:function:${name}`;
  const byName = new Map(options.functions.map((fn) => [fn.name, fn]));
  const counts = new Map<string, { accepted: number; tries: number; failed: number }>();
  const running = new Set<Promise<void>>();
  let closed = false;
  const delays = options.retryDelaysMs ?? [1000, 2000];
  const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

  const once = async (fn: LocalLambdaFunction, event: unknown, requestId: string): Promise<void> => {
    const deadline = Date.now() + fn.timeoutMs;
    await withinTimeout(fn.handler(event, { awsRequestId: requestId, functionName: fn.name, getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()) }), fn.timeoutMs);
  };

  const run = async (fn: LocalLambdaFunction, event: unknown, requestId: string): Promise<void> => {
    const count = counts.get(fn.name) ?? { accepted: 0, tries: 0, failed: 0 };
    let last: unknown;
    for (let attempt = 0; attempt <= delays.length && !closed; attempt += 1) {
      if (attempt > 0) await sleep(delays[attempt - 1] ?? 0);
      count.tries += 1;
      try {
        await once(fn, event, requestId);
        return;
      } catch (error) {
        last = error;
      }
    }
    if (closed) return;
    count.failed += 1;
    const error = last instanceof Error ? last : new Error(String(last));
    if (fn.noDestination) {
      options.onError?.(error);
      return;
    }
    await options.onFailure({
      version: '1.0',
      timestamp: new Date().toISOString(),
      requestContext: { requestId, functionArn: `${arnOf(fn.name)}:$LATEST`, condition: 'RetriesExhausted', approximateInvokeCount: count.tries },
      requestPayload: event,
      responseContext: { statusCode: 200, executedVersion: '$LATEST', functionError: 'Unhandled' },
      responsePayload: { errorType: error.name || 'Error', errorMessage: error.message },
    });
  };

  const serve = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const reply = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      response.writeHead(status, { 'content-type': 'application/json', ...headers });
      response.end(JSON.stringify(body));
    };
    // Read no further than Lambda takes (regression: any body was read whole, so one large POST from any
    // local process could exhaust the supervisor's memory).
    const tooLarge = () => reply(413, { Type: 'User', message: `Request must be smaller than ${MAX_ASYNC_PAYLOAD_BYTES} bytes for the Event invocation type` }, { 'x-amzn-errortype': 'RequestTooLargeException' });
    if (Number(request.headers['content-length'] ?? 0) > MAX_ASYNC_PAYLOAD_BYTES) {
      // Answered before the body is read; the rest is drained unread (closing on it would reset the connection before the answer arrives).
      tooLarge();
      request.resume();
      return;
    }
    // Without a length (chunked): read to the end, keeping nothing past the limit.
    const chunks: Buffer[] = [];
    let bytes = 0;
    for await (const chunk of request) {
      bytes += (chunk as Buffer).length;
      if (bytes <= MAX_ASYNC_PAYLOAD_BYTES) chunks.push(chunk as Buffer);
    }
    if (bytes > MAX_ASYNC_PAYLOAD_BYTES) return tooLarge();
    const match = INVOKE_PATH.exec(new URL(request.url ?? '/', 'http://127.0.0.1').pathname);
    if (request.method !== 'POST' || !match) return reply(404, { Type: 'User', message: 'not an Invoke request' }, { 'x-amzn-errortype': 'ResourceNotFoundException' });
    // The function may be named by its name or its ARN (the ledger registers the ARN).
    const named = decodeURIComponent(match[1] ?? '');
    const fn = byName.get(named.split(':function:')[1]?.split(':')[0] ?? named);
    if (!fn) return reply(404, { Type: 'User', message: `Function not found: ${named}` }, { 'x-amzn-errortype': 'ResourceNotFoundException' });
    if (request.headers['x-amz-invocation-type'] !== 'Event') return reply(400, { Type: 'User', message: 'the local Lambda runs asynchronous (Event) invocations only' }, { 'x-amzn-errortype': 'InvalidParameterValueException' });
    let event: unknown;
    try {
      event = JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null');
    } catch {
      return reply(400, { Type: 'User', message: 'Could not parse request body into json' }, { 'x-amzn-errortype': 'InvalidRequestContentException' });
    }
    const requestId = randomUUID();
    const count = counts.get(fn.name) ?? { accepted: 0, tries: 0, failed: 0 };
    count.accepted += 1;
    counts.set(fn.name, count);
    const work = run(fn, event, requestId).catch((error: unknown) => options.onError?.(error));
    running.add(work);
    void work.finally(() => running.delete(work));
    response.writeHead(202, { 'x-amzn-requestid': requestId, 'content-type': 'application/json' });
    response.end();
  };

  const server = createServer((request, response) => {
    serve(request, response).catch((error: unknown) => {
      options.onError?.(error);
      if (!response.headersSent) response.writeHead(500).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    stats: () => Object.fromEntries([...counts].map(([name, count]) => [name, { ...count }])),
    idle: async () => {
      while (running.size > 0) await Promise.all([...running]);
    },
    close: async () => {
      closed = true;
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
