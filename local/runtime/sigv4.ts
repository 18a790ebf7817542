import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { sigv4Signer, type AwsCredentialsProvider } from '@dispatch-ledger/worker';
import type { Principal } from '../../shared/principals/principals.js';

/**
 * AWS Signature Version 4 on the local API (`ledger local up --sigv4`, CONTRACT §2 v2): the checks a
 * Lambda function URL with AWS_IAM auth makes before it invokes the function, and the signing side
 * the local callers (the demo agent, tests) use. Both sides compute the signature with
 * `@smithy/signature-v4`, the SDK's own signer: the verifier signs the request it received again,
 * with the secret of the access key it names, and compares the two signatures.
 */

/** The deployed API is a Lambda function URL with AWS_IAM auth: requests are signed for `lambda`. */
export const SIGV4_SERVICE = 'lambda';
/** AWS refuses a signature dated more than 15 minutes off its own clock. */
export const MAX_CLOCK_SKEW_MS = 15 * 60_000;
/** The account the local platform pretends to be (the HTTP API's `requestContext.accountId`). */
export const LOCAL_ACCOUNT_ID = '000000000000';

const ALGORITHM = 'AWS4-HMAC-SHA256';
const AMZ_DATE = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;

export interface SigningCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  /** Temporary credentials (a role session) carry one; it is sent, and signed, as X-Amz-Security-Token. */
  readonly sessionToken?: string;
}

/** One caller of the local API: its keys and who the principal registry says it is. */
export interface LocalCredential extends SigningCredentials {
  /** The id registered in the principal registry: an IAM user id (`AIDA…`) or a role id (`AROA…`). */
  readonly principalId: string;
  /**
   * The caller as the IAM request context names it (`authorizer.iam.userId`): the user id, or
   * `roleId:session` for a role session, which the registry resolves through its role id.
   */
  readonly userId: string;
  readonly userArn: string;
  readonly principal: Principal;
}

/** The platform's callers in --sigv4 mode: the operator, each origin and each target by name. */
export interface LocalCredentials {
  readonly operator: LocalCredential;
  readonly origins: Readonly<Record<string, LocalCredential>>;
  readonly targets: Readonly<Record<string, LocalCredential>>;
}

/** Every credential of a set, operator first. */
export function allCredentials(credentials: LocalCredentials): LocalCredential[] {
  return [credentials.operator, ...Object.values(credentials.origins), ...Object.values(credentials.targets)];
}

/** A fresh role-session credential for one target (a worker's, added while a --sigv4 platform runs). */
export function targetCredential(target: string): LocalCredential {
  const credential = createLocalCredentials({ origins: [], targets: [target] }).targets[target];
  if (!credential) throw new Error(`no credential made for target ${target}`);
  return credential;
}

/** IAM ids are upper-case base32. */
function iamId(prefix: string, length: number): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  return prefix + [...randomBytes(length)].map((byte) => alphabet[byte % 32]).join('');
}

/**
 * Fresh credentials for a platform run: an IAM user each for the operator and the origins (long-term
 * `AKIA…` keys), and a role session each for the targets (`ASIA…` keys with a session token), as a
 * worker running on Lambda or ECS would hold.
 *
 * @example
 * const credentials = createLocalCredentials({ origins: ['planner'], targets: ['demo-agent'] });
 * credentials.origins.planner?.principal // { role: 'origin', origin: 'planner' }
 */
export function createLocalCredentials(names: { readonly origins: readonly string[]; readonly targets: readonly string[] }): LocalCredentials {
  const user = (name: string, principal: Principal): LocalCredential => {
    const userId = iamId('AIDA', 17);
    return {
      accessKeyId: iamId('AKIA', 16),
      secretAccessKey: randomBytes(30).toString('base64'),
      principalId: userId,
      userId,
      userArn: `arn:aws:iam::${LOCAL_ACCOUNT_ID}:user/local/${name}`,
      principal,
    };
  };
  const roleSession = (name: string, principal: Principal): LocalCredential => {
    const roleId = iamId('AROA', 17);
    return {
      accessKeyId: iamId('ASIA', 16),
      secretAccessKey: randomBytes(30).toString('base64'),
      sessionToken: randomBytes(96).toString('base64'),
      principalId: roleId,
      userId: `${roleId}:${name}`,
      userArn: `arn:aws:sts::${LOCAL_ACCOUNT_ID}:assumed-role/local-${name}/${name}`,
      principal,
    };
  };
  return {
    operator: user('operator', { role: 'operator' }),
    origins: Object.fromEntries(names.origins.map((origin) => [origin, user(`origin-${origin}`, { role: 'origin', origin })])),
    targets: Object.fromEntries(names.targets.map((target) => [target, roleSession(target, { role: 'target', target })])),
  };
}

