/**
 * `@dispatch-ledger/client`: the typed client for origins and operators (docs/protocol.md §15), built on
 * the protocol's route table and answers.
 */
export { createLedgerClient, type DispatchRequest, type Endpoints, type LedgerClient, type RawCall } from './client.js';
export type { ClaimOptions, DeliverHandler, DeliverOutcome } from './deliver.js';
export type { CallAs, LedgerClientOptions, LocalEndpoints, StackDescription } from './connection.js';
export { localStateDir } from './connection.js';
export {
  isLedgerApiError,
  isLedgerConfigError,
  isLedgerNetworkError,
  isLedgerProtocolError,
  isLedgerValidationError,
  LedgerApiError,
  LedgerConfigError,
  LedgerNetworkError,
  LedgerProtocolError,
  LedgerValidationError,
} from './errors.js';
export type { CallOptions, DispatchListing, Listing, Page, RawAnswer } from './transport.js';
export type { AttentionEntry, Claim, ClaimedResult, DispatchView, HistoryEntry, InboxEntry, Rejection, SettledResult } from '@dispatch-ledger/protocol/answers';
