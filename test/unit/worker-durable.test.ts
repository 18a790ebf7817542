import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { build } from 'esbuild';
import { withDurableExecution, type DurableContext } from '@aws/durable-execution-sdk-js';
import { LocalDurableTestRunner, OperationType, WaitingOperationStatus, type DurableOperation } from '@aws/durable-execution-sdk-js-testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Clock, LogLine, RunResult } from '@dispatch-ledger/worker';
import { systemClock } from '../../packages/worker/src/heartbeat.js';
import { ApprovalCancelledError, DurableRunInputError, durableRun, type DurableRunHandler, type DurableRunOptions } from '@dispatch-ledger/worker/durable';
import { projectRoot } from '../../local/paths.js';
import { runOfDurableExecution } from '../../shared/adapters/durable-target.js';

// CONTRACT §17: the kit's durable helper inside a durable function, run by the durable SDK's local test
// runner (its checkpoints in a worker thread; a callback or a wait makes it invoke the handler again, as
// Lambda does). The ledger API is a real HTTP server on 127.0.0.1 that records every request.

interface Received {
  readonly method: string;
  readonly path: string;
  readonly runId: string | null;
  readonly body: string;
}

const RUN_ID = 'arn:aws:lambda:eu-west-1:123456789012:function:review:3/durable-execution/d-dur-1_1/0b6c1b0e-8a4e-4a8e-9d8e-3f1c2a7b9e10';
const SPILLED_TASK = { goal: 'read back from the ledger' };
/** What the ledger answers a task read with (a test may make it something else). */
let taskText = JSON.stringify(SPILLED_TASK);

let server: Server;
let callbackUrl = '';
const received: Received[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://ledger.invalid');
      const body = Buffer.concat(chunks).toString('utf8');
      received.push({ method: req.method ?? '', path: url.pathname, runId: url.searchParams.get('runId'), body });
      // A dispatch the ledger does not know: its events are refused.
      const unknown = req.method === 'POST' && body.includes('"dispatchId":"d-unknown"');
      const answer = req.method === 'GET' ? { status: 200, text: taskText } : req.method === 'PUT' ? { status: 201, text: '{}' } : unknown ? { status: 404, text: '{"error":{"code":"not_found"}}' } : { status: 202, text: '{"applied":true}' };
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(answer.text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  callbackUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  await LocalDurableTestRunner.setupTestEnvironment({ skipTime: false });
});

afterAll(async () => {
  await LocalDurableTestRunner.teardownTestEnvironment();
  await new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
});

beforeEach(() => {
  received.length = 0;
  taskText = JSON.stringify(SPILLED_TASK);
});

// --- Factories ----------------------------------------------------------------------------------------

const submissionFactory = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  dispatchId: 'd-dur-1',
  attempt: 1,
  origin: 'planner',
  task: { goal: 'review the draft' },
  expectedEvidence: ['out/review.md'],
  callbackUrl,
  timeouts: { stallAfterSeconds: 600 },
  ...extra,
});

const quiet = { log: () => undefined, retry: { budgetMs: 2_000, finalBudgetMs: 2_000, firstPauseMs: 10, maxPauseMs: 50 } };

/**
 * A runner of the durable function `handler` makes. The local runner names an execution by a bare id;
 * Lambda names it by ARN: the context is given `runId`, as Lambda's would be.
 */
function runnerOf(handler: DurableRunHandler<DurableContext>, runId = RUN_ID, options: DurableRunOptions = {}): LocalDurableTestRunner<RunResult> {
  const worker = durableRun<DurableContext>(handler, { ...quiet, ...options });
  return new LocalDurableTestRunner<RunResult>({
    handlerFunction: withDurableExecution(async (event: unknown, context) => {
      context.executionContext = { durableExecutionArn: runId };
      return worker(event, context);
    }),
  });
}

/**
 * A clock each read of which is 200 s after the one before: every heartbeat is due (the submissions'
 * stall window is 600 s, heartbeats coalesced within a fifth of it, 120 s).
 */
