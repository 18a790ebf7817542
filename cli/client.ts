import { dirname } from 'node:path';
import { SQSClient, SendMessageCommand } from '@aws-sdk/client-sqs';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../local/engines/index.js';
import { stateDir } from '../local/paths.js';
import { readCredentials, type LocalInfo } from '../local/state.js';
import { signedFetch } from '../local/runtime/sigv4.js';
import { LocalPlatformError, runningState } from './local.js';

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
} as const;

export interface ConnectionValues {
  readonly stack?: string | undefined;
  readonly 'api-url'?: string | undefined;
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

/**
 * The local platform as `origin`: the `X-Ledger-Origin` header, or — when it runs with `--sigv4` (its
 * info names a credentials file) — signed with that origin's credential (the operator's for operator
 * routes), as a caller in AWS signs.
 */
export function localClient(info: LocalInfo = localInfo()): LedgerClient {
  const call = async (method: 'GET' | 'POST', path: string, body: unknown, options: CallOptions): Promise<ApiAnswer> => {
    const origin = originOf(options.origin);
    const asOperator = options.operator === true || OPERATOR_ROUTES.test(path);
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string> = { ...(payload === undefined ? {} : { 'content-type': 'application/json' }), ...(asOperator ? {} : { 'x-ledger-origin': origin }) };
    const init = { method, headers, ...(payload === undefined ? {} : { body: payload }) };
    const signing = info.credentialsFile ? readCredentials(dirname(info.credentialsFile)) : undefined;
    if (!signing) return answerOf(await fetch(`${info.apiUrl}${path}`, init));
    const credential = asOperator ? signing.credentials.operator : signing.credentials.origins[origin];
    if (!credential) throw new LocalPlatformError(`no credential for origin "${origin}" under --sigv4 (there are: ${Object.keys(signing.credentials.origins).join(', ')})`);
    return answerOf(await signedFetch(`${info.apiUrl}${path}`, init, { credentials: credential, region: signing.region, service: signing.service }));
  };
  return {
    apiUrl: info.apiUrl,
    remote: false,
    queues: { dispatchQueueUrl: info.dispatchQueueUrl, dlqUrl: info.dlqUrl },
    get: (path, options = {}) => call('GET', path, undefined, options),
    post: (path, body, options = {}) => call('POST', path, body, options),
    send: async (messageBody) => {
      const sqs = new SQSClient({ region: LOCAL_REGION, endpoint: info.sqsEndpoint, credentials: LOCAL_CREDENTIALS });
      try {
        const sent = await sqs.send(new SendMessageCommand({ QueueUrl: info.dispatchQueueUrl, MessageBody: messageBody }));
        return sent.MessageId ?? '';
      } finally {
        sqs.destroy();
      }
    },
  };
}

/**
 * The ledger a command talks to: `--stack NAME` (its CloudFormation outputs), `--api-url URL`, else the
 * local platform.
 */
export async function connect(values: ConnectionValues): Promise<LedgerClient> {
  if (values.stack !== undefined || values['api-url'] !== undefined) {
    throw new LocalPlatformError('--stack and --api-url are not supported yet');
  }
  return localClient();
}
