import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { memoryLambdaStore, type LambdaRunStore } from '@dispatch-ledger/worker/lambda';
import { StepFunctionsTaskEventError, stepFunctionsTask, type LambdaContextLike, type StepFunctionsTaskContext } from '@dispatch-ledger/worker/stepfunctions';
import { MAX_RUN_ID_CHARS } from '@dispatch-ledger/protocol';

// CONTRACT §17: the kit's putEvidence (and its run events) work inside a state machine's Lambda task,
// given the event the documented Parameters make: { submission: $$.Execution.Input, executionArn:
// $$.Execution.Id }. The ledger API is a real HTTP server on 127.0.0.1 that records every request; the
// run-state store is the kit's in-memory store (the same port the DynamoDB store implements).

interface Received {
  readonly method: string;
  readonly path: string;
  readonly runId: string | null;
  readonly body: string;
}

const EXECUTION_ARN = 'arn:aws:states:eu-west-1:123456789012:execution:report-flow:d-sfn-1-1';
const SPILLED_TASK = { goal: 'read back from the ledger' };

let server: Server;
let callbackUrl = '';
const received: Received[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://ledger.invalid');
      received.push({ method: req.method ?? '', path: url.pathname, runId: url.searchParams.get('runId'), body: Buffer.concat(chunks).toString('utf8') });
      const answer = req.method === 'GET' ? { status: 200, text: JSON.stringify(SPILLED_TASK) } : req.method === 'PUT' ? { status: 201, text: '{}' } : { status: 202, text: '{"applied":true}' };
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(answer.text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  callbackUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
});

beforeEach(() => {
  received.length = 0;
});

// --- Factories ----------------------------------------------------------------------------------------

const submissionFactory = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  dispatchId: 'd-sfn-1',
  attempt: 1,
  origin: 'planner',
  task: { goal: 'write the report' },
  expectedEvidence: ['out/report.md'],
  callbackUrl,
  timeouts: { stallAfterSeconds: 600 },
  ...extra,
});

/** The event a Task state passes with `"submission.$": "$$.Execution.Input", "executionArn.$": "$$.Execution.Id"`. */
const taskEventFactory = (submission: Record<string, unknown> = submissionFactory(), executionArn = EXECUTION_ARN) => ({ submission, executionArn });

let invocations = 0;
const lambdaContext = (): LambdaContextLike => ({ awsRequestId: `req-${++invocations}`, getRemainingTimeInMillis: () => 30_000 });

const quiet = { log: () => undefined, retry: { budgetMs: 2_000, finalBudgetMs: 2_000, firstPauseMs: 10, maxPauseMs: 50 } };

/** The run events the ledger received, in arrival order, with the runId their path named. */
function runEvents(): Array<{ readonly runId: string; readonly seq: number; readonly type: string; readonly dispatchId: string }> {
  return received.flatMap((request) => {
    const match = /^\/runs\/([^/]+)\/events$/.exec(request.path);
    if (request.method !== 'POST' || !match?.[1]) return [];
    const event = JSON.parse(request.body) as { seq: number; type: string; dispatchId: string };
    return [{ runId: decodeURIComponent(match[1]), seq: event.seq, type: event.type, dispatchId: event.dispatchId }];
  });
}

// --- The specification ------------------------------------------------------------------------------------

