import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, readdir, readFile, rename, link, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { NATIVE_STATUS } from '@dispatch-ledger/protocol';
import { isPlainObject } from './parse.js';
import { lockDir, StoreLockedError } from './store-lock.js';
import { RUN_STATUSES, clipForMessage, type RunRecord, type RunStatus } from './model.js';

/**
 * Where the kit keeps run state (CONTRACT §12: "a pluggable store; a file store for local workers").
 * A store only holds records; the kit decides what goes in them. One live worker per store: two
 * processes driving the same runs would each number events on their own.
 */
export interface RunStore {
  /**
   * Writes a new record unless one already exists under its runId, atomically: of two concurrent
   * creates of one runId (in this process or another), exactly one is `created`.
   */
  create(record: RunRecord): Promise<CreateOutcome>;
  /** The record under `runId`, or undefined if the store never had it. */
  get(runId: string): Promise<RunRecord | undefined>;
  /** Replaces the record whole (never half-written: a reader sees the old one or the new one). */
  put(record: RunRecord): Promise<void>;
  /** Every record the store holds, and what it could not read (reported, never guessed at). */
  list(): Promise<ListedRecords>;
  /**
   * Takes the store for one live worker, before it recovers anything: a store another live process holds
   * is a StoreLockedError (its live runs would be reported failed as if that process had died). Optional
   * for a store of your own; the file store's lock is per machine (store-lock.ts), the memory store's per
   * instance.
   */
  lock?(): Promise<{ release(): Promise<void> }>;
}

export type CreateOutcome = { readonly kind: 'created' } | { readonly kind: 'exists'; readonly existing: RunRecord };

export interface ListedRecords {
  readonly records: readonly RunRecord[];
  readonly unreadable: readonly { readonly where: string; readonly reason: string }[];
}

// --- The record codec -----------------------------------------------------------------------------------

const STATUSES: ReadonlySet<string> = new Set<string>(RUN_STATUSES);

const isString = (value: unknown): value is string => typeof value === 'string';
const isStringArray = (value: unknown): value is string[] => Array.isArray(value) && value.every(isString);
const isCount = (value: unknown, min: number): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value >= min;

/**
 * Reads a stored value back as a record, or says why it is not one. Checked field by field: a record
 * written by another kit version, or edited by hand, is reported instead of being trusted.
 */
export function decodeRecord(value: unknown): { readonly ok: true; readonly record: RunRecord } | { readonly ok: false; readonly reason: string } {
  const no = (reason: string) => ({ ok: false, reason }) as const;
  if (!isPlainObject(value)) return no('not a JSON object');
  if (value['v'] !== 1) return no(`unknown record version ${JSON.stringify(value['v'])}`);
  for (const field of ['runId', 'idempotencyKey', 'dispatchId', 'origin', 'callbackUrl', 'owner', 'createdAt', 'updatedAt'] as const) {
    if (!isString(value[field])) return no(`${field} is not a string`);
  }
  if (!isCount(value['attempt'], 1)) return no('attempt is not an integer >= 1');
  if (!isCount(value['nextSeq'], 0)) return no('nextSeq is not an integer >= 0');
  if (!isString(value['status']) || !STATUSES.has(value['status'])) return no('status is not a run status');
  if (value['nativeStatus'] !== undefined && !(isString(value['nativeStatus']) && NATIVE_STATUS.test(value['nativeStatus']))) return no('nativeStatus is not 1..64 of [A-Za-z0-9_.:-]');
  if (!isStringArray(value['evidence'])) return no('evidence is not a list of refs');
  if (!isStringArray(value['expectedEvidence'])) return no('expectedEvidence is not a list of refs');
  if (!isPlainObject(value['timeouts'])) return no('timeouts is not an object');
  const result = value['result'];
  if (result !== undefined && !(isPlainObject(result) && isString(result['summary']))) return no('result has no summary');
  const pending = value['pendingApproval'];
  if (pending !== undefined && !(isPlainObject(pending) && isString(pending['approvalId']) && isString(pending['requestedAt']))) return no('pendingApproval is malformed');
  const decision = value['decision'];
  if (decision !== undefined && !(isPlainObject(decision) && isString(decision['approvalId']) && (decision['decision'] === 'approve' || decision['decision'] === 'cancel'))) {
    return no('decision is malformed');
  }
  const report = value['finalReport'];
  if (report !== undefined && !(isPlainObject(report) && isCount(report['seq'], 0) && ['pending', 'delivered', 'refused'].includes(String(report['state'])))) {
    return no('finalReport is malformed');
  }
  // Every field has been checked above; this is the one place the shape is asserted.
  return { ok: true, record: value as unknown as RunRecord };
}

// --- The file store ---------------------------------------------------------------------------------------

/**
 * A name for the file of one run: the runId percent-encoded (readable in a listing), or its digest when
 * that would be longer than a file system takes.
 */
export function fileNameFor(runId: string): string {
  const encoded = encodeURIComponent(runId);
  return encoded.length <= 200 ? `${encoded}.json` : `h-${createHash('sha256').update(runId).digest('hex')}.json`;
}

export interface FileStoreOptions {
  /** The directory holding one JSON file per run; created if missing. */
  readonly dir: string;
}

