import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { afterEach, describe, expect, it } from 'vitest';
import { LedgerApiError, LedgerConfigError, LedgerNetworkError, LedgerProtocolError, LedgerValidationError } from '@dispatch-ledger/client';
import { ROUTES, routePath } from '@dispatch-ledger/protocol';
import { MAX_MESSAGE_BYTES } from '@dispatch-ledger/protocol';
import { ledgerMcpServer, type McpLedger, TOOL_NAMES, toolAnswer, toolFailure } from '../../cli/mcp-server.js';
import { PHASES } from '../../shared/dispatch/transitions/legal.js';
import { TARGET_RUN_STATUSES } from '../../shared/targets/port.js';

// `ledger mcp`'s server in-process: the pure mapping of API answers to tool results, and the tools
// against an in-memory LedgerClient (the port every face talks through) that records each call and
// answers what it is told — to pin the routes, bodies and refusals. The whole server against the
// real local platform, over stdio, is test/integration/mcp.test.ts.

interface Call {
  readonly method: 'GET' | 'POST' | 'PUT' | 'SEND';
  readonly path?: string;
  readonly body?: unknown;
}

/**
 * The server's port on `@dispatch-ledger/client` (McpLedger: `raw` and `dispatch`), recording each call
 * as the method and path of its route in the protocol's table, and answering `answer` (default 200 `{ ok: true }`).
 */
function recordingClient(answer: (call: Call) => { status: number; body: unknown } = () => ({ status: 200, body: { ok: true } })) {
  const calls: Call[] = [];
  const client: McpLedger = {
    raw: async (name, parts = {}) => {
      const query = new URLSearchParams(Object.entries(parts.query ?? {}).flatMap(([key, value]): Array<[string, string]> => (value === undefined ? [] : [[key, String(value)]]))).toString();
      const call: Call = { method: ROUTES[name].method, path: `${routePath(ROUTES[name], parts.params ?? {})}${query ? `?${query}` : ''}`, ...(parts.body === undefined ? {} : { body: parts.body }) };
      calls.push(call);
      return { ...answer(call), requestId: undefined };
    },
    dispatch: async (message) => {
      calls.push({ method: 'SEND', body: message });
      return { dispatchId: message.dispatchId, messageId: 'msg-1' };
    },
  };
  return { client, calls };
}

const open: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((each) => each.close()));
});

async function connected(client: McpLedger): Promise<Client> {
  const server = ledgerMcpServer(client, { origin: 'planner', newDispatchId: () => 'd-made-1' });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const mcpClient = new Client({ name: 'unit-test', version: '0.0.0' });
  await Promise.all([server.connect(serverSide), mcpClient.connect(clientSide)]);
  open.push(mcpClient, server);
  return mcpClient;
}

const textOf = (result: Awaited<ReturnType<Client['callTool']>>): string => {
  const [first] = result.content as Array<{ type: string; text: string }>;
  return first?.text ?? '';
};

describe('toolAnswer', () => {
  it('answers a 2xx object as JSON text and structured content, not as an error', () => {
    const result = toolAnswer({ status: 200, body: { dispatchId: 'd-1', phase: 'submitted' } });
    expect(result.isError).toBeUndefined();
    expect(result.structuredContent).toEqual({ dispatchId: 'd-1', phase: 'submitted' });
    expect(JSON.parse((result.content[0] as { text: string }).text)).toEqual({ dispatchId: 'd-1', phase: 'submitted' });
  });

  it("carries the API's error body as a tool error when the status is not 2xx", () => {
    const body = { error: { code: 'not_found', message: 'no dispatch d-x' } };
    const result = toolAnswer({ status: 404, body });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toEqual(body);
    expect(JSON.parse((result.content[0] as { text: string }).text)).toEqual(body);
  });

  it('turns a non-2xx body of another shape into an unexpected_answer error, bounded', () => {
    const result = toolAnswer({ status: 503, body: `<html>${'x'.repeat(5000)}</html>` });
    expect(result.isError).toBe(true);
    const error = (result.structuredContent as { error: { code: string; message: string } }).error;
    expect(error.code).toBe('unexpected_answer');
    expect(error.message).toMatch(/^the ledger API answered 503: <html>x/);
    expect(error.message.length).toBeLessThanOrEqual(1000);
  });

  it("escapes a target's control and bidi characters in the text, leaving the same JSON", () => {
    const body = { execution: { result: { summary: 'done \u202egnp.exe\u001b[2J' } } };
    const result = toolAnswer({ status: 200, body });
    const text = (result.content[0] as { text: string }).text;
    expect(text).not.toMatch(/[\u202e\u001b]/);
    expect(JSON.parse(text)).toEqual(body);
  });

  it('gives an array body as text only: structured content is an object', () => {
    const result = toolAnswer({ status: 200, body: [1, 2] });
    expect(result.structuredContent).toBeUndefined();
    expect((result.content[0] as { text: string }).text).toBe('[1,2]');
  });
});

