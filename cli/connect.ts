import { SQSClient } from '@aws-sdk/client-sqs';
import { z } from 'zod';
import { createLedgerClient, type LedgerClient, type LedgerClientOptions } from '@dispatch-ledger/client';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../local/engines/index.js';
import { stateDir } from '../local/paths.js';
import type { LocalInfo } from '../local/state.js';
import { LocalPlatformError, runningState } from './local.js';
import { shown } from './table.js';
import { ArgumentsError } from './args.js';

/**
 * How every face (the CLI's commands, `ledger ui`, `ledger mcp`) reaches a ledger: the connection flags,
 * read and checked here, become the options of `@dispatch-ledger/client` (docs/protocol.md §15), which
 * makes every call — one route table, one signer, one error mapping — locally or on a deployed stack.
 */

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

/**
 * A ledger the CLI cannot reach as asked: no such stack or output, no local platform, no credentials.
 * Connection flags that are malformed or do not go together are an `ArgumentsError` (exit 2, a usage mistake).
 */
export class LedgerConnectionError extends Error {
  override readonly name = 'LedgerConnectionError';
}

/** The running local platform's endpoints, or a clear error saying how to start it. */
export function localInfo(): LocalInfo {
  const state = runningState(stateDir());
  if (!state?.info || state.status !== 'ready') {
    throw new LocalPlatformError(`the local platform is not running (looked in ${stateDir()}); start it with: npx ledger local up --detach, or run ledger from the folder you ran up in`);
  }
  return state.info;
}

/** The origin the CLI speaks for locally (X-Ledger-Origin): --origin, else $LEDGER_ORIGIN, else "planner". */
export const originOf = (value: string | undefined): string => value ?? process.env.LEDGER_ORIGIN ?? 'planner';

/**
 * Where plain http is fine: this machine (the local platform, a tunnel to it), by the literal names
 * only. `*.localhost` is left out: whether such a name resolves to loopback is the resolver's choice
 * (RFC 6761 only asks it to), and a signed request sent in the clear elsewhere could be replayed.
 */
const isLoopback = (hostname: string): boolean => ['127.0.0.1', '[::1]', 'localhost'].includes(hostname);

/**
 * A URL a path is appended to, or that names a queue: http(s), no query or fragment, no user name or
 * password (the calls are signed: one would only leak), bounded.
 */
const httpUrl = z
  .url({ protocol: /^https?$/ })
  .max(2048)
  .refine((value) => {
    // Run even when the URL check failed: a value that is no URL is no answer here.
    const url = URL.canParse(value) ? new URL(value) : undefined;
    return url !== undefined && url.search === '' && url.hash === '' && url.username === '' && url.password === '';
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
const URL_SHAPE = 'an http(s) URL without a query or a user name';
const API_URL_SHAPE = 'an https URL (http only on 127.0.0.1, [::1] or localhost) without a query or a user name';

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
  // Quoted without any user:password@ in it (a review: a refused URL printed its password).
  if (!schema.safeParse(value).success) throw new ArgumentsError(shown`${source} must be ${shape}, got "${value.replace(/\/\/[^/?#]*@/, '//…@').slice(0, 200)}"`);
  return value;
}

/** The region of a remote connection: --region, else AWS_REGION, else AWS_DEFAULT_REGION. */
function regionOf(flag: string | undefined, env: Environment): string {
  if (flag !== undefined) return flag;
  for (const name of ['AWS_REGION', 'AWS_DEFAULT_REGION'] as const) {
    const region = checked('region', env[name] || undefined, name);
    if (region !== undefined) return region;
  }
  throw new ArgumentsError('no region to sign for (the stack\'s region): pass --region R, or set AWS_REGION');
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
  if (stack !== undefined && apiUrl !== undefined) throw new ArgumentsError('give --stack NAME or --api-url URL, not both');
  if (stack === undefined && apiUrl === undefined) {
    if (queueUrl !== undefined || region !== undefined) {
      throw new ArgumentsError('--queue-url and --region go with --api-url URL (or --stack NAME); without either, the local platform is used');
    }
    return { kind: 'local' };
  }
  if (stack !== undefined) {
    if (queueUrl !== undefined) throw new ArgumentsError('--stack gives the dispatch queue (its output DispatchQueueUrl): leave out --queue-url');
    return { kind: 'stack', stack, region: regionOf(region, env) };
  }
  // A function URL is printed with a trailing slash; every route is appended to it.
  return { kind: 'api', apiUrl: (apiUrl ?? '').replace(/\/+$/, ''), ...(queueUrl === undefined ? {} : { dispatchQueueUrl: queueUrl }), region: regionOf(region, env) };
}

/**
 * An SQS client for a deployed stack's queues: the region, the default credential chain, and the
 * SDK's own endpoint resolution (AWS_ENDPOINT_URL_SQS redirects it) — requests go to that endpoint,
 * never to a queue URL's host.
 */
export function remoteQueueClient(region?: string): SQSClient {
  return new SQSClient({ ...(region === undefined ? {} : { region }), useQueueUrlAsEndpoint: false });
}

/** An SQS client for the local platform's queues (fauxqs). */
export function localQueueClient(info: LocalInfo): SQSClient {
  return new SQSClient({ region: LOCAL_REGION, endpoint: info.sqsEndpoint, credentials: LOCAL_CREDENTIALS });
}

/** Who a command speaks as: an origin (`--origin`, else $LEDGER_ORIGIN, else "planner"), for the routes of §2 that name one. */
export interface Speaker {
  readonly origin?: string | undefined;
}

/** How a command reaches its ledger: `connect`, or a stand-in for it in a test. */
export type Connect = (values: ConnectionValues, as?: Speaker) => Promise<LedgerClient>;

/** The client options a connection names. */
export function clientOptions(connection: Connection, as: Speaker = {}): LedgerClientOptions {
  const origin = originOf(as.origin);
  switch (connection.kind) {
    case 'local':
      return { origin, local: localInfo() };
    case 'api':
      return { origin, apiUrl: connection.apiUrl, region: connection.region, ...(connection.dispatchQueueUrl === undefined ? {} : { queueUrl: connection.dispatchQueueUrl }) };
    case 'stack':
      return { origin, stack: connection.stack, region: connection.region };
  }
}

/**
 * The ledger a command talks to: `--stack NAME` (its CloudFormation outputs), `--api-url URL`
 * (`--queue-url URL` to send), else the local platform — as `as.origin` (remotely, whoever the default
 * credential chain says; the operator's routes are called as the operator).
 *
 * @example
 * const ledger = await connect({ stack: 'DispatchLedger', region: 'eu-west-1' }, { origin: 'planner' });
 * const view = await ledger.check('d-1');
 */
export async function connect(values: ConnectionValues, as: Speaker = {}, env: Environment = process.env): Promise<LedgerClient> {
  return createLedgerClient(clientOptions(resolveConnection(values, env), as));
}
