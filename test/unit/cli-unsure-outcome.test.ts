import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { UnsureOutcomeError } from '../../cli/answer.js';
import { send } from '../../cli/dispatch.js';
import { inbox } from '../../cli/inbox.js';
import { redispatch } from '../../cli/lifecycle.js';
import { receipt } from '../../cli/receipt.js';
import { closeFakeApis, fakeApi } from '../support/fake-api.js';

// Bug pinned: `ledger receipt` (without --receipt-id) and `ledger send` (without --dispatch-id) make up
// the call's id and printed it only on success. When no answer came, or a 5xx, the call may have taken
// effect, and running the command again made up a new id: a second receipt, a second dispatch. Now the
// made-up id is said with the failure, as the flag that repeats the call once.

afterEach(closeFakeApis);

const RECEIPT = ['d-1', '--run', 'r-1', '--kind', 'artifact_acceptance', '--state', 'accepted', '--verified-by', 'alice'];
const CLOSED = 'http://127.0.0.1:9';

describe('ledger receipt, when its outcome is unknown', () => {
  it('prints the 5xx and the --receipt-id it sent, to retry once; exit 1', async () => {
    const api = await fakeApi(() => ({ status: 503, body: { error: { code: 'unavailable', message: 'try later' } } }));
    const printed: string[] = [];
    expect(await receipt(RECEIPT, (line) => printed.push(line), api.connect)).toBe(1);
    const sent = (api.seen[0]?.body as { receiptId: string }).receiptId;
    expect(sent).toMatch(/^rc-[0-9a-f-]{36}$/);
    expect(printed).toEqual(['503 unavailable: try later', `the receipt may have been recorded: to retry without doing it twice, run the command again with --receipt-id ${sent}`]);
  });

  it('under --json prints the answer alone on stdout and says the --receipt-id as the error (stderr)', async () => {
    const api = await fakeApi(() => ({ status: 503, body: { error: { code: 'unavailable', message: 'try later' } } }));
    const printed: string[] = [];
    const failed = await receipt([...RECEIPT, '--json'], (line) => printed.push(line), api.connect).then(() => undefined, (error: unknown) => error);
    const sent = (api.seen[0]?.body as { receiptId: string }).receiptId;
    expect(failed).toEqual(new UnsureOutcomeError(`the receipt may have been recorded: to retry without doing it twice, run the command again with --receipt-id ${sent}`));
    expect(failed).toBeInstanceOf(UnsureOutcomeError);
    expect(printed).toEqual([JSON.stringify({ error: { code: 'unavailable', message: 'try later' } })]);
  });

  it('says the --receipt-id with the error when nothing answered', async () => {
    const api = await fakeApi(() => ({ status: 201, body: {} }), { apiUrl: CLOSED });
    const failed = receipt(RECEIPT, () => undefined, api.connect);
    await expect(failed).rejects.toBeInstanceOf(UnsureOutcomeError);
    await expect(failed).rejects.toThrow(/\nthe receipt may have been recorded: to retry without doing it twice, run the command again with --receipt-id rc-[0-9a-f-]{36}$/);
  });

  it('adds nothing when the id was given (the same command is the safe retry) or the ledger refused (4xx: nothing recorded)', async () => {
    const down = await fakeApi(() => ({ status: 503, body: { error: { code: 'unavailable', message: 'try later' } } }));
    const printed: string[] = [];
    expect(await receipt([...RECEIPT, '--receipt-id', 'rc-mine'], (line) => printed.push(line), down.connect)).toBe(1);
    expect(printed).toEqual(['503 unavailable: try later']);
    const refused = await fakeApi(() => ({ status: 404, body: { error: { code: 'not_found', message: 'no run r-1' } } }));
    printed.length = 0;
    expect(await receipt(RECEIPT, (line) => printed.push(line), refused.connect)).toBe(1);
    expect(printed).toEqual(['404 not_found: no run r-1']);
  });
});

