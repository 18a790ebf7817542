import { setTimeout as sleep } from 'node:timers/promises';
import { PutEventsCommand, type EventBridgeClient, type PutEventsRequestEntry } from '@aws-sdk/client-eventbridge';
import type { DetailType, LedgerEvent } from '../events/catalog.js';
import { EVENT_SOURCE } from '../events/names.js';
import { PublishIncompleteError } from '../events/derive.js';

/**
 * The ledger's EventBridge bus: puts ledger events with `Source: dispatch-ledger`, all or throw.
 * Delivery is at least once: a retried call may put an event twice, and consumers deduplicate on
 * `detail.eventId`, which is stable.
 */

/** PutEvents takes at most 10 entries per call. */
export const MAX_ENTRIES_PER_CALL = 10;
/** EventBridge's limit for one entry, and for all the entries of one call together (256 KB). */
export const MAX_ENTRY_BYTES = 256 * 1024;

export interface EventBusOptions {
  readonly client: EventBridgeClient;
  readonly busName: string;
  /** Calls made for entries EventBridge reports as failed, the first one included. Default 3. */
  readonly maxAttempts?: number;
  /** Pause before the first retry of failed entries, doubled for each next one. Default 100 ms. */
  readonly backoffMs?: number;
}

export interface FailedEntry {
  /** Index of the event in the list given to `publish`. */
  readonly index: number;
  readonly eventId: string;
  readonly errorCode: string;
  readonly errorMessage: string;
}

/** Events EventBridge did not take, after the retries, or a PutEvents call that failed outright. */
export class EventPublishError extends PublishIncompleteError {
  override readonly name: string = 'EventPublishError';
  constructor(
    message: string,
    firstUnpublishedIndex: number,
    readonly failedEntries: readonly FailedEntry[],
    options?: { cause?: unknown },
  ) {
    super(message, firstUnpublishedIndex, options);
  }
}

/** An event over EventBridge's entry size limit: no retry makes it fit. */
export class EventTooLargeError extends PublishIncompleteError {
  override readonly name: string = 'EventTooLargeError';
  constructor(
    readonly index: number,
    readonly detailType: DetailType,
    readonly eventId: string,
    readonly bytes: number,
  ) {
    super(`${detailType} ${eventId} is ${bytes} bytes; EventBridge takes at most ${MAX_ENTRY_BYTES}`, index);
  }
}

/** The PutEvents entry of a ledger event. */
export function toEntry(event: LedgerEvent, busName: string): PutEventsRequestEntry {
  return { EventBusName: busName, Source: EVENT_SOURCE, DetailType: event.detailType, Detail: JSON.stringify(event.detail) };
}

/** An entry's size as EventBridge counts it: the UTF-8 bytes of Source, DetailType, Detail (and 14 for Time). */
export function entrySize(entry: PutEventsRequestEntry): number {
  const bytes = (text: string | undefined): number => (text === undefined ? 0 : Buffer.byteLength(text, 'utf8'));
  return (
    (entry.Time ? 14 : 0) +
    bytes(entry.Source) +
    bytes(entry.DetailType) +
    bytes(entry.Detail) +
    (entry.Resources ?? []).reduce((sum, resource) => sum + bytes(resource), 0)
  );
}

interface Pending {
  readonly index: number;
  readonly entry: PutEventsRequestEntry;
  readonly eventId: string;
}

/**
 * Puts the events on the bus, in calls of at most 10 entries and 256 KB. Entries EventBridge reports
 * as failed (`FailedEntryCount`) are sent again, up to `maxAttempts` calls with a doubling backoff;
 * if some still fail, or a call fails outright, it throws an EventPublishError saying which events are
 * known to be on the bus — so the stream batch is retried from there.
 *
 * @example
 * await publish(events, { client: new EventBridgeClient({}), busName: 'dispatch-ledger' });
 */
export async function publish(events: readonly LedgerEvent[], options: EventBusOptions): Promise<void> {
  const all: Pending[] = events.map((event, index) => ({ index, entry: toEntry(event, options.busName), eventId: event.detail.eventId }));
  let start = 0;
  while (start < all.length) {
    const batch: Pending[] = [];
    let batchBytes = 0;
    for (let index = start; index < all.length && batch.length < MAX_ENTRIES_PER_CALL; index += 1) {
      const pending = all[index] as Pending;
      const bytes = entrySize(pending.entry);
      if (bytes > MAX_ENTRY_BYTES) {
        // Send what precedes it first: those events are fine, and the caller learns exactly where it stopped.
        if (batch.length > 0) break;
        const event = events[index] as LedgerEvent;
        throw new EventTooLargeError(index, event.detailType, pending.eventId, bytes);
      }
      if (batchBytes + bytes > MAX_ENTRY_BYTES) break;
      batch.push(pending);
      batchBytes += bytes;
    }
    await putWithRetries(batch, options);
    start += batch.length;
  }
}

async function putWithRetries(batch: readonly Pending[], options: EventBusOptions): Promise<void> {
  const maxAttempts = options.maxAttempts ?? 3;
  const backoffMs = options.backoffMs ?? 100;
  let pending = batch;
  for (let attempt = 1; ; attempt += 1) {
    let failed: FailedEntry[];
    try {
      const response = await options.client.send(new PutEventsCommand({ Entries: pending.map((item) => item.entry) }));
      const results = response.Entries ?? [];
      failed = pending.flatMap((item, position) => {
        const result = results[position];
        // No result for an entry while some failed: nothing says it was taken.
        const missing = result === undefined && (response.FailedEntryCount ?? 0) > 0;
        if (!result?.ErrorCode && !missing) return [];
        return [{ index: item.index, eventId: item.eventId, errorCode: result?.ErrorCode ?? 'Unknown', errorMessage: result?.ErrorMessage ?? '' }];
      });
    } catch (error) {
      const first = pending[0];
      throw new EventPublishError(
        `PutEvents to ${options.busName} failed: ${error instanceof Error ? error.message : String(error)}`,
        first?.index ?? 0,
        [],
        { cause: error },
      );
    }
    if (failed.length === 0) return;
    if (attempt >= maxAttempts) {
      const first = failed[0] as FailedEntry;
      throw new EventPublishError(
        `${failed.length} event(s) not taken by ${options.busName} after ${attempt} attempts; first: ${first.errorCode} ${first.errorMessage}`.trim(),
        first.index,
        failed,
      );
    }
    await sleep(backoffMs * 2 ** (attempt - 1));
    const retry = new Set(failed.map((entry) => entry.index));
    pending = pending.filter((item) => retry.has(item.index));
  }
}