/**
 * The default store for local workers: one JSON file per run under `dir`, each written to a temporary
 * file first, flushed, then moved into place — a rename replaces a file atomically, so a reader (or a
 * worker restarted after a crash) sees the old record or the new one, never half of one. A new record is
 * moved in with `link`, which fails if the name is taken: that is the create-if-absent.
 *
 * @example
 * const store = fileStore({ dir: '.worker-state/report-writer' });
 * const worker = createWorker({ name: 'report-writer', store, run: async () => ({ summary: 'done' }) });
 */
export function fileStore(options: FileStoreOptions): RunStore {
  const { dir } = options;
  let ready: Promise<unknown> | undefined;
  const ensureDir = () => (ready ??= mkdir(dir, { recursive: true }));
  const pathOf = (runId: string) => join(dir, fileNameFor(runId));

  /** Writes the record to a fresh temporary file in `dir` (same file system, so the move is a rename). */
  async function writeTemp(record: RunRecord): Promise<string> {
    await ensureDir();
    const temp = join(dir, `.${fileNameFor(record.runId)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
    const handle = await open(temp, 'wx', 0o600);
    try {
      await handle.writeFile(`${JSON.stringify(record)}\n`, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    return temp;
  }

  async function read(path: string, where: string): Promise<{ readonly kind: 'missing' } | { readonly kind: 'record'; readonly record: RunRecord } | { readonly kind: 'unreadable'; readonly reason: string }> {
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (error) {
      if (isCode(error, 'ENOENT')) return { kind: 'missing' };
      throw error;
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return { kind: 'unreadable', reason: `${where}: not JSON` };
    }
    const decoded = decodeRecord(value);
    return decoded.ok ? { kind: 'record', record: decoded.record } : { kind: 'unreadable', reason: `${where}: ${decoded.reason}` };
  }

  async function get(runId: string): Promise<RunRecord | undefined> {
    const found = await read(pathOf(runId), fileNameFor(runId));
    if (found.kind === 'missing') return undefined;
    if (found.kind === 'unreadable') throw new StoreReadError(found.reason);
    if (found.record.runId !== runId) throw new StoreReadError(`${fileNameFor(runId)} holds run ${clipForMessage(found.record.runId)}`);
    return found.record;
  }

  return {
    async create(record) {
      const temp = await writeTemp(record);
      try {
        await link(temp, pathOf(record.runId));
        return { kind: 'created' };
      } catch (error) {
        if (!isCode(error, 'EEXIST')) throw error;
        const existing = await get(record.runId);
        if (!existing) throw new StoreReadError(`${fileNameFor(record.runId)} exists but could not be read back`);
        return { kind: 'exists', existing };
      } finally {
        await unlink(temp).catch(() => undefined);
      }
    },
    get,
    async put(record) {
      const temp = await writeTemp(record);
      try {
        await rename(temp, pathOf(record.runId));
      } catch (error) {
        await unlink(temp).catch(() => undefined);
        throw error;
      }
    },
    lock: async () => {
      await ensureDir();
      return lockDir(dir);
    },
    async list() {
      await ensureDir();
      // A temporary file ends in .tmp; a run file may begin with a dot (a dispatch id may).
      const names = (await readdir(dir)).filter((name) => name.endsWith('.json')).sort();
      const records: RunRecord[] = [];
      const unreadable: { where: string; reason: string }[] = [];
      for (const name of names) {
        const found = await read(join(dir, name), name);
        if (found.kind === 'record') records.push(found.record);
        else if (found.kind === 'unreadable') unreadable.push({ where: name, reason: found.reason });
      }
      return { records, unreadable };
    },
  };
}

/** A record file that exists but cannot be read as a record. */
export class StoreReadError extends Error {
  override readonly name = 'StoreReadError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

function isCode(error: unknown, code: string): boolean {
  return error instanceof Error && 'code' in error && error.code === code;
}

// --- The memory store ---------------------------------------------------------------------------------------

/**
 * A store that lives as long as the process: for tests, and for workers that need no restart story.
 * Records are copied in and out, as a real store would.
 */
export function memoryStore(): RunStore & { readonly size: number } {
  const records = new Map<string, string>();
  const copy = (text: string): RunRecord => {
    const decoded = decodeRecord(JSON.parse(text));
    if (!decoded.ok) throw new StoreReadError(decoded.reason);
    return decoded.record;
  };
  let held = false;
  return {
    get size() {
      return records.size;
    },
    // One live worker per store here too: two workers of this process on one memory store would each report the other's live runs.
    async lock() {
      if (held) throw new StoreLockedError('another worker of this process holds this memory store: one live worker per store');
      held = true;
      return {
        release: async () => {
          held = false;
        },
      };
    },
    async create(record) {
      const existing = records.get(record.runId);
      if (existing !== undefined) return { kind: 'exists', existing: copy(existing) };
      records.set(record.runId, JSON.stringify(record));
      return { kind: 'created' };
    },
    async get(runId) {
      const text = records.get(runId);
      return text === undefined ? undefined : copy(text);
    },
    async put(record) {
      records.set(record.runId, JSON.stringify(record));
    },
    async list() {
      return { records: [...records.values()].map(copy), unreadable: [] };
    },
  };
}

/** The statuses a previous process may have left a run in, mid-way. */
export const UNFINISHED: ReadonlySet<RunStatus> = new Set<RunStatus>(['queued', 'running', 'waiting_for_approval']);
