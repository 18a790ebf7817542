import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LocalCredential, LocalCredentials } from './runtime/sigv4.js';

/** The contract's `--json` line (CONTRACT §9), in its order. */
export interface LocalInfo {
  readonly region: string;
  readonly apiUrl: string;
  readonly dispatchQueueUrl: string;
  readonly dlqUrl: string;
  readonly sqsEndpoint: string;
  readonly dynamodbEndpoint: string;
  readonly s3Endpoint: string;
  readonly eventBridgeEndpoint: string;
  readonly eventBusName: string;
  readonly eventLog: string;
  readonly demoAgentUrl: string;
  /** `--sigv4` only: the file (mode 0600) holding the callers' credentials (LocalCredentialsFile). */
  readonly credentialsFile?: string;
}

/** What `<state>/credentials.json` holds in --sigv4 mode: how to sign, and as whom. */
export interface LocalCredentialsFile {
  readonly region: string;
  /** The SigV4 service name: `lambda`, the deployed API being a function URL with AWS_IAM auth. */
  readonly service: string;
  readonly credentials: LocalCredentials;
}

/** What `up` leaves for `down` and for the other CLI commands. */
export interface LocalState {
  readonly status: 'starting' | 'ready' | 'failed';
  /** The supervisor process: it owns the pollers, servers and engines. */
  readonly pid: number;
  readonly startedAt: string;
  readonly readyMs?: number;
  /** Every process `up` started, by role, supervisor included. `down` stops exactly these. */
  readonly pids: Readonly<Record<string, number>>;
  readonly info?: LocalInfo;
  /**
   * The status page the supervisor serves next to the API (`ledger ui`'s page, CONTRACT §13), as the URL
   * to open: it carries the page's per-start token, so this file is written mode 0600. Kept here, not in
   * `info`: the `--json` line's keys are fixed by CONTRACT §9.
   */
  readonly statusPageUrl?: string;
  readonly error?: string;
  /** The ledger table's name, for the CLI's `local target` commands (they register on the running platform). */
  readonly ledgerTable?: string;
  readonly logDir: string;
  readonly invocationLog: string;
}

export const stateFile = (dir: string): string => join(dir, 'state.json');

export function readState(dir: string): LocalState | undefined {
  const file = stateFile(dir);
  if (!existsSync(file)) return undefined;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as LocalState;
  } catch {
    return undefined;
  }
}

/**
 * Makes the state directory (it sits in the user's own project, `<cwd>/.ledger/local`) with a
 * `.gitignore` that keeps all of it out of git: it holds keys, tokens and target secrets.
 */
export function ensureStateDir(dir: string): void {
  mkdirSync(dir, { recursive: true });
  const ignore = join(dir, '.gitignore');
  if (!existsSync(ignore)) writeFileSync(ignore, '# Dispatch Ledger local state: keys, tokens and secrets. Never commit it.\n*\n');
}

/**
 * A JSON file of the state directory, written whole and then renamed (a reader never sees half a file),
 * readable by this user only from the moment it exists (mode 0600: these files hold tokens, keys, secrets).
 */
export function writePrivateJson(file: string, contents: unknown): void {
  writePrivateText(file, `${JSON.stringify(contents, null, 2)}\n`);
}

/** A text file of the state directory, written as writePrivateJson writes (whole, renamed, 0600). */
function writePrivateText(file: string, text: string): void {
  const partial = `${file}.${process.pid}.tmp`;
  rmSync(partial, { force: true });
  writeFileSync(partial, text, { mode: 0o600, flag: 'wx' });
  renameSync(partial, file);
}

/** The state `down` and the other commands read; it holds the status page's token. */
export function writeState(dir: string, state: LocalState): void {
  writePrivateJson(stateFile(dir), state);
}

export function clearState(dir: string): void {
  rmSync(stateFile(dir), { force: true });
}

/** The contract's JSON line: exactly its keys, in its order; with --sigv4, `credentialsFile` last. */
export function infoLine(info: LocalInfo): string {
  const { region, apiUrl, dispatchQueueUrl, dlqUrl, sqsEndpoint, dynamodbEndpoint, s3Endpoint, eventBridgeEndpoint, eventBusName, eventLog, demoAgentUrl, credentialsFile } = info;
  return JSON.stringify({
    region,
    apiUrl,
    dispatchQueueUrl,
    dlqUrl,
    sqsEndpoint,
    dynamodbEndpoint,
    s3Endpoint,
    eventBridgeEndpoint,
    eventBusName,
    eventLog,
    demoAgentUrl,
    ...(credentialsFile === undefined ? {} : { credentialsFile }),
  });
}

export const credentialsFile = (dir: string): string => join(dir, 'credentials.json');

/**
 * Writes the --sigv4 callers' credentials, readable by this user only (0600 from the moment the file
 * exists: it is created so, then renamed over any older one).
 */
export function writeCredentials(dir: string, contents: LocalCredentialsFile): string {
  const file = credentialsFile(dir);
  writePrivateJson(file, contents);
  return file;
}

/**
 * The --sigv4 callers as an AWS shared credentials file, beside credentials.json: a profile each —
 * `operator`, `origin-NAME`, `target-NAME` — so a worker or a script signing with the AWS SDK's default
 * chain runs as one with `AWS_SHARED_CREDENTIALS_FILE=<this file> AWS_PROFILE=target-NAME`.
 */
export const awsProfilesFile = (dir: string): string => join(dir, 'aws-credentials');

export function writeAwsProfiles(dir: string, credentials: LocalCredentials): string {
  const profile = (name: string, credential: LocalCredential): string =>
    [`[${name}]`, `aws_access_key_id = ${credential.accessKeyId}`, `aws_secret_access_key = ${credential.secretAccessKey}`, ...(credential.sessionToken ? [`aws_session_token = ${credential.sessionToken}`] : [])].join('\n');
  const profiles = [
    profile('operator', credentials.operator),
    ...Object.entries(credentials.origins).map(([name, credential]) => profile(`origin-${name}`, credential)),
    ...Object.entries(credentials.targets).map(([name, credential]) => profile(`target-${name}`, credential)),
  ];
  const file = awsProfilesFile(dir);
  writePrivateText(file, `# Dispatch Ledger local platform (--sigv4): this run's keys; gone at down.\n${profiles.join('\n\n')}\n`);
  return file;
}

/** The credentials of a platform running with --sigv4, or undefined. */
export function readCredentials(dir: string): LocalCredentialsFile | undefined {
  const file = credentialsFile(dir);
  if (!existsSync(file)) return undefined;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as LocalCredentialsFile;
  } catch {
    return undefined;
  }
}

export function clearCredentials(dir: string): void {
  rmSync(credentialsFile(dir), { force: true });
  rmSync(awsProfilesFile(dir), { force: true });
}