function hurriedClock(): Clock {
  let now = Date.parse('2025-06-01T08:00:00.000Z');
  return {
    now: () => (now += 200_000),
    // Timers as the kit's own clock sets them (nothing here waits on one: the reads move the time).
    setTimer: systemClock.setTimer,
  };
}

/** The callback of a `requestApproval`, once its submitter posted the request. */
async function approvalCallback(runner: LocalDurableTestRunner<RunResult>, name: string): Promise<DurableOperation> {
  const approval = await runner.getOperation(name).waitForData(WaitingOperationStatus.SUBMITTED);
  const callback = approval.getChildOperations()?.find((operation) => operation.getType() === OperationType.CALLBACK);
  if (!callback) throw new Error(`${name} has no callback`);
  return callback;
}

/** The run events the ledger received, in arrival order. */
function runEvents(): Array<Record<string, unknown> & { readonly runId: string; readonly seq: number; readonly type: string }> {
  return received.flatMap((request) => {
    const match = /^\/runs\/([^/]+)\/events$/.exec(request.path);
    if (request.method !== 'POST' || !match?.[1]) return [];
    const event = JSON.parse(request.body) as Record<string, unknown> & { seq: number; type: string };
    return [{ runId: decodeURIComponent(match[1]), ...event }];
  });
}