describe('ledger send, when its outcome is unknown', () => {
  it('says the --dispatch-id it made up with the error, to send again once', async () => {
    const api = await fakeApi(() => ({ status: 200, body: {} }), { dispatchQueueUrl: `${CLOSED}/000000000000/dispatches`, sqsEndpoint: CLOSED });
    const failed = send(['--target', 'demo-agent'], () => undefined, api.connect);
    await expect(failed).rejects.toBeInstanceOf(UnsureOutcomeError);
    await expect(failed).rejects.toThrow(/\nthe message may have reached the queue: to retry without doing it twice, run the command again with --dispatch-id d-\S+$/);
  });

  it('adds nothing when nothing was sent: no queue to send to is a config error, not an unknown outcome', async () => {
    const api = await fakeApi(() => ({ status: 200, body: {} }), { dispatchQueueUrl: '' });
    const failed = send(['--target', 'demo-agent'], () => undefined, api.connect);
    await expect(failed).rejects.toThrow(/no dispatch queue/);
    await expect(failed).rejects.not.toThrow(/--dispatch-id/);
  });

  it('adds nothing when the queue refused the message (a 4xx: it is certainly not on the queue; was: "may have reached the queue")', async () => {
    const queue = await fakeApi(() => ({ status: 400, body: { __type: 'com.amazonaws.sqs#QueueDoesNotExist', message: 'The specified queue does not exist.' } }));
    const endpoint = `http://127.0.0.1:${(queue.server.address() as AddressInfo).port}`;
    const api = await fakeApi(() => ({ status: 200, body: {} }), { dispatchQueueUrl: `${endpoint}/000000000000/dispatches`, sqsEndpoint: endpoint });
    const failed = send(['--target', 'demo-agent'], () => undefined, api.connect);
    await expect(failed).rejects.not.toBeInstanceOf(UnsureOutcomeError);
    await expect(failed).rejects.toThrow(/^the dispatch queue refused the message: QueueDoesNotExist: The specified queue does not exist\.$/);
    expect(queue.seen).toHaveLength(1);
  });

  it('adds nothing when the id was given: the same command is the safe retry', async () => {
    const api = await fakeApi(() => ({ status: 200, body: {} }), { dispatchQueueUrl: `${CLOSED}/000000000000/dispatches`, sqsEndpoint: CLOSED });
    const failed = send(['--target', 'demo-agent', '--dispatch-id', 'd-mine'], () => undefined, api.connect);
    await expect(failed).rejects.not.toBeInstanceOf(UnsureOutcomeError);
    await expect(failed).rejects.not.toThrow(/--dispatch-id/);
  });
});

// Bug pinned: `ledger redispatch` and `ledger inbox claim` reported a lost answer ("did not reach the
// ledger") or a 5xx as a plain failure. Both take effect once per call: a redispatch run again (a second
// --force supersedes the attempt the first made), a claim run again holds more results for a lease and
// spends their delivery attempts. Now the unknown outcome says what to look at first.
describe('ledger redispatch and inbox claim, when their outcome is unknown', () => {
  it('redispatch: a lost answer is an unsure outcome naming the check to run before repeating it', async () => {
    const api = await fakeApi(() => ({ status: 202, body: {} }), { apiUrl: CLOSED });
    const failed = redispatch(['d-1', '--reason', 'stuck', '--force', '--origin', 'planner'], () => undefined, api.connect);
    await expect(failed).rejects.toBeInstanceOf(UnsureOutcomeError);
    await expect(failed).rejects.toThrow(/\nthe dispatch may have been redispatched: look before running this again — npx ledger check d-1 --refresh .*--origin planner$/);
  });

  it('redispatch: a 5xx is printed, then the same; a 409 is only a failure', async () => {
    const down = await fakeApi(() => ({ status: 503, body: { error: { code: 'unavailable', message: 'try later' } } }));
    const printed: string[] = [];
    expect(await redispatch(['d-1', '--reason', 'stuck'], (line) => printed.push(line), down.connect)).toBe(1);
    expect(printed[0]).toBe('503 unavailable: try later');
    expect(printed[1]).toMatch(/^the dispatch may have been redispatched: look before running this again — npx ledger check d-1 --refresh/);
    const busy = await fakeApi(() => ({ status: 409, body: { error: { code: 'conflict', message: 'the run may be active' } } }));
    printed.length = 0;
    expect(await redispatch(['d-1', '--reason', 'stuck'], (line) => printed.push(line), busy.connect)).toBe(1);
    expect(printed).toEqual(['409 conflict: the run may be active']);
  });

  it('inbox claim: a lost answer says the claim may hold results, and how to see them; ack is only a failure', async () => {
    const api = await fakeApi(() => ({ status: 200, body: {} }), { apiUrl: CLOSED });
    const failed = inbox(['claim', '--origin', 'planner'], () => undefined, api.connect);
    await expect(failed).rejects.toBeInstanceOf(UnsureOutcomeError);
    await expect(failed).rejects.toThrow(/\nthe claim may have been made: what it took stays held until its lease ends, then can be claimed again; see it with: npx ledger inbox list --state claimed --origin planner/);
    const ack = inbox(['ack', 'r-1~d-1', '--token', 't', '--origin', 'planner'], () => undefined, api.connect);
    await expect(ack).rejects.not.toBeInstanceOf(UnsureOutcomeError);
  });
});