describe('toolFailure', () => {
  it('is a ledger_unreachable tool error with the message and never the stack', () => {
    const error = new Error('connect ECONNREFUSED 127.0.0.1:4566');
    const result = toolFailure(error);
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toEqual({ error: { code: 'ledger_unreachable', message: 'connect ECONNREFUSED 127.0.0.1:4566' } });
    expect(JSON.stringify(result)).not.toContain('at ');
  });
});

describe('ledgerMcpServer', () => {
  it('lists the nine tools, each with an object input schema and a description', async () => {
    const { tools } = await (await connected(recordingClient().client)).listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual([...TOOL_NAMES].sort());
    for (const tool of tools) {
      expect(tool.inputSchema.type).toBe('object');
      expect(tool.description?.length).toBeGreaterThan(40);
    }
  });

  it('dispatch sends the message for its origin with a made-up id, and says it is not yet recorded', async () => {
    const { client, calls } = recordingClient();
    const result = await (await connected(client)).callTool({ name: 'dispatch', arguments: { target: 'demo-agent', task: { behavior: 'complete' } } });
    expect(result.isError).toBeUndefined();
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ method: 'SEND', body: { dispatchId: 'd-made-1', origin: 'planner', target: 'demo-agent', task: { behavior: 'complete' } } });
    expect(result.structuredContent).toMatchObject({ dispatchId: 'd-made-1', messageId: 'msg-1', intake: 'queued: on the dispatch queue, not yet recorded' });
  });

  /** The dispatch tool's answer when the client's send throws `error`. */
  const dispatchFailingWith = async (error: Error) => {
    const client: McpLedger = {
      ...recordingClient().client,
      dispatch: async () => {
        throw error;
      },
    };
    return (await connected(client)).callTool({ name: 'dispatch', arguments: { target: 'demo-agent', task: {} } });
  };

  it('dispatch that got no answer names the id it made up, to retry under (was: a retry made a second dispatch)', async () => {
    const result = await dispatchFailingWith(new LedgerNetworkError('sending to the dispatch queue failed: socket hang up'));
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toEqual({
      error: {
        code: 'outcome_unknown',
        message: 'the message may have reached the queue: to retry without dispatching twice, call dispatch again with dispatchId "d-made-1" (sending to the dispatch queue failed: socket hang up)',
        details: { dispatchId: 'd-made-1' },
      },
    });
  });

  it('dispatch that failed before sending (a config error) says so, with no retry to make', async () => {
    const result = await dispatchFailingWith(new LedgerConfigError('no dispatch queue: give --queue-url with --api-url'));
    expect(result.structuredContent).toEqual({ error: { code: 'not_configured', message: 'no dispatch queue: give --queue-url with --api-url' } });
  });

  it('dispatch refuses, unsent, a message for another origin, one the intake would block, and one over the queue maximum', async () => {
    const { client, calls } = recordingClient();
    const mcp = await connected(client);
    const otherOrigin = await mcp.callTool({ name: 'dispatch', arguments: { origin: 'lead-agent', target: 'demo-agent', task: {} } });
    let deep: Record<string, unknown> = {};
    for (let level = 0; level < 70; level += 1) deep = { deeper: deep };
    const tooDeep = await mcp.callTool({ name: 'dispatch', arguments: { target: 'demo-agent', task: deep } });
    const tooLarge = await mcp.callTool({ name: 'dispatch', arguments: { target: 'demo-agent', task: { text: 'x'.repeat(MAX_MESSAGE_BYTES) } } });
    expect([otherOrigin, tooDeep, tooLarge].map((result) => [result.isError, (result.structuredContent as { error: { code: string } }).error.code])).toEqual([
      [true, 'invalid'],
      [true, 'invalid'],
      [true, 'too_large'],
    ]);
    expect(textOf(tooDeep)).toContain('too_deep');
    expect(calls).toEqual([]);
  });

  it('dispatch refuses a task nested 20,000 levels as invalid too_deep, unsent (was: JSON.stringify overflowed, answered ledger_unreachable)', async () => {
    const { client, calls } = recordingClient();
    let deep: Record<string, unknown> = {};
    for (let level = 0; level < 20_000; level += 1) deep = { d: deep };
    const result = await (await connected(client)).callTool({ name: 'dispatch', arguments: { target: 'demo-agent', task: deep } });
    expect([result.isError, (result.structuredContent as { error: { code: string } }).error.code]).toEqual([true, 'invalid']);
    expect(textOf(result)).toContain('too_deep');
    expect(calls).toEqual([]);
  });

  it('dispatch refuses, unsent, a task with a "__proto__" key, as the intake would block it', async () => {
    // The bug it pins: the tool's input schema read `task` as a zod record, which drops a "__proto__" key,
    // so the message was sent without it — another task than the one asked for (the intake blocks it).
    const { client, calls } = recordingClient();
    const mcp = await connected(client);
    const withProto = JSON.parse('{"target":"demo-agent","task":{"a":1,"__proto__":{"admin":true}}}') as Record<string, unknown>;
    const result = await mcp.callTool({ name: 'dispatch', arguments: withProto });
    expect([result.isError, (result.structuredContent as { error: { code: string } }).error.code]).toEqual([true, 'invalid']);
    expect(textOf(result)).toContain('__proto__');
    expect(calls).toEqual([]);
    // The tool still says what task is: any JSON object.
    const { tools } = await mcp.listTools();
    const dispatch = tools.find((tool) => tool.name === 'dispatch');
    expect(dispatch?.inputSchema.properties?.['task']).toMatchObject({ type: 'object' });
  });

  it("refuses input the API's schema refuses, before any call (a redispatch without a reason, a delivery confirmed without evidenceRef)", async () => {
    const { client, calls } = recordingClient();
    const mcp = await connected(client);
    const noReason = await mcp.callTool({ name: 'redispatch', arguments: { dispatchId: 'd-1', reason: '  ' } });
    const noRef = await mcp.callTool({
      name: 'record_receipt',
      arguments: { dispatchId: 'd-1', receiptId: 'rc-1', runId: 'r-1', kind: 'owner_delivery', state: 'confirmed', verifiedBy: 'alice' },
    });
    const badMax = await mcp.callTool({ name: 'claim_results', arguments: { max: 51 } });
    expect([noReason.isError, noRef.isError, badMax.isError]).toEqual([true, true, true]);
    expect(calls).toEqual([]);
  });

  it('filters dispatch_status by the statuses and phases the history route validates, from the one state machine', async () => {
    const { client } = recordingClient();
    const tools = await (await connected(client)).listTools();
    const status = tools.tools.find((tool) => tool.name === 'dispatch_status')?.inputSchema.properties?.status as { enum?: string[] } | undefined;
    expect(status?.enum).toEqual([...new Set([...TARGET_RUN_STATUSES, 'unknown', ...PHASES])]);
  });

  it('calls each route of the table, with the body the API takes and the ids in the path (its origin is the client’s)', async () => {
    const { client, calls } = recordingClient();
    const mcp = await connected(client);
    await mcp.callTool({ name: 'check_dispatch', arguments: { dispatchId: 'd-1', refresh: true } });
    await mcp.callTool({ name: 'dispatch_status', arguments: { status: 'unknown', limit: 5 } });
    await mcp.callTool({ name: 'cancel_dispatch', arguments: { dispatchId: 'd-1', reason: 'not needed' } });
    await mcp.callTool({ name: 'redispatch', arguments: { dispatchId: 'd-1', reason: 'target lost the run', force: true } });
    await mcp.callTool({
      name: 'record_receipt',
      arguments: { dispatchId: 'd-1', receiptId: 'rc-1', runId: 'r-1', kind: 'artifact_acceptance', state: 'accepted', verifiedBy: 'alice' },
    });
    await mcp.callTool({ name: 'claim_results', arguments: { mode: 'after_turn', max: 5 } });
    await mcp.callTool({ name: 'ack_result', arguments: { resultId: 'r1~d-1', claimToken: 'ct-1' } });
    await mcp.callTool({ name: 'release_result', arguments: { resultId: 'r1~d-1', claimToken: 'ct-1', reason: 'reader gone' } });
    expect(calls.map(({ method, path, body }) => [method, path, body])).toEqual([
      ['GET', '/dispatches/d-1?refresh=true', undefined],
      ['GET', '/origins/planner/dispatches?status=unknown&limit=5', undefined],
      ['POST', '/dispatches/d-1/cancel', { reason: 'not needed' }],
      ['POST', '/dispatches/d-1/redispatch', { reason: 'target lost the run', force: true }],
      ['POST', '/dispatches/d-1/receipts', { receiptId: 'rc-1', runId: 'r-1', kind: 'artifact_acceptance', state: 'accepted', verifiedBy: 'alice' }],
      ['POST', '/origins/planner/inbox/claim', { mode: 'after_turn', max: 5 }],
      ['POST', '/origins/planner/inbox/r1~d-1/ack', { claimToken: 'ct-1' }],
      ['POST', '/origins/planner/inbox/r1~d-1/release', { claimToken: 'ct-1', reason: 'reader gone' }],
    ]);
  });

  // Regression: a redispatch, claim or release that got no answer, or a 5xx, was a plain failure
  // (ledger_unreachable, or the 5xx as it came), and a model retries a failure: a second forced redispatch
  // superseded the attempt the first made, a second claim held more results. The CLI said so (printCall);
  // the MCP server did not.
  it('says a redispatch, claim or release whose outcome is unknown may have happened, and what to look at before calling again', async () => {
    const noAnswer: McpLedger = {
      ...recordingClient().client,
      raw: async () => {
        throw new LedgerNetworkError('POST /dispatches/{dispatchId}/redispatch did not reach the ledger: socket hang up');
      },
    };
    const failing = recordingClient(() => ({ status: 503, body: { error: { code: 'unavailable', message: 'try later' } } })).client;
    const calls: Array<[string, Record<string, unknown>]> = [
      ['redispatch', { dispatchId: 'd-1', reason: 'lost run', force: true }],
      ['claim_results', { mode: 'after_turn', max: 5 }],
      ['release_result', { resultId: 'r1~d-1', claimToken: 'ct-1' }],
    ];
    for (const client of [noAnswer, failing]) {
      const mcp = await connected(client);
      for (const [name, args] of calls) {
        const result = await mcp.callTool({ name, arguments: args });
        expect(result.isError, name).toBe(true);
        const error = (result.structuredContent as { error: { code: string; message: string } }).error;
        expect(error.code, name).toBe('outcome_unknown');
        expect(error.message, name).toMatch(name === 'redispatch' ? /check_dispatch with refresh: true before any redispatch/ : name === 'claim_results' ? /may now be leased to this call/ : /claim_results shows it/);
      }
    }
  });

  it('says a dispatch with its own id that got no answer may have reached the queue, and a config error is not_configured', async () => {
    const { client } = recordingClient();
    const mcp = await connected({
      ...client,
      dispatch: async () => {
        throw new LedgerNetworkError('sending to the dispatch queue failed: socket hang up');
      },
    });
    const result = await mcp.callTool({ name: 'dispatch', arguments: { dispatchId: 'd-mine', target: 'demo-agent', task: {} } });
    expect(result.structuredContent).toMatchObject({ error: { code: 'outcome_unknown', message: expect.stringMatching(/^the message may have reached the queue: to retry without dispatching twice, call dispatch again with dispatchId "d-mine"/) } });
    expect(toolFailure(new LedgerConfigError('no dispatch queue: give --queue-url with --api-url')).structuredContent).toEqual({ error: { code: 'not_configured', message: 'no dispatch queue: give --queue-url with --api-url' } });
  });

  it('answers a view that lacks what the summary line reads as the view alone, not as an unreachable ledger (a review)', async () => {
    const mcp = await connected(recordingClient(() => ({ status: 200, body: { dispatchId: 'd-1', phase: 'submitted' } })).client);
    const result = await mcp.callTool({ name: 'check_dispatch', arguments: { dispatchId: 'd-1' } });
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toEqual({ dispatchId: 'd-1', phase: 'submitted' });
    expect(textOf(result)).toBe('{"dispatchId":"d-1","phase":"submitted"}');
  });

  it('answers a client that throws (nothing answered) as a tool error, not a failed request', async () => {
    const client: McpLedger = {
      ...recordingClient().client,
      raw: async () => {
        throw new Error('fetch failed');
      },
    };
    const result = await (await connected(client)).callTool({ name: 'check_dispatch', arguments: { dispatchId: 'd-1' } });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toEqual({ error: { code: 'ledger_unreachable', message: 'fetch failed' } });
  });
});