/** The result the ledger's lookup records from an execution that succeeded with `output` (CONTRACT §17). */
function lookedUp(output: unknown): unknown {
  return runOfDurableExecution({ $metadata: {}, DurableExecutionArn: RUN_ID, DurableExecutionName: 'd-dur-1_1', FunctionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:review:3', StartTimestamp: new Date(0), Status: 'SUCCEEDED', Result: JSON.stringify(output) })?.result;
}

// --- The specification ------------------------------------------------------------------------------------

describe('durableRun', () => {
  it('numbers its events by their durable steps: a replay after a wait posts none again, and the end is reported completed with the result', async () => {
    const runner = runnerOf(async (task, ctx) => {
      await ctx.progress('started');
      await ctx.durable.step('upload', async () => ctx.putEvidence('out/review.md', `# ${String(task.goal)}\n`));
      // The handler runs again from the top after the wait: the two steps above return their records.
      await ctx.durable.wait({ seconds: 1 });
      await ctx.progress('after the wait');
      return { summary: 'reviewed', body: { pages: 3 } };
    });

    const execution = await runner.run({ payload: submissionFactory() });

    expect(execution.getStatus()).toBe('SUCCEEDED');
    expect(execution.getResult()).toEqual({ summary: 'reviewed', body: { pages: 3 } });
    expect(execution.getInvocations()).toHaveLength(2);
    expect(runEvents().map(({ runId, seq, type }) => [runId, seq, type])).toEqual([
      [RUN_ID, 1, 'progress'],
      [RUN_ID, 2, 'progress'],
      [RUN_ID, 3, 'completed'],
    ]);
    expect(runEvents()[2]).toMatchObject({ dispatchId: 'd-dur-1', result: { summary: 'reviewed', body: { pages: 3 } } });
    // Looked up instead (its final event lost), the execution's output reads as the same result.
    expect(lookedUp(execution.getResult())).toEqual({ summary: 'reviewed', bodyJson: JSON.stringify({ pages: 3 }) });
    expect(received.filter((request) => request.method === 'PUT')).toEqual([{ method: 'PUT', path: '/dispatches/d-dur-1/evidence/out/review.md', runId: RUN_ID, body: '# review the draft\n' }]);
    // Each event's step keeps its record, the progress note with it (the event carries no text).
    expect(runner.getOperation('ledger-progress#1').getStepDetails()?.result).toMatchObject({ seq: 1, note: 'started' });
  });

  it('posts approval_requested with the callback id alone and returns the ledger\'s decision when the callback completes', async () => {
    let granted: unknown;
    const runner = runnerOf(async (_task, ctx) => {
      granted = await ctx.requestApproval();
    });
    const finished = runner.run({ payload: submissionFactory() });

    const callback = await approvalCallback(runner, 'ledger-approval#1');
    const callbackId = callback.getCallbackDetails()?.callbackId;
    expect(runEvents()).toEqual([{ runId: RUN_ID, dispatchId: 'd-dur-1', seq: 1, type: 'approval_requested', callbackId }]);
    await callback.sendCallbackSuccess(JSON.stringify({ approvalId: 'dur-abc', decision: 'approve' }));

    expect((await finished).getStatus()).toBe('SUCCEEDED');
    expect(granted).toEqual({ approvalId: 'dur-abc', decision: 'approve' });
    expect(runEvents().map(({ seq, type }) => [seq, type])).toEqual([
      [1, 'approval_requested'],
      [2, 'completed'],
    ]);
  });

  it('reports the run cancelled, and fails the execution with ApprovalCancelledError, when the approval is cancelled through the ledger', async () => {
    let seen: unknown;
    const runner = runnerOf(async (_task, ctx) => {
      try {
        await ctx.requestApproval();
      } catch (error) {
        seen = error;
        throw error;
      }
    });
    const finished = runner.run({ payload: submissionFactory() });

    const callback = await approvalCallback(runner, 'ledger-approval#1');
    await callback.sendCallbackFailure({ ErrorType: 'ApprovalCancelled', ErrorMessage: 'approval dur-abc was cancelled through the ledger' });
    const execution = await finished;

    expect(seen).toBeInstanceOf(ApprovalCancelledError);
    expect(execution.getStatus()).toBe('FAILED');
    expect(execution.getError()).toMatchObject({ errorType: 'ApprovalCancelledError', errorMessage: expect.stringContaining('approval dur-abc was cancelled through the ledger') });
    expect(runEvents().map(({ seq, type }) => [seq, type])).toEqual([
      [1, 'approval_requested'],
      [2, 'cancelled'],
    ]);
  });

  it('reports the run failed with what the handler threw, and fails the execution with it', async () => {
    const runner = runnerOf(async (_task, ctx) => {
      await ctx.heartbeat();
      throw new Error('the draft could not be read');
    });

    const execution = await runner.run({ payload: submissionFactory() });

    expect(execution.getStatus()).toBe('FAILED');
    expect(execution.getError()).toMatchObject({ errorMessage: 'the draft could not be read' });
    expect(runEvents().map(({ seq, type, result }) => [seq, type, result])).toEqual([
      [1, 'heartbeat', undefined],
      [2, 'failed', { summary: 'the draft could not be read' }],
    ]);
  });

  it('reports failed, said why, a result the ledger would not take (a body over 256 KB)', async () => {
    const runner = runnerOf(async () => ({ summary: 'too much', body: { text: 'x'.repeat(300 * 1024) } }));

    const execution = await runner.run({ payload: submissionFactory() });

    expect(execution.getStatus()).toBe('FAILED');
    expect(execution.getError()).toMatchObject({ errorType: 'ResultRefusedError', errorMessage: expect.stringContaining('result_too_large') });
    expect(runEvents()).toMatchObject([{ seq: 1, type: 'failed', result: { summary: expect.stringContaining('result_too_large') } }]);
  });

  it('does not retry an event the ledger refuses: the step fails, the handler sees it, and the execution fails with it', async () => {
    const logged: string[] = [];
    const worker = durableRun<DurableContext>(
      async (_task, ctx) => {
        await ctx.progress('started');
      },
      { ...quiet, log: (line) => logged.push(line.msg) },
    );
    const runner = new LocalDurableTestRunner<RunResult>({
      handlerFunction: withDurableExecution(async (event: unknown, context) => {
        context.executionContext = { durableExecutionArn: RUN_ID };
        return worker(event, context);
      }),
    });

    const execution = await runner.run({ payload: submissionFactory({ dispatchId: 'd-unknown' }) });

    expect(execution.getStatus()).toBe('FAILED');
    expect(execution.getError()).toMatchObject({ errorMessage: expect.stringContaining('posting progress (seq 1): the ledger refused it (HTTP 404 not_found)') });
    // Each sent once: a refusal is not retried, by the callback or by the step; the end could not be reported either.
    expect(runEvents().map(({ seq, type }) => [seq, type])).toEqual([
      [1, 'progress'],
      [2, 'failed'],
    ]);
    expect(runner.getOperation('ledger-progress#1').getStepDetails()?.attempt).toBe(1);
    expect(logged).toContain('final_event_not_sent');
  });

  it('ends an execution whose handler returned as a success even when its end could not be reported: the ledger’s lookup records it (was: failed, so a lookup recorded work that succeeded as failed)', async () => {
    const logged: string[] = [];
    const worker = durableRun<DurableContext>(async () => ({ summary: 'done' }), { ...quiet, log: (line) => logged.push(line.msg) });
    const runner = new LocalDurableTestRunner<RunResult>({
      handlerFunction: withDurableExecution(async (event: unknown, context) => {
        context.executionContext = { durableExecutionArn: RUN_ID };
        return worker(event, context);
      }),
    });
    const execution = await runner.run({ payload: submissionFactory({ dispatchId: 'd-unknown' }) });
    expect(execution.getStatus()).toBe('SUCCEEDED');
    expect(execution.getResult()).toMatchObject({ summary: 'done' });
    expect(runEvents().map(({ type }) => type)).toEqual(['completed']);
    expect(logged).toContain('final_event_not_sent');
    // The lookup records the result the handler returned (was: the kit's `{ summary }` wrapper kept as the body).
    expect(lookedUp(execution.getResult())).toEqual({ summary: 'done' });
  }, 20_000);

  it("posts a step's heartbeats with increasing seqs from the block it reserved, once: a replay posts none again, and the events after the step take seqs after the block", async () => {
    const decisions: string[] = [];
    const runner = runnerOf(
      async (_task, ctx) => {
        await ctx.progress('started');
        const pages = await ctx.step('render', async (step) => {
          for (let page = 0; page < 3; page++) decisions.push(step.heartbeat());
          await step.putEvidence('out/review.md', '# review\n');
          return 3;
        });
        // The handler runs again from the top after the wait: the block's record and the step's result return, nothing is posted.
        await ctx.durable.wait({ seconds: 1 });
        await ctx.progress(`rendered ${pages} pages`);
        return { summary: 'rendered' };
      },
      RUN_ID,
      { clock: hurriedClock() },
    );

    const execution = await runner.run({ payload: submissionFactory() });

    expect(execution.getStatus()).toBe('SUCCEEDED');
    expect(execution.getInvocations()).toHaveLength(2);
    // One operation reserved seqs 2..10 (a heartbeat per 120 s through a 15-minute invocation, plus one).
    expect(runner.getOperation('ledger-block#2').getStepDetails()?.result).toEqual({ seq: 2, seqs: 9 });
    expect(decisions).toEqual(['sent', 'sent', 'sent']);
    expect(runEvents().map(({ seq, type }) => [seq, type])).toEqual([
      [1, 'progress'],
      [2, 'heartbeat'],
      [3, 'heartbeat'],
      [4, 'heartbeat'],
      [11, 'progress'],
      [12, 'completed'],
    ]);
    expect(received.filter((request) => request.method === 'PUT').map((request) => request.path)).toEqual(['/dispatches/d-dur-1/evidence/out/review.md']);
    expect(runner.getOperation('ledger-progress#11').getStepDetails()?.result).toMatchObject({ seq: 11, note: 'rendered 3 pages' });
  });

  it('reuses its block from the start when the SDK retries a step that threw: no seq from outside the block', async () => {
    const attempts: number[] = [];
    const runner = runnerOf(
      async (_task, ctx) => {
        await ctx.heartbeat();
        return {
          summary: await ctx.step(
            'flaky',
            async (step) => {
              attempts.push(step.attempt);
              step.heartbeat();
              step.heartbeat();
              if (step.attempt === 1) throw new Error('the renderer crashed');
              return 'rendered on the retry';
            },
            { seqs: 4, retryStrategy: (_error, attempt) => (attempt < 2 ? { shouldRetry: true, delay: { seconds: 1 } } : { shouldRetry: false }) },
          ),
        };
      },
      RUN_ID,
      { clock: hurriedClock() },
    );

    const execution = await runner.run({ payload: submissionFactory() });

    expect(execution.getStatus()).toBe('SUCCEEDED');
    expect(attempts).toEqual([1, 2]);
    // The retry's heartbeats carry the first attempt's seqs again (the ledger answers them stale); the end comes after the block, 2..5.
    expect(runEvents().map(({ seq, type }) => [seq, type])).toEqual([
      [1, 'heartbeat'],
      [2, 'heartbeat'],
      [3, 'heartbeat'],
      [2, 'heartbeat'],
      [3, 'heartbeat'],
      [6, 'completed'],
    ]);
  });

  it('posts no event past its block: heartbeats beyond it are coalesced, and said once in the log', async () => {
    const logged: LogLine[] = [];
    let decisions: string[] = [];
    let refused: unknown;
    const runner = runnerOf(
      async (_task, ctx) => {
        refused = await ctx.step('none', async () => 'never run', { seqs: 0 }).catch((error: unknown) => error);
        decisions = await ctx.step('long', async (step) => Array.from({ length: 5 }, () => step.heartbeat()), { seqs: 3 });
        await ctx.progress('after the step');
      },
      RUN_ID,
      { clock: hurriedClock(), log: (line) => logged.push(line) },
    );

    expect((await runner.run({ payload: submissionFactory() })).getStatus()).toBe('SUCCEEDED');

    expect(refused).toBeInstanceOf(RangeError);
    expect(decisions).toEqual(['sent', 'sent', 'sent', 'coalesced', 'coalesced']);
    expect(runEvents().map(({ seq, type }) => [seq, type])).toEqual([
      [1, 'heartbeat'],
      [2, 'heartbeat'],
      [3, 'heartbeat'],
      [4, 'progress'],
      [5, 'completed'],
    ]);
    expect(logged.filter((line) => line.msg === 'step_seqs_used_up')).toMatchObject([{ level: 'warn', step: 'long', seqs: 3 }]);
  });

  it("coalesces a step's heartbeats within a fifth of the stall window of the run's last event, as the handler's are; its progress takes the block's next seq", async () => {
    const decisions: string[] = [];
    const runner = runnerOf(async (_task, ctx) => {
      await ctx.heartbeat();
      await ctx.step('review', async (step) => {
        decisions.push(step.heartbeat());
        await step.progress('half way');
        decisions.push(step.heartbeat());
      });
    });

    expect((await runner.run({ payload: submissionFactory() })).getStatus()).toBe('SUCCEEDED');

    expect(decisions).toEqual(['coalesced', 'coalesced']);
    expect(runEvents().map(({ seq, type }) => [seq, type])).toEqual([
      [1, 'heartbeat'],
      [2, 'progress'],
      [11, 'completed'],
    ]);
  });

  it("reads a spilled task from the ledger with ?runId=<the execution's ARN>", async () => {
    let taskSeen: unknown;
    const runner = runnerOf(async (task) => {
      taskSeen = task;
    });
    const { task: _inline, ...spilled } = submissionFactory({ taskRef: `${callbackUrl}/dispatches/d-dur-1/task` });

    expect((await runner.run({ payload: spilled })).getStatus()).toBe('SUCCEEDED');

    expect(taskSeen).toEqual(SPILLED_TASK);
    expect(received[0]).toEqual({ method: 'GET', path: '/dispatches/d-dur-1/task', runId: RUN_ID, body: '' });
  });

  it("fails the run in its own words when the task read answers 200 with something that is not JSON, never quoting that answer", async () => {
    // The bug it pins: the Lambda and durable kits parsed the answer unguarded, so a proxy's page made a
    // SyntaxError whose message, quoting the page, became the run's failure summary (the HTTP kit's did not).
    taskText = '<html><body>sign in to proxy.internal as alice</body></html>';
    let called = false;
    const runner = runnerOf(async () => {
      called = true;
    });
    const { task: _inline, ...spilled } = submissionFactory({ taskRef: `${callbackUrl}/dispatches/d-dur-1/task` });

    await runner.run({ payload: spilled });

    expect(called).toBe(false);
    const final = runEvents().at(-1);
    expect(final).toMatchObject({ type: 'failed', result: { summary: expect.stringContaining('the spilled task is not JSON') } });
    expect(JSON.stringify(runEvents())).not.toContain('proxy.internal');
  });

  it.each([
    ['the submission wrapped in another object', { submission: submissionFactory() }, RUN_ID, 'submission.dispatchId'],
    ['a submission without its callbackUrl', submissionFactory({ callbackUrl: undefined }), RUN_ID, 'submission.callbackUrl'],
    ['no object at all', 'review the draft', RUN_ID, 'submission'],
    ['a context naming no execution', submissionFactory(), '', 'durableExecutionArn'],
    ['an execution ARN over the run id bound', submissionFactory(), `${RUN_ID}${'x'.repeat(1024)}`, 'durableExecutionArn'],
  ])('refuses %s with DurableRunInputError naming the field, and sends nothing', async (_case, payload, runId, field) => {
    let called = false;
    const runner = runnerOf(async () => {
      called = true;
    }, runId);

    const execution = await runner.run({ payload });

    expect(execution.getStatus()).toBe('FAILED');
    expect(execution.getError()).toMatchObject({ errorType: 'DurableRunInputError' });
    expect(called).toBe(false);
    expect(received).toEqual([]);
    // The error names the field to the code that calls the helper directly.
    const direct = await durableRun(async () => undefined, quiet)(payload, { executionContext: { durableExecutionArn: runId }, lambdaContext: { awsRequestId: 'r-1', getRemainingTimeInMillis: () => 60_000 }, step: () => Promise.reject(new Error('no step')), waitForCallback: () => Promise.reject(new Error('no callback')) }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(direct).toBeInstanceOf(DurableRunInputError);
    expect(direct).toMatchObject({ field });
  });
});

/** The packages a bundle of `source` takes modules from (as test/unit/worker-subpaths.test.ts reads them). */
async function packagesBundledBy(source: string): Promise<Set<string>> {
  const result = await build({ stdin: { contents: source, resolveDir: projectRoot, loader: 'ts' }, bundle: true, write: false, metafile: true, platform: 'node', format: 'esm', conditions: ['@dispatch-ledger/source'], logLevel: 'silent' });
  return new Set(Object.keys(result.metafile.inputs).flatMap((input) => /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input)?.slice(1, 2) ?? []));
}

describe('@dispatch-ledger/worker/durable as a subpath', () => {
  it('loads neither the durable SDK (an optional peer: the handler is given its context) nor the DynamoDB SDK; the other entries never load the durable SDK', async () => {
    const durable = await packagesBundledBy("import { durableRun } from '@dispatch-ledger/worker/durable'; export const handler = durableRun(async () => undefined);");
    expect([...durable].filter((name) => name.includes('dynamodb') || name.startsWith('@aws/durable'))).toEqual([]);
    expect(durable.has('zod')).toBe(true);
    const others = await Promise.all(
      ["export * from '@dispatch-ledger/worker';", "export * from '@dispatch-ledger/worker/lambda';", "export * from '@dispatch-ledger/worker/stepfunctions';"].map((source) => packagesBundledBy(source)),
    );
    expect(others.map((names) => [...names].filter((name) => name.startsWith('@aws/durable')))).toEqual([[], [], []]);
  }, 60_000);
});