describe('stepFunctionsTask', () => {
  let store: LambdaRunStore;
  beforeEach(() => {
    store = memoryLambdaStore();
  });

  it('uploads evidence and posts heartbeat and progress as the execution run, seq from 1, when given Step Functions\' event shape', async () => {
    let seen: StepFunctionsTaskContext | undefined;
    let taskSeen: unknown;
    const handler = stepFunctionsTask(
      async (task, ctx) => {
        seen = ctx;
        taskSeen = task;
        ctx.heartbeat();
        await ctx.putEvidence('out/report.md', '# Report\n');
        await ctx.progress('report written');
        return { written: 'out/report.md' };
      },
      { store, ...quiet },
    );

    const output = await handler(taskEventFactory(), lambdaContext());

    // The handler's value is the Task's output; the ctx is the execution's run.
    expect(output).toEqual({ written: 'out/report.md' });
    expect(taskSeen).toEqual({ goal: 'write the report' });
    expect(seen).toMatchObject({ dispatchId: 'd-sfn-1', attempt: 1, runId: EXECUTION_ARN, origin: 'planner', expectedEvidence: ['out/report.md'] });
    const upload = received.find((request) => request.method === 'PUT');
    expect(upload).toEqual({ method: 'PUT', path: '/dispatches/d-sfn-1/evidence/out/report.md', runId: EXECUTION_ARN, body: '# Report\n' });
    expect(runEvents()).toEqual([
      { runId: EXECUTION_ARN, seq: 1, type: 'heartbeat', dispatchId: 'd-sfn-1' },
      { runId: EXECUTION_ARN, seq: 2, type: 'progress', dispatchId: 'd-sfn-1' },
    ]);
    // The state machine decides the run's end: nothing final is posted.
    expect(runEvents().filter((event) => ['completed', 'failed', 'cancelled'].includes(event.type))).toEqual([]);
    expect((await store.get(EXECUTION_ARN))?.seq).toBe(2);
  });

  it('never reuses a seq within the execution: a second task, a retried task and two parallel branches draw from one counter', async () => {
    const task = stepFunctionsTask(
      async (_task, ctx) => {
        ctx.heartbeat();
        for (let i = 0; i < 3; i += 1) await ctx.progress(`step ${i}`);
        return null;
      },
      { store, ...quiet },
    );
    await task(taskEventFactory(), lambdaContext());
    // The next Task state of the execution, or Lambda's retry of this one: a new invocation, a new process state.
    await task(taskEventFactory(), lambdaContext());
    const sequential = runEvents().map((event) => event.seq);
    expect(sequential).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);

    // Two branches of a Parallel state at once, each writing against the same item.
    await Promise.all([task(taskEventFactory(), lambdaContext()), task(taskEventFactory(), lambdaContext())]);
    const all = runEvents().map((event) => event.seq);
    expect(all).toHaveLength(16);
    expect(new Set(all).size).toBe(16);
    expect(Math.min(...all.slice(8))).toBeGreaterThan(8);
    expect((await store.get(EXECUTION_ARN))?.seq).toBe(16);
    expect(runEvents().every((event) => event.runId === EXECUTION_ARN)).toBe(true);
  });

  it('reads a spilled task from the ledger with ?runId=<executionArn> appended to the submission\'s taskRef', async () => {
    let taskSeen: unknown;
    const handler = stepFunctionsTask(
      async (task) => {
        taskSeen = task;
        return 'done';
      },
      { store, ...quiet },
    );
    const { task: _inline, ...spilled } = submissionFactory({ taskRef: `${callbackUrl}/dispatches/d-sfn-1/task` });

    expect(await handler(taskEventFactory(spilled), lambdaContext())).toBe('done');

    expect(taskSeen).toEqual(SPILLED_TASK);
    expect(received).toEqual([{ method: 'GET', path: '/dispatches/d-sfn-1/task', runId: EXECUTION_ARN, body: '' }]);
  });

  it('rethrows what the handler throws, for the state machine to retry or catch, and posts no failed event', async () => {
    const handler = stepFunctionsTask(
      async (_task, ctx) => {
        ctx.heartbeat();
        throw new Error('the report could not be written');
      },
      { store, ...quiet },
    );

    await expect(handler(taskEventFactory(), lambdaContext())).rejects.toThrow('the report could not be written');

    expect(runEvents().map((event) => event.type)).toEqual(['heartbeat']);
  });

  it.each([
    ['the bare submission as the event', submissionFactory(), 'submission', '"submission.$": "$$.Execution.Input"'],
    ['no executionArn', { submission: submissionFactory() }, 'executionArn', '"executionArn.$": "$$.Execution.Id"'],
    ['the ARN path passed as text (the key lacks ".$")', taskEventFactory(submissionFactory(), '$$.Execution.Id'), 'executionArn', 'not an execution ARN'],
    ['the input path passed as text', { submission: '$$.Execution.Input', executionArn: EXECUTION_ARN }, 'submission', 'not a JSON object'],
    ['a submission without its callbackUrl', taskEventFactory(submissionFactory({ callbackUrl: undefined })), 'submission.callbackUrl', 'callbackUrl: an http(s) URL'],
    ['a submission over Step Functions\' 256 KB input', taskEventFactory(submissionFactory({ task: { text: 'x'.repeat(256 * 1024) } })), 'submission', 'at most 262144 bytes'],
    ['an ARN over the run id bound', taskEventFactory(submissionFactory(), `${EXECUTION_ARN}${'x'.repeat(MAX_RUN_ID_CHARS)}`), 'executionArn', `at most ${MAX_RUN_ID_CHARS} characters`],
    ['no object at all', null, undefined, '{ submission, executionArn }'],
  ])('refuses %s with an error naming the field, and sends nothing', async (_case, event, field, words) => {
    let called = false;
    const handler = stepFunctionsTask(
      async (_task, ctx) => {
        called = true;
        await ctx.progress('never');
      },
      { store, ...quiet },
    );

    const refusal = await handler(event, lambdaContext()).then(
      () => undefined,
      (error: unknown) => error,
    );

    expect(refusal).toBeInstanceOf(StepFunctionsTaskEventError);
    expect(refusal).toMatchObject({ name: 'StepFunctionsTaskEventError', field, message: expect.stringContaining(words) });
    expect(called).toBe(false);
    expect(received).toEqual([]);
    expect(await store.get(EXECUTION_ARN)).toBeUndefined();
  });

  it('uploads evidence without a run-state table, and says how to give one when an event needs a seq', async () => {
    const previous = process.env.KIT_RUN_TABLE;
    delete process.env.KIT_RUN_TABLE;
    try {
      const handler = stepFunctionsTask(
        async (_task, ctx) => {
          await ctx.putEvidence('out/report.md', 'text');
          ctx.heartbeat();
        },
        quiet,
      );

      await expect(handler(taskEventFactory(), lambdaContext())).rejects.toThrow(/KIT_RUN_TABLE/);

      expect(received.map((request) => `${request.method} ${request.path}`)).toEqual(['PUT /dispatches/d-sfn-1/evidence/out/report.md']);
      expect(runEvents()).toEqual([]);
    } finally {
      if (previous !== undefined) process.env.KIT_RUN_TABLE = previous;
    }
  });
});
