import { dirname } from 'node:path';
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { SQSClient, SendMessageCommand } from '@aws-sdk/client-sqs';
import { z } from 'zod';
import { STACK_OUTPUTS, type StackOutputName } from '../infra/outputs.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../local/engines/index.js';
import { stateDir } from '../local/paths.js';
import { readCredentials, type LocalInfo } from '../local/state.js';
import { signedFetch, SIGV4_SERVICE, type SigV4Signing } from '../local/runtime/sigv4.js';
import { LocalPlatformError, runningState } from './local.js';
import { shown } from './table.js';

/**
 * How every face (the CLI's commands, `ledger ui`, `ledger mcp`) talks to a ledger: the API and the
 * dispatch queue, locally or on a deployed stack (CONTRACT §13). One interface, so a command never
 * knows which it has.
 */
export interface ApiAnswer {
  readonly status: number;
  readonly body: unknown;
}

export interface CallOptions {
  /**
   * The origin to speak for. Locally: the `X-Ledger-Origin` header, or that origin's credential under
   * `--sigv4`. Remote: ignored — the caller is whoever the default credential chain says it is.
   */
  readonly origin?: string;
  /**
   * Call as the operator (`ledger ui` reads any origin's dispatch). Locally: no `X-Ledger-Origin`
   * header, or the operator's credential under `--sigv4`. Remote: ignored, as `origin` is. The operator
   * routes (attention, rejections, counts, the list of every dispatch, slot release) are always called so.
   */
  readonly operator?: boolean;
}

export interface LedgerClient {
  /** The API's base URL. */
  readonly apiUrl: string;
  /** True on a deployed stack (`--stack`/`--api-url`): requests are signed from the default credential chain. */
  readonly remote: boolean;
  get(path: string, options?: CallOptions): Promise<ApiAnswer>;
  post(path: string, body: unknown, options?: CallOptions): Promise<ApiAnswer>;
  /** Puts one dispatch message on the dispatch queue; answers the SQS message id. */
  send(messageBody: string): Promise<string>;
  /** The dispatch queue and its DLQ, where known. */
  readonly queues: { readonly dispatchQueueUrl?: string; readonly dlqUrl?: string };
}

/** The options every command that talks to the API or the queue takes (parseArgs `options`). */
export const CONNECTION_OPTIONS = {
  stack: { type: 'string' },
  'api-url': { type: 'string' },
  'queue-url': { type: 'string' },
  region: { type: 'string' },
} as const;

export interface ConnectionValues {
  readonly stack?: string | undefined;
  readonly 'api-url'?: string | undefined;
  readonly 'queue-url'?: string | undefined;
  readonly region?: string | undefined;
}

/**
 * The connection flags as given, back to arguments (`['--stack', 'prod']`), for a command the CLI or
 * the status page prints: it must reach the same ledger. `omit` leaves out flags the printed command
 * does not take (`check` reads the API only: no `--queue-url`).
 */
export function connectionArgs(values: ConnectionValues, omit: ReadonlyArray<keyof ConnectionValues> = []): string[] {
  return (Object.keys(CONNECTION_OPTIONS) as Array<keyof ConnectionValues>).flatMap((flag) => {
    const value = values[flag];
    return value === undefined || omit.includes(flag) ? [] : [`--${flag}`, value];
  });
}

/** A ledger the CLI cannot talk to as asked: bad connection flags, no stack, no credentials, no answer. */
export class LedgerConnectionError extends Error {
  override readonly name = 'LedgerConnectionError';
}

/** The running local platform's endpoints, or a clear error saying how to start it. */
export function localInfo(): LocalInfo {
  const state = runningState(stateDir());
  if (!state?.info || state.status !== 'ready') {
    throw new LocalPlatformError('the local platform is not running; start it with: npx ledger local up --detach');
  }
  return state.info;
}

/** The origin the CLI speaks for locally (X-Ledger-Origin): --origin, else $LEDGER_ORIGIN, else "planner". */
export const originOf = (value: string | undefined): string => value ?? process.env.LEDGER_ORIGIN ?? 'planner';

