/**
 * @dispatch-ledger/worker — the worker kit (CONTRACT §12): `createWorker({ name, run })` serves the
 * Dispatch Ledger's `http` target protocol (§8), keeps run state in a store, numbers events per run and
 * calls the ledger back (signed, when a signer is given), retrying what the ledger is not ready for yet.
 */
export { createWorker, readRequestText, type RequestText, type ListeningWorker, type OpenWorker, type Worker, type WorkerAnswer, type WorkerOptions, type WorkerRequest } from './server.js';
export { RunCancelledError, type RunContext, type RunIdentity, type RunFunction, type RunOutput } from './run-api.js';
export { StoreLockedError } from './store-lock.js';
export { fileStore, memoryStore, StoreReadError, type CreateOutcome, type FileStoreOptions, type ListedRecords, type RunStore } from './store.js';
export type { CommonWorkerOptions } from './options.js';
export { sigv4Signer, type AwsCredentials, type AwsCredentialsProvider, type SignableRequest, type Signer, type Sigv4SignerOptions } from './signer.js';
export { DEFAULT_RETRY, fetchTransport, type RetryPolicy, type Transport } from './callbacks.js';
export { refProblem, isSafeRef, MAX_REF_BYTES, type RefProblem } from '@dispatch-ledger/protocol';
export type { Clock, HeartbeatDecision, Timer } from './heartbeat.js';
export {
  CallbackError,
  EvidenceTooLargeError,
  ResultRefusedError,
  RunEndedError,
  UnsafeRefError,
  type Decision,
  type Log,
  type LogLine,
  type RunEvent,
  type RunRecord,
  type RunResult,
  type RunStatus,
  type RunView,
} from './model.js';
