import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isLedgerApiError, isLedgerProtocolError } from '@dispatch-ledger/client';
import { MAX_ANSWER_BYTES } from '../../packages/client/src/transport.js';
import { startFakeLedger, type FakeLedger, type PlannedAnswer } from '../support/fake-ledger.js';

/** The LedgerApiError a failed answer becomes (docs/protocol.md §15), on a fake ledger of loopback HTTP. */
let fake: FakeLedger;
let respond: ((path: string) => PlannedAnswer) | undefined;
beforeAll(async () => {
  fake = await startFakeLedger((path) => respond?.(path) ?? { status: 404, body: { error: { code: 'not_found', message: 'no plan' } } });
});
afterAll(() => fake.stop());
afterEach(() => {
  respond = undefined;
});

const thrown = (call: Promise<unknown>): Promise<unknown> => call.then(() => undefined, (error: unknown) => error);

describe('a failed answer as a LedgerApiError', () => {
  // Regression: `retryable` was true for any 5xx, whatever the route; a redispatch or a claim whose 5xx
  // may have taken effect, tried again as it is, starts a second attempt or holds more results unseen.
  it('is retryable on a 5xx only when the call is safe to repeat as it is', async () => {
    respond = () => ({ status: 503, body: { error: { code: 'unavailable', message: 'try later' } } });
    const redispatched = await thrown(fake.client.redispatch('d-1', { reason: 'lost run' }));
    const claimed = await thrown(fake.client.inbox.claim({ mode: 'inject' }));
    const checked = await thrown(fake.client.check('d-1'));
    expect([redispatched, claimed, checked].map((error) => isLedgerApiError(error) && [error.status, error.retryable])).toEqual([
      [503, false],
      [503, false],
      [503, true],
    ]);
    // A throttle was not taken at all: worth trying again, whatever the route.
    respond = () => ({ status: 429, body: { error: { code: 'throttled', message: 'slow down' } } });
    const throttled = await thrown(fake.client.redispatch('d-1', { reason: 'lost run' }));
    expect(isLedgerApiError(throttled) && throttled.retryable).toBe(true);
  });

  // Regression: an answer without the ledger's envelope (AWS's own 403 or 502 page, a proxy's) lost its
  // body: the error said only "answered 403".
  it("keeps what an answer without the ledger's envelope said, clipped", async () => {
    respond = () => ({ status: 403, body: { Message: 'The security token included in the request is expired' } });
    const refused = await thrown(fake.client.check('d-1'));
    expect(isLedgerApiError(refused) && { code: refused.code, message: refused.message, details: refused.details }).toEqual({
      code: 'http_403',
      message: 'GET /dispatches/{dispatchId} answered 403: {"Message":"The security token included in the request is expired"}',
      details: { body: '{"Message":"The security token included in the request is expired"}' },
    });
  });

  it("takes a session token and a credential scope out of what it keeps (a signature's refusal may echo the request it expected)", async () => {
    const echoed = 'The Canonical String for this request should have been\nhost:x\nx-amz-security-token:IQoJb3JpZ2luX2VjEXAMPLETOKEN\n Credential=ASIAEXAMPLE/20261207/us-east-1/lambda/aws4_request, SignedHeaders=host';
    respond = () => ({ status: 403, body: { message: echoed } });
    const refused = await thrown(fake.client.check('d-1'));
    expect(isLedgerApiError(refused) && refused.message).toContain('x-amz-security-token:…');
    for (const secret of ['IQoJb3JpZ2luX2VjEXAMPLETOKEN', 'ASIAEXAMPLE']) expect(JSON.stringify(isLedgerApiError(refused) && [refused.message, refused.details])).not.toContain(secret);
  });
});

describe('an answer larger than any the ledger gives', () => {
  // Regression: the client read every answer whole (`response.text()`), however large: a server that is
  // not the ledger (a misrouted URL, a proxy) could make it hold gigabytes until the call's timeout.
  it('is refused past MAX_ANSWER_BYTES, declared or streamed, and one within it is read whole', async () => {
    const over = 'x'.repeat(MAX_ANSWER_BYTES);
    // JSON-encoded: the string and its two quotes.
    respond = () => ({ status: 200, body: over, headers: { 'content-length': String(MAX_ANSWER_BYTES + 2) } });
    const declared = await thrown(fake.client.check('d-1'));
    respond = () => ({ status: 200, body: over, headers: { 'transfer-encoding': 'chunked' } });
    const streamed = await thrown(fake.client.check('d-1'));
    for (const refused of [declared, streamed]) {
      expect(isLedgerProtocolError(refused)).toBe(true);
      expect(refused instanceof Error && refused.message).toContain(`over the ${MAX_ANSWER_BYTES} the client reads`);
    }
    // A JSON string of MAX_ANSWER_BYTES − 2 characters: the answer is exactly the bound.
    respond = () => ({ status: 200, body: 'y'.repeat(MAX_ANSWER_BYTES - 2), headers: { 'transfer-encoding': 'chunked' } });
    const fits = await fake.client.raw('getDispatch', { params: { dispatchId: 'd-1' } });
    expect(typeof fits.body === 'string' && fits.body.length).toBe(MAX_ANSWER_BYTES - 2);
  });
});