/** Routes only the operator may call (CONTRACT §2): signed as the operator under `--sigv4`. */
const OPERATOR_ROUTES = /^\/((attention|rejections|counts|dispatches)|targets\/[^/?]+\/slots\/release)(\?|$)/;

/** The longest an API call may take: an inbox claim waits up to 20 s on the ledger's side. */
const API_TIMEOUT_MS = 60_000;

/**
 * Where plain http is fine: this machine (the local platform, a tunnel to it), by the literal names
 * only. `*.localhost` is left out: whether such a name resolves to loopback is the resolver's choice
 * (RFC 6761 only asks it to), and a signed request sent in the clear elsewhere could be replayed.
 */
const isLoopback = (hostname: string): boolean => ['127.0.0.1', '[::1]', 'localhost'].includes(hostname);

/** A URL a path is appended to, or that names a queue: http(s), no query or fragment, bounded. */
const httpUrl = z
  .url({ protocol: /^https?$/ })
  .max(2048)
  .refine((value) => {
    // Run even when the URL check failed: a value that is no URL is no answer here.
    const url = URL.canParse(value) ? new URL(value) : undefined;
    return url !== undefined && url.search === '' && url.hash === '';
  });
/**
 * Where signed requests go: https — a signed request read off plain http could be replayed for 15
 * minutes — or http on this machine. (A queue URL only names the queue: the SQS client sends to its
 * own endpoint.)
 */
const apiUrl = httpUrl.refine((value) => {
  const url = URL.canParse(value) ? new URL(value) : undefined;
  return url !== undefined && (url.protocol === 'https:' || isLoopback(url.hostname));
});
const URL_SHAPE = 'an http(s) URL without a query';
const API_URL_SHAPE = 'an https URL (http only on 127.0.0.1, [::1] or localhost) without a query';

/** How each connection flag must look, and how to say so: a stack name by CloudFormation's rule, a region as AWS spells one. */
const CONNECTION = {
  stack: { schema: z.string().regex(/^[A-Za-z][-A-Za-z0-9]{0,127}$/), shape: 'a CloudFormation stack name (a letter, then letters, digits and hyphens; at most 128)' },
  'api-url': { schema: apiUrl, shape: `${API_URL_SHAPE} (the stack output ApiUrl)` },
  'queue-url': { schema: httpUrl, shape: `${URL_SHAPE} (the stack output DispatchQueueUrl)` },
  region: { schema: z.string().regex(/^[a-z]{2,4}(-[a-z]+)+-\d{1,2}$/), shape: 'an AWS region such as us-east-1' },
} as const satisfies Record<keyof ConnectionValues, { schema: z.ZodType<string>; shape: string }>;

/** Where a command's requests go, as its flags (and the environment, for the region) say. */
export type Connection =
  | { readonly kind: 'local' }
  | { readonly kind: 'stack'; readonly stack: string; readonly region: string }
  | { readonly kind: 'api'; readonly apiUrl: string; readonly dispatchQueueUrl?: string; readonly region: string };

type Environment = Readonly<Record<string, string | undefined>>;

function checked(flag: keyof ConnectionValues, value: string | undefined, source = `--${flag}`): string | undefined {
  if (value === undefined) return undefined;
  const { schema, shape } = CONNECTION[flag];
  if (!schema.safeParse(value).success) throw new LedgerConnectionError(shown`${source} must be ${shape}, got "${value.slice(0, 200)}"`);
  return value;
}

/** The region of a remote connection: --region, else AWS_REGION, else AWS_DEFAULT_REGION. */
function regionOf(flag: string | undefined, env: Environment): string {
  if (flag !== undefined) return flag;
  for (const name of ['AWS_REGION', 'AWS_DEFAULT_REGION'] as const) {
    const region = checked('region', env[name] || undefined, name);
    if (region !== undefined) return region;
  }
  throw new LedgerConnectionError('no region to sign for (the stack\'s region): pass --region R, or set AWS_REGION');
}