describe('toolFailure', () => {
  it('calls a request the client refused (never sent) invalid, not an unreachable ledger', () => {
    expect(toolFailure(new LedgerValidationError('the ledger would refuse this body: reason: too small', [])).structuredContent).toEqual({ error: { code: 'invalid', message: 'the ledger would refuse this body: reason: too small' } });
    expect(toolFailure(new Error('fetch failed')).structuredContent).toEqual({ error: { code: 'ledger_unreachable', message: 'fetch failed' } });
  });

  // A review: an answer over the client's bound (or without what the protocol requires) was called ledger_unreachable.
  it('calls an answer that is not the ledger’s unexpected_answer, not an unreachable ledger', () => {
    expect(toolFailure(new LedgerProtocolError('GET /dispatches/{dispatchId} answered 9000000 bytes or more', [])).structuredContent).toEqual({ error: { code: 'unexpected_answer', message: 'GET /dispatches/{dispatchId} answered 9000000 bytes or more' } });
  });

  it('gives an answer the client threw as it came: a queue that refused a message refused it (was: ledger_unreachable)', () => {
    const refused = new LedgerApiError(400, 'queue_refused', 'the dispatch queue refused the message: QueueDoesNotExist: no such queue', { queueError: 'QueueDoesNotExist' }, 'req-1');
    expect(toolFailure(refused).structuredContent).toEqual({ error: { code: 'queue_refused', message: refused.message, details: { queueError: 'QueueDoesNotExist' } } });
  });
});
