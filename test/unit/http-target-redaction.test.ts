import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { httpTarget, type HttpTargetOptions } from '../../shared/adapters/http-target.js';
import type { SubmitRequest, TargetPort } from '../../shared/targets/port.js';
import { closedUrl, json, startStub, type Stub } from '../support/stub-target.js';

// The http target adapter (CONTRACT §8) never stores or shows the credential it sends a target, even
// when the target echoes it back in an error, whole or cut: every reason it builds is scrubbed of it.

const SECRET = 'Bearer s3cr3t-t0ken-value';

let sequence = 0;
let callbackUrl: string;
let stub: Stub;

beforeEach(async () => {
  callbackUrl = await closedUrl();
  stub = await startStub();
});

afterEach(async () => {
  await stub.close();
});

function submitRequestFactory(): SubmitRequest {
  return { dispatchId: `d-redact:${process.pid}.${++sequence}`, attempt: 1, origin: 'planner', task: { goal: 'echo me' }, expectedEvidence: [], callbackUrl };
}

function stubTarget(options: HttpTargetOptions = {}): TargetPort {
  return httpTarget({ name: 'stub', kind: 'http', baseUrl: `${stub.url}/` }, options);
}

describe('httpTarget and the credential it sends', () => {
  it('never puts the authorization value in a reason, even when the target echoes it', async () => {
    const target = stubTarget({ authHeader: async () => SECRET });
    stub.answer((request, res) =>
      json(res, request.method === 'GET' ? 500 : 403, { error: { message: `bad credentials: ${request.headers.authorization}` } }),
    );

    const rejected = await target.submit(submitRequestFactory());
    const unavailable = await target.lookup('r-1');
    const token = SECRET.replace('Bearer ', '');
    stub.answer((_request, res) => json(res, 500, `token ${token} expired`));
    const echoedToken = await target.cancel('r-1');
    const failingSecret = await stubTarget({ authHeader: () => Promise.reject(new Error(`cannot read ${SECRET}`)) }).submit(
      submitRequestFactory(),
    );
    // fetch itself quotes an invalid header value in its error message.
    const invalidHeader = await stubTarget({ authHeader: async () => `${SECRET}\nInjected: 1` }).lookup('r-1');

    expect(rejected).toEqual({ kind: 'rejected', httpStatus: 403, reason: 'bad credentials: [redacted]' });
    expect(unavailable).toEqual({ kind: 'unavailable', reason: 'HTTP 500: bad credentials: [redacted]' });
    expect(echoedToken).toEqual({ kind: 'unavailable', reason: 'HTTP 500: token [redacted] expired' });
    expect(failingSecret).toEqual({ kind: 'unavailable', reason: 'could not obtain the auth header (Error)' });
    expect(invalidHeader).toEqual({ kind: 'unavailable', reason: expect.stringMatching(/^could not reach the target: .*invalid header value/) });
    for (const outcome of [rejected, unavailable, echoedToken, failingSecret, invalidHeader]) {
      expect(JSON.stringify(outcome)).not.toContain(token);
    }
  });

  it('never keeps part of the authorization value either, wherever a preview of the body is cut', async () => {
    // The bug it pins: a body not in the error shape was cut to 800 characters before the secret was
    // redacted, so a secret straddling the cut survived in part, and whitespace collapsing then brought
    // it inside the stored 200 characters ("HTTP 500: { … Bearer tok_live_9f8e…").
    const target = stubTarget({ authHeader: async () => SECRET });
    const token = SECRET.replace('Bearer ', '');
    // Any four characters of the token in a row.
    const pieces = Array.from({ length: token.length - 3 }, (_, at) => token.slice(at, at + 4));
    const outcomes = [];
    for (const padding of [800 - SECRET.length + 1, 800 - 8, 800 - 4, 800]) {
      stub.answer((request, res) => json(res, 500, `${' '.repeat(padding)}${request.headers.authorization} sent`));
      outcomes.push(await target.lookup('r-1'));
    }
    // A body over the read bound, cut inside the echoed value: what was read ends with part of it.
    const bound = 64 * 1024;
    // Cut inside the token itself ('Bearer ' is 7 characters): 4, 8 and all but one of its characters read.
    for (const inside of [11, 15, SECRET.length - 1]) {
      stub.answer((request, res) => json(res, 500, `${' '.repeat(bound - inside)}${request.headers.authorization}${'x'.repeat(100)}`));
      outcomes.push(await target.lookup('r-1'));
    }
    stub.answer((request, res) => json(res, 403, `${' '.repeat(798)}${request.headers.authorization}`));
    outcomes.push(await target.submit(submitRequestFactory()));

    expect(outcomes).toHaveLength(8);
    for (const outcome of outcomes) {
      for (const piece of pieces) expect(JSON.stringify(outcome)).not.toContain(piece);
    }
    for (const outcome of outcomes.slice(0, 4)) expect(outcome).toEqual({ kind: 'unavailable', reason: 'HTTP 500: [redacted] sent' });
    expect(outcomes[7]).toEqual({ kind: 'rejected', httpStatus: 403, reason: '[redacted]' });
  });
});