/**
 * Reads the connection flags (pure: the environment is only read for the region). Neither `--stack`
 * nor `--api-url`: the local platform. Every value is checked before anything is sent.
 *
 * @example
 * resolveConnection({ 'api-url': 'https://abc.lambda-url.eu-west-1.on.aws/' }, { AWS_REGION: 'eu-west-1' })
 * // { kind: 'api', apiUrl: 'https://abc.lambda-url.eu-west-1.on.aws', region: 'eu-west-1' }
 */
export function resolveConnection(values: ConnectionValues, env: Environment = process.env): Connection {
  const stack = checked('stack', values.stack);
  const apiUrl = checked('api-url', values['api-url']);
  const queueUrl = checked('queue-url', values['queue-url']);
  const region = checked('region', values.region);
  if (stack !== undefined && apiUrl !== undefined) throw new LedgerConnectionError('give --stack NAME or --api-url URL, not both');
  if (stack === undefined && apiUrl === undefined) {
    if (queueUrl !== undefined || region !== undefined) {
      throw new LedgerConnectionError('--queue-url and --region go with --api-url URL (or --stack NAME); without either, the local platform is used');
    }
    return { kind: 'local' };
  }
  if (stack !== undefined) {
    if (queueUrl !== undefined) throw new LedgerConnectionError('--stack gives the dispatch queue (its output DispatchQueueUrl): leave out --queue-url');
    return { kind: 'stack', stack, region: regionOf(region, env) };
  }
  // A function URL is printed with a trailing slash; every route is appended to it.
  return { kind: 'api', apiUrl: (apiUrl ?? '').replace(/\/+$/, ''), ...(queueUrl === undefined ? {} : { dispatchQueueUrl: queueUrl }), region: regionOf(region, env) };
}

/** A deployed stack as DescribeStacks answers it: its status and the outputs of STACK_OUTPUTS it has. */
export interface DeployedStack {
  readonly name: string;
  readonly region: string;
  readonly status: string;
  readonly outputs: Partial<Record<StackOutputName, string>>;
}

const URL_OUTPUTS: ReadonlySet<StackOutputName> = new Set(['ApiUrl', 'DispatchQueueUrl', 'DeadLetterQueueUrl']);

const isCredentialsError = (error: unknown): boolean => error instanceof Error && error.name === 'CredentialsProviderError';

/** What the SDK's default chain says when it finds nothing, said for people. */
function noCredentials(error: unknown): LedgerConnectionError {
  return new LedgerConnectionError(
    'no AWS credentials: the default credential chain found none (set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY ' +
      `(and AWS_SESSION_TOKEN for a role session), or run where a role provides them)${error instanceof Error ? `: ${error.message}` : ''}`,
    { cause: error },
  );
}

/** An AWS call that failed, for people: the service's error name and message, never a stack trace. */
function awsFailure(what: string, error: unknown): LedgerConnectionError {
  if (isCredentialsError(error)) return noCredentials(error);
  const said = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return new LedgerConnectionError(`${what} failed: ${said}`, { cause: error });
}

/**
 * The outputs of stack `name` in `region` (CloudFormation DescribeStacks, the default credential
 * chain, the SDK's endpoint resolution — AWS_ENDPOINT_URL_CLOUDFORMATION included). A stack that is
 * not there, or a URL output that is not a URL, is a clear error.
 */
export async function readStack(name: string, region: string): Promise<DeployedStack> {
  const cloudformation = new CloudFormationClient({ region });
  try {
    const { Stacks = [] } = await cloudformation.send(new DescribeStacksCommand({ StackName: name }));
    const [stack] = Stacks;
    if (!stack) throw new LedgerConnectionError(shown`no stack "${name}" in ${region}`);
    const outputs: Partial<Record<StackOutputName, string>> = {};
    for (const output of stack.Outputs ?? []) {
      const key = STACK_OUTPUTS.find((known) => known === output.OutputKey);
      if (key === undefined || output.OutputValue === undefined) continue;
      const [schema, shape] = key === 'ApiUrl' ? [apiUrl, API_URL_SHAPE] : [httpUrl, URL_SHAPE];
      if (URL_OUTPUTS.has(key) && !schema.safeParse(output.OutputValue).success) {
        throw new LedgerConnectionError(shown`stack "${name}": its output ${key} is not ${shape}: "${output.OutputValue.slice(0, 200)}"`);
      }
      outputs[key] = output.OutputValue;
    }
    return { name, region, status: stack.StackStatus ?? 'unknown', outputs };
  } catch (error) {
    if (error instanceof LedgerConnectionError) throw error;
    // CloudFormation answers a stack it does not have with a ValidationError "Stack with id … does not exist".
    if (error instanceof Error && error.name === 'ValidationError' && /does not exist/.test(error.message)) {
      throw new LedgerConnectionError(shown`no stack "${name}" in ${region} (CloudFormation: ${error.message})`, { cause: error });
    }
    throw awsFailure(shown`reading stack "${name}" in ${region} (CloudFormation DescribeStacks)`, error);
  } finally {
    cloudformation.destroy();
  }
}

