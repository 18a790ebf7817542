import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { SQSClient } from '@aws-sdk/client-sqs';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { sigv4Signer, type AwsCredentials, type AwsCredentialsProvider, type Signer } from '@dispatch-ledger/protocol/sigv4';
import { LedgerConfigError, LedgerNetworkError, noCredentials } from './errors.js';

/** Where the ledger is (docs/protocol.md §15): a deployed stack, its URLs, or the local platform. */
export interface LedgerClientOptions {
  /** The origin this caller speaks as (the routes of §2 that name one; `dispatch` sends it). */
  readonly origin?: string;
  /** A deployed stack: its outputs ApiUrl and DispatchQueueUrl (needs cloudformation:DescribeStacks). */
  readonly stack?: string;
  readonly region?: string;
  /** Or the deployed API and queue by URL. */
  readonly apiUrl?: string;
  readonly queueUrl?: string;
  /** The local platform: `true` finds it (`$LEDGER_STATE_DIR`, else `<cwd>/.ledger/local`); or its `--json` line's URLs. */
  readonly local?: true | LocalEndpoints;
  /** An SDK credential provider or fixed credentials; the default chain otherwise (AWS only). */
  readonly credentials?: AwsCredentials | AwsCredentialsProvider;
  /** The longest one call may take, then a LedgerNetworkError; an inbox long poll's is at least its wait plus 10 s. @default 60000 */
  readonly timeoutMs?: number;
}

/**
 * The local platform's endpoints, as its `--json` line (or its state file) gives them: `credentialsFile`
 * when it runs with `--sigv4` (calls are then signed with the credentials named there).
 */
export interface LocalEndpoints {
  readonly apiUrl: string;
  readonly dispatchQueueUrl: string;
  readonly sqsEndpoint: string;
  readonly dlqUrl?: string;
  readonly region?: string;
  readonly credentialsFile?: string;
}

/** A deployed stack as DescribeStacks answered it: its status and its outputs. */
export interface StackDescription {
  readonly name: string;
  readonly region: string;
  readonly status: string;
  readonly outputs: Readonly<Record<string, string>>;
}

/** Who a call goes out as: the origin, or the operator (the operator's routes). */
export type CallAs = 'origin' | 'operator';

export interface Connection {
  readonly apiUrl: string;
  readonly queueUrl: string | undefined;
  /** The dispatch queue's dead-letter queue, where known (the local platform's, a stack's output DeadLetterQueueUrl). */
  readonly dlqUrl: string | undefined;
  readonly local: boolean;
  /** The stack read, when connected through one. */
  readonly stack?: StackDescription;
  /** A new SQS client for the dispatch queue (the caller destroys it). */
  sqs(): SQSClient;
  /** The headers a call carries for `as`: a signer's, or the local `X-Ledger-Origin`. */
  authorize(as: CallAs, origin: string | undefined): { readonly signer?: Signer; readonly headers: Record<string, string> };
}

interface LocalCredential {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}
interface LocalCredentialsFile {
  readonly region: string;
  readonly service: string;
  readonly credentials: { readonly operator: LocalCredential; readonly origins: Readonly<Record<string, LocalCredential>> };
}
interface LocalState {
  readonly status?: string;
  readonly info?: LocalEndpoints;
}

/** The local engines accept any keys; these are never real ones. */
const LOCAL_KEYS = { accessKeyId: 'local', secretAccessKey: 'local' } as const;
const LOCAL_REGION = 'us-east-1';

const isLoopback = (url: URL): boolean => ['127.0.0.1', '[::1]', 'localhost'].includes(url.hostname);

