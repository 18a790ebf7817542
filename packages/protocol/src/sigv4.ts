import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';

/**
 * Signing calls to the ledger's API with SigV4 (`@dispatch-ledger/protocol/sigv4`): the worker kit's
 * callbacks, uploads and task reads (CONTRACT §12) and the client's calls (§15) sign the same way. A
 * signer sees each request as it will go out and answers the headers to send with it.
 */

export interface SignableRequest {
  readonly method: string;
  /** The URL exactly as it will be requested (path already percent-encoded). */
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string | Uint8Array;
}

/** Answers the full set of headers to send with `request` (its own included). */
export type Signer = (request: SignableRequest) => Promise<Record<string, string>>;

export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
  readonly expiration?: Date;
}

export type AwsCredentialsProvider = () => Promise<AwsCredentials>;

export interface Sigv4SignerOptions {
  readonly region: string;
  /** The signing name the API verifies. @default 'lambda' (what `ledger local up --sigv4` verifies, and Lambda function URLs) */
  readonly service?: string;
  /** Fixed credentials or a provider. @default the SDK's default node credential chain (env, SSO, web identity, ini, process, IMDS/ECS) */
  readonly credentials?: AwsCredentials | AwsCredentialsProvider;
  /** The signing clock (a request dated more than 15 minutes off is refused). @default () => new Date() */
  readonly now?: () => Date;
}

/**
 * A SigV4 signer (`@smithy/signature-v4`, the AWS SDK's own): the path is signed as sent and
 * URI-encoded once more, as every AWS service but S3 expects; `host`, `x-amz-date`,
 * `x-amz-content-sha256` (the body's SHA-256) and, with temporary credentials, `x-amz-security-token`
 * are signed and sent.
 *
 * @example
 * const worker = createWorker({
 *   name: 'report-writer',
 *   run,
 *   signer: sigv4Signer({ region: 'eu-west-1' }), // credentials from the default chain
 * });
 */
export function sigv4Signer(options: Sigv4SignerOptions): Signer {
  if (options.region.trim() === '') throw new RangeError('sigv4Signer needs a region');
  const signer = new SignatureV4({
    service: options.service ?? 'lambda',
    region: options.region,
    credentials: options.credentials ?? defaultProvider(),
    sha256: Hash.bind(null, 'sha256'),
  });
  const now = options.now ?? (() => new Date());
  return async (request) => {
    const url = new URL(request.url);
    const query: Record<string, string | string[]> = {};
    for (const [name, value] of url.searchParams) {
      const seen = query[name];
      query[name] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
    }
    const signed = await signer.sign({
      method: request.method,
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port === '' ? {} : { port: Number(url.port) }),
      path: url.pathname,
      query,
      // `host` is what the connection will send (fetch derives it from the URL the same way).
      headers: { ...request.headers, host: url.host },
      ...(request.body === undefined ? {} : { body: request.body }),
    }, { signingDate: now() });
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(signed.headers)) headers[name.toLowerCase()] = String(value);
    return headers;
  };
}
