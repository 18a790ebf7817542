import { InvalidSecurity, QueueDoesNotExist, RequestThrottled, SQSServiceException } from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { isLedgerApiError, isLedgerConfigError, isLedgerNetworkError } from '@dispatch-ledger/client';
import { queueError } from '../../packages/client/src/errors.js';

/*
 * What `dispatch` makes of an error the SDK threw while sending to the queue (docs/protocol.md §15): sure
 * it was refused (queue_refused), the caller's credentials refused (a config error), or unsure (a
 * network error: the message may be on the queue). Regression: a 4xx after the SDK had tried more than
 * once was called refused, though an earlier try may have queued the message before its answer was lost;
 * a transient 4xx (408) and an expired credential were called refused for good.
 */

const meta = (httpStatusCode: number, attempts = 1) => ({ httpStatusCode, attempts, requestId: 'req-1' });

describe('a dispatch the queue answered with an error', () => {
  it('is refused for sure when the queue answered its first and only try with a 4xx', () => {
    const error = queueError(new QueueDoesNotExist({ message: 'The specified queue does not exist.', $metadata: meta(400) }));
    expect(isLedgerApiError(error) && { status: error.status, code: error.code, retryable: error.retryable, details: error.details, requestId: error.requestId }).toEqual({
      status: 400,
      code: 'queue_refused',
      retryable: false,
      details: { queueError: 'QueueDoesNotExist' },
      requestId: 'req-1',
    });
  });

  it('is unsure after the SDK tried more than once: an earlier try may have queued it and lost its answer', () => {
    expect(isLedgerNetworkError(queueError(new QueueDoesNotExist({ message: 'gone', $metadata: meta(400, 2) })))).toBe(true);
  });

  it('is unsure for a throttle, a transient 4xx or a 5xx, which the SDK retries on its own', () => {
    expect(isLedgerNetworkError(queueError(new RequestThrottled({ message: 'slow down', $metadata: meta(403) })))).toBe(true);
    const timeout = new SQSServiceException({ name: 'RequestTimeout', $fault: 'client', message: 'timed out', $metadata: meta(408) });
    expect(isLedgerNetworkError(queueError(timeout))).toBe(true);
    // The SDK marks an error it deems worth another try with `$retryable`, whatever its name.
    const transient = Object.assign(new SQSServiceException({ name: 'SomethingNew', $fault: 'client', message: 'try again', $metadata: meta(400) }), { $retryable: {} });
    expect(isLedgerNetworkError(queueError(transient))).toBe(true);
    expect(isLedgerNetworkError(queueError(new SQSServiceException({ name: 'InternalError', $fault: 'server', message: 'oops', $metadata: meta(500) })))).toBe(true);
    expect(isLedgerNetworkError(queueError(new Error('socket hang up')))).toBe(true);
  });

  it('is a config error when the queue refused the caller’s credentials: sent again once they are mended, it is taken', () => {
    for (const name of ['ExpiredToken', 'InvalidClientTokenId', 'UnrecognizedClientException', 'SignatureDoesNotMatch']) {
      const error = queueError(new SQSServiceException({ name, $fault: 'client', message: 'no', $metadata: meta(403) }));
      expect(isLedgerConfigError(error), name).toBe(true);
      expect(String(error), name).toContain(name);
    }
    expect(isLedgerApiError(queueError(new InvalidSecurity({ message: 'use https', $metadata: meta(403) })))).toBe(true);
  });
});
