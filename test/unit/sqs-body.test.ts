import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sqsBody } from '@dispatch-ledger/protocol/message';

/**
 * The text a dispatch message goes to a queue as. Regression: the client sent JSON.stringify's text
 * as it was — SQS refuses U+FFFE and U+FFFF, and the local platform's queue every character outside
 * the Basic Multilingual Plane (an emoji), each a LedgerNetworkError for a message the ledger would take.
 */

/** SQS's characters (#x9 | #xA | #xD | #x20–#xD7FF | #xE000–#xFFFD | #x10000–#x10FFFF), and the local queue's (without the last range). */
const SQS_REFUSES = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;
const LOCAL_QUEUE_REFUSES = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD]/;

describe('sqsBody', () => {
  it('escapes what SQS refuses and keeps an emoji raw; for the local queue, the emoji too', () => {
    const json = JSON.stringify({ note: 'go 🚀 \uffff\ufffe 東京' });
    expect(sqsBody(json)).toBe('{"note":"go 🚀 \\uffff\\ufffe 東京"}');
    expect(sqsBody(json, { localQueue: true })).toBe('{"note":"go \\ud83d\\ude80 \\uffff\\ufffe 東京"}');
  });

  it('is the same JSON value, in a text each queue takes, for any value JSON.stringify writes', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 3 }), fc.dictionary(fc.string({ unit: 'binary', maxLength: 40 }), fc.string({ unit: 'binary', maxLength: 40 })), (value, strings) => {
        const json = JSON.stringify({ value, strings });
        for (const [body, refuses] of [
          [sqsBody(json), SQS_REFUSES],
          [sqsBody(json, { localQueue: true }), LOCAL_QUEUE_REFUSES],
        ] as const) {
          expect(refuses.test(body)).toBe(false);
          expect(JSON.parse(body)).toEqual(JSON.parse(json));
        }
      }),
      { numRuns: 300 },
    );
  });
});