/** `requestContext.authorizer` of a function URL (or HTTP API) with AWS_IAM auth, as AWS fills it. */
export interface IamAuthorizerContext {
  readonly iam: {
    readonly accessKey: string;
    readonly accountId: string;
    readonly callerId: string;
    readonly cognitoIdentity: null;
    readonly principalOrgId: string | null;
    readonly userArn: string;
    readonly userId: string;
  };
}

export function iamAuthorizer(credential: LocalCredential): IamAuthorizerContext {
  return {
    iam: {
      accessKey: credential.accessKeyId,
      accountId: LOCAL_ACCOUNT_ID,
      callerId: credential.userId,
      cognitoIdentity: null,
      principalOrgId: null,
      userArn: credential.userArn,
      userId: credential.userId,
    },
  };
}

/** A request as the server received it. */
export interface ReceivedRequest {
  readonly method: string;
  /** The path exactly as sent, still percent-encoded. */
  readonly rawPath: string;
  readonly rawQueryString: string;
  /** Lower-case names. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Uint8Array;
}

export type Verification =
  | { readonly kind: 'verified'; readonly credential: LocalCredential }
  | { readonly kind: 'refused'; readonly reason: string };

export type SigV4Verify = (request: ReceivedRequest) => Promise<Verification>;

export interface SigV4VerifierOptions {
  readonly region: string;
  /**
   * The callers it knows; a function is asked at every request (a caller added or removed while the
   * platform runs: `ledger local target add`/`remove` under --sigv4), and its list indexed again when it
   * gives another list.
   */
  readonly credentials: Iterable<LocalCredential> | (() => Iterable<LocalCredential>);
  /** @default 'lambda' */
  readonly service?: string;
  /** The server's clock. @default () => new Date() */
  readonly now?: () => Date;
}

/**
 * A verifier of SigV4 `Authorization` headers for the given callers. It refuses, with a reason, what
 * AWS refuses: no signature, another algorithm or scope, a date more than 15 minutes off, an unknown
 * access key, a session token that is not the key's, a body that does not match its
 * x-amz-content-sha256, and a signature that is not the one the key's secret gives.
 *
 * @example
 * const verify = sigV4Verifier({ region: 'us-east-1', credentials: allCredentials(credentials) });
 * const verdict = await verify({ method: 'GET', rawPath: '/dispatches/d-1', rawQueryString: '', headers, body: new Uint8Array() });
 * if (verdict.kind === 'verified') verdict.credential.principal; // { role: 'origin', origin: 'planner' }
 */
