import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

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
  readonly error?: string;
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

/** Written whole, then renamed: a reader never sees half a file. */
export function writeState(dir: string, state: LocalState): void {
  const file = stateFile(dir);
  const partial = `${file}.${process.pid}.tmp`;
  writeFileSync(partial, `${JSON.stringify(state, null, 2)}\n`);
  renameSync(partial, file);
}

export function clearState(dir: string): void {
  rmSync(stateFile(dir), { force: true });
}

/** The contract's JSON line: exactly its keys, in its order. */
export function infoLine(info: LocalInfo): string {
  const { region, apiUrl, dispatchQueueUrl, dlqUrl, sqsEndpoint, dynamodbEndpoint, s3Endpoint, eventBridgeEndpoint, eventBusName, eventLog, demoAgentUrl } = info;
  return JSON.stringify({ region, apiUrl, dispatchQueueUrl, dlqUrl, sqsEndpoint, dynamodbEndpoint, s3Endpoint, eventBridgeEndpoint, eventBusName, eventLog, demoAgentUrl });
}
