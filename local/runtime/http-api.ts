import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type {
  APIGatewayProxyEventV2,
  APIGatewayProxyResultV2,
  APIGatewayProxyStructuredResultV2,
  Context,
} from 'aws-lambda';
import { describeError, lambdaContext, withinTimeout, type InvocationListener } from './context.js';
import { iamAuthorizer, type IamAuthorizerContext, type SigV4Verify } from './sigv4.js';

export type HttpApiHandler = (event: APIGatewayProxyEventV2, context: Context) => Promise<APIGatewayProxyResultV2>;

/** API Gateway HTTP APIs accept request payloads up to 10 MB. */
export const MAX_PAYLOAD_BYTES = 10 * 1024 * 1024;

/** Content types API Gateway passes as text; anything else arrives base64-encoded. */
const TEXT_TYPES = /^(text\/|application\/(json|[\w.+-]+\+json|xml|x-www-form-urlencoded|javascript))/i;

export interface HttpApiOptions {
  readonly functionName: string;
  readonly handler: HttpApiHandler;
  readonly region: string;
  readonly port?: number;
  readonly timeoutMs?: number;
  readonly onInvocation?: InvocationListener;
  readonly onError?: (error: unknown) => void;
  /**
   * AWS_IAM auth (`ledger local up --sigv4`): every request must carry a SigV4 signature this accepts,
   * or it is answered 403 without invoking the handler; a verified caller arrives in
   * `requestContext.authorizer.iam`, as a function URL reports it. @default none: no auth, as today
   */
  readonly verifySignature?: SigV4Verify;
  /** Hears why a request was refused 403 (the caller is told too). */
  readonly onRefused?: (refusal: { readonly method: string; readonly path: string; readonly reason: string }) => void;
}

/**
 * A local API Gateway HTTP API (payload format 2.0, one `$default` route) in front of one handler,
 * bound to 127.0.0.1. Requests become `APIGatewayProxyEventV2`s; results are mapped back as API
 * Gateway does (a structured result, or any other value as a 200 JSON body).
 */
export async function startHttpApi(options: HttpApiOptions): Promise<{ url: string; port: number; close(): Promise<void> }> {
  const server = createServer((request, response) => {
    void serve(options, request, response).catch((error: unknown) => {
      options.onError?.(error);
      if (!response.headersSent) {
        sendJson(response, 500, { message: 'Internal Server Error' });
      } else {
        response.end();
      }
    });
  });
  await listen(server, options.port ?? 0);
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise<void>((resolveClose) => {
        server.close(() => resolveClose());
        server.closeAllConnections();
      }),
  };
}

function listen(server: Server, port: number): Promise<void> {
  return new Promise((resolveListen, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolveListen();
    });
  });
}

async function readBody(request: IncomingMessage): Promise<Buffer | 'too_large'> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > MAX_PAYLOAD_BYTES) return 'too_large';
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

async function serve(options: HttpApiOptions, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const body = await readBody(request);
  if (body === 'too_large') {
    sendJson(response, 413, { message: 'Request Entity Too Large' });
    request.resume();
    return;
  }
  let authorizer: IamAuthorizerContext | undefined;
  if (options.verifySignature) {
    const verdict = await options.verifySignature(receivedRequest(request, body));
    if (verdict.kind === 'refused') {
      // As a function URL does: the function is never invoked for a request IAM auth refuses.
      options.onRefused?.({ method: request.method ?? 'GET', path: pathOf(request), reason: verdict.reason });
      sendJson(response, 403, { error: { code: 'forbidden', message: verdict.reason } });
      return;
    }
    authorizer = iamAuthorizer(verdict.credential);
  }
  const event = toEvent(request, body, authorizer);
  const context = lambdaContext(options.functionName, options.timeoutMs ?? 29_000, options.region);
  const started = Date.now();
  const report = (error?: string): void =>
    options.onInvocation?.({
      at: new Date(started).toISOString(),
      function: options.functionName,
      requestId: context.awsRequestId,
      trigger: 'http',
      durationMs: Date.now() - started,
      outcome: error === undefined ? 'ok' : 'error',
      ...(error === undefined ? {} : { error }),
    });
  let result: APIGatewayProxyResultV2;
  try {
    // Ended at the function's timeout, as Lambda ends it (regression: awaited without a bound, a hung call held its caller for ever).
    result = await withinTimeout(options.handler(event, context), options.timeoutMs ?? 29_000);
  } catch (thrown) {
    report(describeError(thrown));
    // What API Gateway answers when the integration fails: no detail leaks to the caller.
    sendJson(response, 500, { message: 'Internal Server Error' });
    return;
  }
  report();
  writeResult(response, result);
}