export function sigV4Verifier(options: SigV4VerifierOptions): SigV4Verify {
  const service = options.service ?? SIGV4_SERVICE;
  const now = options.now ?? (() => new Date());
  const byAccessKey = new Map<string, LocalCredential>();
  let listed: Iterable<LocalCredential> | undefined;
  // Asked at every request (regression: only for an unknown key, so a key taken away stayed valid until
  // restart); the list is indexed again only when it is another list (callersOf keeps one per file change).
  const credentialOf = (accessKeyId: string): LocalCredential | undefined => {
    const list = typeof options.credentials === 'function' ? options.credentials() : options.credentials;
    if (list !== listed) {
      byAccessKey.clear();
      for (const credential of list) byAccessKey.set(credential.accessKeyId, credential);
      listed = list;
    }
    return byAccessKey.get(accessKeyId);
  };

  return async (request) => {
    const refused = (reason: string): Verification => ({ kind: 'refused', reason });
    const { headers } = request;
    const authorization = headers.authorization;
    if (authorization === undefined) return refused('the request is not signed: SigV4 (an Authorization header) is required');
    const parsed = parseAuthorization(authorization);
    if (!parsed) return refused(`the Authorization header is not ${ALGORITHM} with Credential, SignedHeaders and Signature`);

    const amzDate = headers['x-amz-date'];
    const signingDate = amzDate === undefined ? undefined : parseAmzDate(amzDate);
    if (!signingDate) return refused('X-Amz-Date is missing or not of the form YYYYMMDDTHHMMSSZ');
    const [accessKeyId, scopeDate, scopeRegion, scopeService, terminator, ...extra] = parsed.credential.split('/');
    if (extra.length > 0 || terminator !== 'aws4_request' || scopeDate !== amzDate?.slice(0, 8)) {
      return refused('the credential scope is not <key>/<X-Amz-Date day>/<region>/<service>/aws4_request');
    }
    if (scopeRegion !== options.region) return refused(`the credential scope names region "${scopeRegion}"; this API is in ${options.region}`);
    if (scopeService !== service) return refused(`the credential scope names service "${scopeService}"; this API signs for ${service}`);
    if (Math.abs(now().getTime() - signingDate.getTime()) > MAX_CLOCK_SKEW_MS) {
      return refused('the signature has expired or is not yet valid: X-Amz-Date is more than 15 minutes off the server clock');
    }

    const credential = accessKeyId === undefined ? undefined : credentialOf(accessKeyId);
    if (!credential) return refused('the access key is not known to this API');
    const token = headers['x-amz-security-token'];
    if (!sameToken(token, credential.sessionToken)) return refused('X-Amz-Security-Token is not the session token of this access key');

    const contentSha256 = headers['x-amz-content-sha256'];
    if (contentSha256 !== undefined) {
      if (!SHA256_HEX.test(contentSha256)) return refused('x-amz-content-sha256 must be the hex SHA-256 of the body (the payload must be signed)');
      if (createHash('sha256').update(request.body).digest('hex') !== contentSha256) return refused('the body does not match its signed payload hash (x-amz-content-sha256)');
    }

    const signedHeaders = parsed.signedHeaders.split(';');
    for (const required of ['host', 'x-amz-date', ...(token === undefined ? [] : ['x-amz-security-token'])]) {
      if (!signedHeaders.includes(required)) return refused(`SignedHeaders must include ${required}`);
    }
    const toSign: Record<string, string> = {};
    for (const name of signedHeaders) {
      const value = headers[name];
      if (value === undefined) return refused(`the signed header ${name} is not in the request`);
      // The signer adds these two itself, from the signing date and the credentials.
      if (name !== 'x-amz-date' && name !== 'x-amz-security-token') toSign[name] = value;
    }

    // A signed x-amz-content-sha256 (checked against the body above) is in toSign and is the payload hash;
    // without one the signer hashes the body itself, and must not add the header the client did not sign.
    const signer = new SignatureV4({
      service,
      region: options.region,
      credentials: { accessKeyId: credential.accessKeyId, secretAccessKey: credential.secretAccessKey, ...(credential.sessionToken ? { sessionToken: credential.sessionToken } : {}) },
      sha256: Hash.bind(null, 'sha256'),
      applyChecksum: false,
    });
    const resigned = await signer.sign(
      {
        method: request.method,
        protocol: 'http:',
        hostname: '127.0.0.1',
        path: request.rawPath,
        query: queryOf(request.rawQueryString),
        headers: toSign,
        body: request.body,
      },
      { signingDate, signableHeaders: new Set(signedHeaders) },
    );
    const expected = parseAuthorization(String(resigned.headers.authorization ?? ''));
    if (!expected || expected.signedHeaders !== parsed.signedHeaders) return refused('the signed headers cannot be reproduced (sign lower-case names, sorted, and not Date)');
    if (!sameText(expected.signature, parsed.signature)) {
      return refused('the request signature does not match the one computed with the secret of this access key');
    }
    return { kind: 'verified', credential };
  };
}