/** One output of a stack, or a clear error naming the stack, its status and the outputs it has. */
export function stackOutput(stack: DeployedStack, key: StackOutputName): string {
  const value = stack.outputs[key];
  if (value !== undefined) return value;
  const has = Object.keys(stack.outputs);
  throw new LedgerConnectionError(shown`stack "${stack.name}" (${stack.status}) has no output ${key}; it has: ${has.length > 0 ? has.join(', ') : 'none'}`);
}

/**
 * An SQS client for a deployed stack's queues: the region, the default credential chain, and the
 * SDK's own endpoint resolution (AWS_ENDPOINT_URL_SQS redirects it) — requests go to that endpoint,
 * never to a queue URL's host.
 */
export function remoteQueueClient(region?: string, credentials?: SigV4Signing['credentials']): SQSClient {
  return new SQSClient({ ...(region === undefined ? {} : { region }), ...(credentials === undefined ? {} : { credentials }), useQueueUrlAsEndpoint: false });
}

/** An SQS client for the local platform's queues (fauxqs). */
export function localQueueClient(info: LocalInfo): SQSClient {
  return new SQSClient({ region: LOCAL_REGION, endpoint: info.sqsEndpoint, credentials: LOCAL_CREDENTIALS });
}

async function sendOne(sqs: SQSClient, queueUrl: string, messageBody: string): Promise<string> {
  try {
    const sent = await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: messageBody }));
    return sent.MessageId ?? '';
  } catch (error) {
    throw awsFailure('sending to the dispatch queue', error);
  } finally {
    sqs.destroy();
  }
}

async function answerOf(response: Response): Promise<ApiAnswer> {
  const text = await response.text();
  let body: unknown = text;
  try {
    body = text === '' ? null : (JSON.parse(text) as unknown);
  } catch {
    // Not JSON (a proxy's error page, say): the text as it came.
  }
  return { status: response.status, body };
}