/**
 * The path exactly as the client sent it: WHATWG URL parsing would resolve `..`, `.` and `%2e%2e`
 * segments, and the API must see (and refuse) them, not a quietly different path.
 */
function pathOf(request: IncomingMessage): string {
  const target = request.url ?? '/';
  const queryAt = target.indexOf('?');
  return queryAt < 0 ? target : target.slice(0, queryAt);
}

/** What the signature covers: the request as received, every header included. */
function receivedRequest(request: IncomingMessage, body: Buffer): Parameters<SigV4Verify>[0] {
  const target = request.url ?? '/';
  const queryAt = target.indexOf('?');
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (value !== undefined) headers[name.toLowerCase()] = Array.isArray(value) ? value.join(',') : value;
  }
  return {
    method: (request.method ?? 'GET').toUpperCase(),
    rawPath: pathOf(request),
    rawQueryString: queryAt < 0 ? '' : target.slice(queryAt + 1),
    headers,
    body,
  };
}

function toEvent(request: IncomingMessage, body: Buffer, authorizer: IamAuthorizerContext | undefined): APIGatewayProxyEventV2 {
  const url = new URL(request.url ?? '/', 'http://127.0.0.1');
  const rawPath = pathOf(request);
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined || name === 'cookie') continue;
    headers[name.toLowerCase()] = Array.isArray(value) ? value.join(',') : value;
  }
  const query: Record<string, string> = {};
  for (const [name, value] of url.searchParams) {
    query[name] = query[name] === undefined ? value : `${query[name]},${value}`;
  }
  const cookies = request.headers.cookie?.split(';').map((cookie) => cookie.trim()).filter(Boolean);
  const contentType = headers['content-type'] ?? '';
  const isText = body.length === 0 || TEXT_TYPES.test(contentType);
  const now = new Date();
  const method = (request.method ?? 'GET').toUpperCase();
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath,
    rawQueryString: url.search.startsWith('?') ? url.search.slice(1) : url.search,
    ...(cookies && cookies.length > 0 ? { cookies } : {}),
    headers,
    ...(Object.keys(query).length > 0 ? { queryStringParameters: query } : {}),
    requestContext: {
      accountId: '000000000000',
      apiId: 'local',
      domainName: headers.host ?? '127.0.0.1',
      domainPrefix: 'local',
      http: {
        method,
        path: rawPath,
        protocol: `HTTP/${request.httpVersion}`,
        sourceIp: request.socket.remoteAddress ?? '127.0.0.1',
        userAgent: headers['user-agent'] ?? '',
      },
      requestId: randomUUID(),
      routeKey: '$default',
      stage: '$default',
      time: now.toUTCString(),
      timeEpoch: now.getTime(),
      // The IAM caller, where a function URL with AWS_IAM auth puts it (APIGatewayProxyEventV2WithIAMAuthorizer).
      ...(authorizer ? { authorizer } : {}),
    },
    ...(body.length > 0 ? { body: isText ? body.toString('utf8') : body.toString('base64') } : {}),
    isBase64Encoded: !isText,
  };
}

function writeResult(response: ServerResponse, result: APIGatewayProxyResultV2): void {
  if (typeof result !== 'object' || result === null || !('statusCode' in result)) {
    // API Gateway's payload-2.0 inference: anything that is not a structured result is a 200 JSON body.
    const body = typeof result === 'string' ? result : JSON.stringify(result);
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(body);
    return;
  }
  const structured = result as APIGatewayProxyStructuredResultV2;
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(structured.headers ?? {})) headers[name] = String(value);
  if (structured.cookies && structured.cookies.length > 0) headers['set-cookie'] = structured.cookies;
  const body = structured.body === undefined ? Buffer.alloc(0) : Buffer.from(structured.body, structured.isBase64Encoded ? 'base64' : 'utf8');
  response.writeHead(structured.statusCode ?? 200, headers);
  response.end(body);
}

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify(body));
}