/** The query as the signer takes it: decoded, a repeated name as a list. */
function queryOf(rawQueryString: string): Record<string, string | string[]> {
  const query: Record<string, string | string[]> = {};
  for (const [name, value] of new URLSearchParams(rawQueryString)) {
    const seen = query[name];
    query[name] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
  }
  return query;
}

function parseAuthorization(header: string): { credential: string; signedHeaders: string; signature: string } | undefined {
  if (!header.startsWith(`${ALGORITHM} `)) return undefined;
  const fields = new Map<string, string>();
  for (const part of header.slice(ALGORITHM.length + 1).split(',')) {
    const at = part.indexOf('=');
    if (at > 0) fields.set(part.slice(0, at).trim(), part.slice(at + 1).trim());
  }
  const credential = fields.get('Credential');
  const signedHeaders = fields.get('SignedHeaders');
  const signature = fields.get('Signature');
  return credential && signedHeaders && signature ? { credential, signedHeaders, signature } : undefined;
}

function parseAmzDate(value: string): Date | undefined {
  if (!AMZ_DATE.test(value)) return undefined;
  const iso = value.replace(AMZ_DATE, '$1-$2-$3T$4:$5:$6.000Z');
  const date = new Date(iso);
  // A date that does not exist (20240231T…) does not read back the same.
  return !Number.isNaN(date.getTime()) && date.toISOString() === iso ? date : undefined;
}

/** A long-term key carries no session token; a session's key only its own. */
function sameToken(sent: string | undefined, expected: string | undefined): boolean {
  return sent === undefined || expected === undefined ? sent === expected : sameText(sent, expected);
}

/** Constant-time equality, so a guess learns nothing from how long the comparison took. */
function sameText(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/**
 * How a caller signs: its credentials — fixed, or a provider such as the SDK's default chain
 * (`defaultProvider()`, what the CLI uses against a deployed stack) — and the API's region (service
 * `lambda` unless given).
 */
export interface SigV4Signing {
  readonly credentials: SigningCredentials | AwsCredentialsProvider;
  readonly region: string;
  /** @default 'lambda' */
  readonly service?: string;
}

/** A request to sign: fetch's method and headers, and a body already in hand (a stream cannot be hashed up front). */
export interface SignableInit {
  readonly method?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string | Uint8Array;
}

/**
 * The headers that sign a request to `url` with SigV4 (Authorization, X-Amz-Date,
 * x-amz-content-sha256, X-Amz-Security-Token for a session), with the request's own headers. `host`
 * is signed but left out of the answer: fetch sets it from the URL. The signing is the worker kit's
 * `sigv4Signer`, so the ledger's own callers and a kit-built worker sign the same way.
 */
export async function signedHeaders(url: string | URL, init: SignableInit, signing: SigV4Signing, signingDate: Date = new Date()): Promise<Record<string, string>> {
  const sign = sigv4Signer({ region: signing.region, service: signing.service ?? SIGV4_SERVICE, credentials: signing.credentials, now: () => signingDate });
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(init.headers ?? {})) headers[name.toLowerCase()] = value;
  const { host: _host, ...rest } = await sign({
    method: (init.method ?? 'GET').toUpperCase(),
    url: String(url),
    headers,
    ...(init.body === undefined ? {} : { body: init.body }),
  });
  return rest;
}

/**
 * fetch, signed with SigV4 at the moment of sending (each retry gets a fresh date). A redirect is an
 * error, never followed: fetch would resend the signature and `x-amz-security-token` to wherever the
 * Location points, another origin or plain http included; the ledger's API never redirects.
 *
 * @example
 * await signedFetch(`${apiUrl}/dispatches/d-1`, { method: 'GET' }, { credentials: planner, region: 'us-east-1' });
 */
export async function signedFetch(url: string | URL, init: SignableInit & Omit<RequestInit, 'method' | 'headers' | 'body'>, signing: SigV4Signing): Promise<Response> {
  const headers = await signedHeaders(url, init, signing);
  return fetch(url, { ...init, headers, redirect: 'error' });
}