/** A URL as an error may quote it: any `user:password@` taken out. */
const withoutUserInfo = (value: string): string => value.replace(/\/\/[^/?#]*@/, '//…@').slice(0, 200);

/**
 * An API URL: https, or http on this machine only (a signed request sent in the clear could be replayed),
 * and no user name or password — the calls are signed, so one is never needed, and it would only leak
 * (regression: taken, and quoted whole in the errors about the URL).
 */
function apiUrlOf(value: string, what: string): string {
  const url = URL.canParse(value) ? new URL(value) : undefined;
  if (url && (url.username !== '' || url.password !== '')) {
    throw new LedgerConfigError(`${what} must not carry a user name or password (the calls are signed with AWS credentials), got "${withoutUserInfo(value)}"`);
  }
  if (!url || !(url.protocol === 'https:' || (url.protocol === 'http:' && isLoopback(url))) || url.search !== '' || url.hash !== '') {
    throw new LedgerConfigError(`${what} must be an https URL (http only on 127.0.0.1, [::1] or localhost) without a query, got "${withoutUserInfo(value)}"`);
  }
  return value.replace(/\/+$/, '');
}

/**
 * A JSON file of the local platform's, or a LedgerConfigError that names it. A file that is not JSON is
 * never quoted: the parser's message repeats a piece of the text (Node 21 on), and a credentials file
 * holds a secret key.
 */
function readJson<T>(file: string, what: string): T {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new LedgerConfigError(`${what} could not be read at ${file}: ${error instanceof Error ? error.message : String(error)}`);
  }
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new LedgerConfigError(`${what} could not be read at ${file}: not JSON (its text is not repeated here: it may hold a secret)`);
  }
}

/**
 * Where `ledger local up` keeps the local platform's state (pids, endpoints, logs): `$LEDGER_STATE_DIR`,
 * else `<cwd>/.ledger/local`. The CLI and `local: true` both read it here.
 */
export function localStateDir(env: Readonly<Record<string, string | undefined>> = process.env, cwd: string = process.cwd()): string {
  const chosen = env['LEDGER_STATE_DIR'];
  return chosen ? resolve(chosen) : join(cwd, '.ledger', 'local');
}

/** The local platform as `ledger local up` left it: its state file, and its credentials under `--sigv4`. */
function localConnection(local: NonNullable<LedgerClientOptions['local']>): Connection {
  let info: LocalEndpoints;
  if (local === true) {
    const dir = localStateDir();
    const state = readJson<LocalState>(join(dir, 'state.json'), 'the local platform (start it with: npx ledger local up --detach)');
    if (state.status !== 'ready' || !state.info) throw new LedgerConfigError(`the local platform in ${dir} is not ready (${state.status ?? 'no status'})`);
    info = state.info;
  } else {
    info = local;
  }
  const region = info.region ?? LOCAL_REGION;
  const apiUrl = apiUrlOf(info.apiUrl, 'the local API URL');
  const signing = info.credentialsFile ? readJson<LocalCredentialsFile>(info.credentialsFile, 'the local platform’s credentials (--sigv4)') : undefined;
  return {
    apiUrl,
    queueUrl: info.dispatchQueueUrl,
    dlqUrl: info.dlqUrl,
    local: true,
    sqs: () => new SQSClient({ region, endpoint: info.sqsEndpoint, credentials: LOCAL_KEYS }),
    authorize(as, origin) {
      if (!signing) {
        const headers: Record<string, string> = {};
        if (as === 'origin' && origin) headers['x-ledger-origin'] = origin;
        return { headers };
      }
      const credential = as === 'operator' ? signing.credentials.operator : origin ? signing.credentials.origins[origin] : undefined;
      if (!credential) throw new LedgerConfigError(`no credential for origin "${origin ?? ''}" under --sigv4 (there are: ${Object.keys(signing.credentials.origins).join(', ')})`);
      return { signer: sigv4Signer({ region: signing.region, service: signing.service, credentials: credential }), headers: {} };
    },
  };
}

