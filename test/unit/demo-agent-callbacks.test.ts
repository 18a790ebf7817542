import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { CallbackClient } from '../../local/demo-agent/callbacks.js';

/** A ledger stand-in on 127.0.0.1 that answers each request with the next of `answers` (then 202). */
async function ledger(answers: ReadonlyArray<{ status: number; code?: string }>): Promise<{ url: string; calls: () => number; server: Server }> {
  let calls = 0;
  const server = createServer((request, response) => {
    request.resume();
    const answer = answers[calls] ?? { status: 202 };
    calls += 1;
    response.writeHead(answer.status, { 'content-type': 'application/json' });
    response.end(JSON.stringify(answer.code ? { error: { code: answer.code, message: 'm' } } : { applied: true }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, calls: () => calls, server };
}

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

const event = { dispatchId: 'd-1', seq: 1, type: 'completed' as const };

describe('census findings: the demo agent waits for the ledger to record its run', () => {
  it('keeps retrying 409 not_yet_recorded past its tries (a crashed intake records the run seconds to minutes later)', async () => {
    const stub = await ledger([
      { status: 409, code: 'not_yet_recorded' },
      { status: 409, code: 'not_yet_recorded' },
      { status: 409, code: 'not_yet_recorded' },
      { status: 409, code: 'not_yet_recorded' },
    ]);
    servers.push(stub.server);
    const client = new CallbackClient({ log: () => undefined, stopSignal: new AbortController().signal, maxTries: 2 });
    expect(await client.postEvent(stub.url, 'r-1', event)).toBe(true);
    expect(stub.calls()).toBe(5);
  });

  it('gives up on any other 409 after its tries, and on not_yet_recorded once the wait is over', async () => {
    const other = await ledger([{ status: 409, code: 'conflict' }, { status: 409, code: 'conflict' }, { status: 409, code: 'conflict' }]);
    servers.push(other.server);
    const client = new CallbackClient({ log: () => undefined, stopSignal: new AbortController().signal, maxTries: 2 });
    expect(await client.postEvent(other.url, 'r-1', event)).toBe(false);
    expect(other.calls()).toBe(2);

    const never = await ledger(Array.from({ length: 50 }, () => ({ status: 409, code: 'not_yet_recorded' })));
    servers.push(never.server);
    const impatient = new CallbackClient({ log: () => undefined, stopSignal: new AbortController().signal, maxTries: 2, notYetRecordedMs: 0 });
    expect(await impatient.postEvent(never.url, 'r-1', event)).toBe(false);
    expect(never.calls()).toBe(2);
  });
});