/** One API call, signed when `signing` is given; an unreachable API or missing credentials is a clear error. */
async function request(url: string, method: 'GET' | 'POST', body: unknown, headers: Readonly<Record<string, string>>, signing: SigV4Signing | undefined): Promise<ApiAnswer> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const init = {
    method,
    headers: { ...headers, ...(payload === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(payload === undefined ? {} : { body: payload }),
    signal: AbortSignal.timeout(API_TIMEOUT_MS),
  };
  try {
    return await answerOf(signing ? await signedFetch(url, init, signing) : await fetch(url, init));
  } catch (error) {
    if (isCredentialsError(error)) throw noCredentials(error);
    const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
    const said = cause instanceof Error ? ((cause as NodeJS.ErrnoException).code ?? cause.message) : String(cause);
    throw new LedgerConnectionError(`could not reach the ledger API at ${new URL(url).origin}: ${said}`, { cause: error });
  }
}

/**
 * The local platform as `origin`: the `X-Ledger-Origin` header, or — when it runs with `--sigv4` (its
 * info names a credentials file) — signed with that origin's credential (the operator's for operator
 * routes), as a caller in AWS signs.
 */
export function localClient(info: LocalInfo = localInfo()): LedgerClient {
  const call = async (method: 'GET' | 'POST', path: string, body: unknown, options: CallOptions): Promise<ApiAnswer> => {
    const origin = originOf(options.origin);
    const asOperator = options.operator === true || OPERATOR_ROUTES.test(path);
    const signing = info.credentialsFile ? readCredentials(dirname(info.credentialsFile)) : undefined;
    if (!signing) return request(`${info.apiUrl}${path}`, method, body, asOperator ? {} : { 'x-ledger-origin': origin }, undefined);
    const credential = asOperator ? signing.credentials.operator : signing.credentials.origins[origin];
    if (!credential) throw new LocalPlatformError(`no credential for origin "${origin}" under --sigv4 (there are: ${Object.keys(signing.credentials.origins).join(', ')})`);
    return request(`${info.apiUrl}${path}`, method, body, {}, { credentials: credential, region: signing.region, service: signing.service });
  };
  return {
    apiUrl: info.apiUrl,
    remote: false,
    queues: { dispatchQueueUrl: info.dispatchQueueUrl, dlqUrl: info.dlqUrl },
    get: (path, options = {}) => call('GET', path, undefined, options),
    post: (path, body, options = {}) => call('POST', path, body, options),
    send: (messageBody) => sendOne(localQueueClient(info), info.dispatchQueueUrl, messageBody),
  };
}

/** A deployed ledger's API and queues, as `--api-url`/`--queue-url` or a stack's outputs name them. */
export interface RemoteEndpoints {
  readonly apiUrl: string;
  readonly region: string;
  readonly dispatchQueueUrl?: string | undefined;
  readonly dlqUrl?: string | undefined;
}

/**
 * A deployed ledger: every request signed with SigV4 for `lambda` (the API is a function URL with
 * AWS_IAM auth) with the default credential chain's credentials; `origin` and `operator` are ignored
 * (the caller is whoever those credentials are) and X-Ledger-Origin is never sent.
 */
export function remoteClient(endpoints: RemoteEndpoints): LedgerClient {
  const { apiUrl, region, dispatchQueueUrl, dlqUrl } = endpoints;
  // One chain for the API and the queue: it is resolved once and refreshed when its credentials expire.
  const credentials = defaultProvider();
  const signing: SigV4Signing = { credentials, region, service: SIGV4_SERVICE };
  return {
    apiUrl,
    remote: true,
    queues: { ...(dispatchQueueUrl === undefined ? {} : { dispatchQueueUrl }), ...(dlqUrl === undefined ? {} : { dlqUrl }) },
    get: (path) => request(`${apiUrl}${path}`, 'GET', undefined, {}, signing),
    post: (path, body) => request(`${apiUrl}${path}`, 'POST', body, {}, signing),
    send: async (messageBody) => {
      if (dispatchQueueUrl === undefined) {
        throw new LedgerConnectionError('sending needs the dispatch queue: with --api-url give --queue-url URL too (the stack output DispatchQueueUrl); with --stack, the stack needs that output');
      }
      return sendOne(remoteQueueClient(region, credentials), dispatchQueueUrl, messageBody);
    },
  };
}

/** How a command reaches its ledger: `connect`, or a stand-in for it in a test. */
export type Connect = (values: ConnectionValues) => Promise<LedgerClient>;

/**
 * The ledger a command talks to: `--stack NAME` (its CloudFormation outputs), `--api-url URL`
 * (`--queue-url URL` to send), else the local platform.
 *
 * @example
 * const ledger = await connect({ stack: 'DispatchLedger', region: 'eu-west-1' });
 * const { status, body } = await ledger.get('/dispatches/d-1');
 */
export async function connect(values: ConnectionValues, env: Environment = process.env): Promise<LedgerClient> {
  const connection = resolveConnection(values, env);
  switch (connection.kind) {
    case 'local':
      return localClient();
    case 'api':
      return remoteClient(connection);
    case 'stack': {
      const stack = await readStack(connection.stack, connection.region);
      return remoteClient({
        apiUrl: stackOutput(stack, 'ApiUrl').replace(/\/+$/, ''),
        region: connection.region,
        dispatchQueueUrl: stack.outputs.DispatchQueueUrl,
        dlqUrl: stack.outputs.DeadLetterQueueUrl,
      });
    }
  }
}