/** A deployed ledger: every call signed (service `lambda`, the API being a function URL with AWS_IAM auth). */
function remoteConnection(apiUrl: string, queueUrl: string | undefined, region: string, credentials: AwsCredentials | AwsCredentialsProvider, stack?: StackDescription): Connection {
  const signer = sigv4Signer({ region, credentials });
  return {
    apiUrl: apiUrlOf(apiUrl, stack ? `stack "${stack.name}": its output ApiUrl` : 'apiUrl'),
    queueUrl,
    dlqUrl: stack?.outputs['DeadLetterQueueUrl'],
    local: false,
    ...(stack ? { stack } : {}),
    sqs: () => new SQSClient({ region, credentials, useQueueUrlAsEndpoint: false }),
    authorize: () => ({ signer, headers: {} }),
  };
}

function regionOf(options: LedgerClientOptions): string {
  const region = options.region ?? process.env['AWS_REGION'] ?? process.env['AWS_DEFAULT_REGION'];
  if (!region) throw new LedgerConfigError('no region: pass { region }, or set AWS_REGION');
  return region;
}

/** The longest one call may take (an inbox long poll waits at most 20 s on the ledger's side): then it is a LedgerNetworkError. */
export const CALL_TIMEOUT_MS = 60_000;

/** The connection the options name (a stack's outputs are read once, here). */
export async function connectionOf(options: LedgerClientOptions): Promise<Connection> {
  const given = [options.local !== undefined && 'local', options.stack !== undefined && 'stack', options.apiUrl !== undefined && 'apiUrl'].filter(Boolean);
  if (given.length !== 1) throw new LedgerConfigError(`give exactly one of local, stack or apiUrl (got ${given.length === 0 ? 'none' : given.join(', ')})`);
  if (options.local !== undefined) return localConnection(options.local);
  const region = regionOf(options);
  const credentials = options.credentials ?? defaultProvider();
  if (options.apiUrl !== undefined) return remoteConnection(options.apiUrl, options.queueUrl, region, credentials);
  const cloudformation = new CloudFormationClient({ region, credentials });
  try {
    const name = options.stack ?? '';
    // Bounded like every call (regression: DescribeStacks had no bound, and a stalled network held the first call for ever).
    const { Stacks = [] } = await cloudformation.send(new DescribeStacksCommand({ StackName: name }), { abortSignal: AbortSignal.timeout(options.timeoutMs ?? CALL_TIMEOUT_MS) });
    const [found] = Stacks;
    if (!found) throw new LedgerConfigError(`no stack "${name}" in ${region}`);
    const outputs: Record<string, string> = {};
    for (const output of found.Outputs ?? []) if (output.OutputKey && output.OutputValue !== undefined) outputs[output.OutputKey] = output.OutputValue;
    const stack: StackDescription = { name, region, status: found.StackStatus ?? 'unknown', outputs };
    const apiUrl = outputs['ApiUrl'];
    if (!apiUrl) throw new LedgerConfigError(`stack "${name}" (${stack.status}) in ${region} has no output ApiUrl; it has: ${Object.keys(outputs).join(', ') || 'none'}`);
    return remoteConnection(apiUrl, outputs['DispatchQueueUrl'], region, credentials, stack);
  } catch (error) {
    if (error instanceof LedgerConfigError) throw error;
    // CloudFormation answers a stack it does not have with a ValidationError "Stack with id … does not exist".
    if (error instanceof Error && error.name === 'ValidationError' && /does not exist/.test(error.message)) throw new LedgerConfigError(`no stack "${options.stack ?? ''}" in ${region} (CloudFormation: ${error.message})`, { cause: error });
    const unsigned = noCredentials(error);
    if (unsigned) throw unsigned;
    const said = `reading stack "${options.stack ?? ''}" in ${region} (CloudFormation DescribeStacks) failed: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`;
    // No answer in time, a throttle, a 5xx: the next call asks again (a review: called a config error,
    // which says retrying changes nothing). An answer that refuses (access denied, say) is the setup's.
    const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
    if (status === undefined || status === 429 || status >= 500 || /throttl/i.test(error instanceof Error ? error.name : '')) throw new LedgerNetworkError(said, { cause: error });
    throw new LedgerConfigError(said, { cause: error });
  } finally {
    cloudformation.destroy();
  }
}
