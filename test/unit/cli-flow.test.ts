import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DynamoDBDocumentClient, GetCommand, PutCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { attention, describeAttention, type AtCapacityLine } from '../../cli/dispatch.js';
import { REFUSED } from '../../cli/answer.js';
import { cancel, describeCancel, describeFailure, describeRelease, slots } from '../../cli/flow.js';
import { maxConcurrentRunsOf, registry, UsageError } from '../../cli/operations.js';
import { USAGE } from '../../cli/usage.js';
import { createLocalCredentials } from '../../local/runtime/sigv4.js';
import { writeCredentials } from '../../local/state.js';
import { closeFakeApis, fakeApi } from '../support/fake-api.js';
import { execFileSync } from 'node:child_process';
import { whenTargetForgot } from '../../shared/dispatch/attention.js';
import { DEFAULT_RETRY_POLICY } from '../../shared/dispatch/retry.js';
import { accepted, submitted } from '../../shared/dispatch/transitions/lifecycle.js';
import { newDispatchFactory, NOW } from '../support/factories.js';

// Flow control from the CLI (CONTRACT §2 v2, §11): `ledger cancel`, `ledger slots release`, the
// at_capacity entries of `ledger attention` and `--max-concurrent-runs` of `ledger registry target put`.
// The commands run against a fake of the API on 127.0.0.1 answering canned contract JSON (it stands in
// for the ledger only here, to pin what the CLI sends and prints); the registry write against a mock of
// the DynamoDB document client (the SDK boundary).

const RLO = '\u202e';
const ESC = '\u001b';
/** Raw control and bidi characters: none may reach a terminal. */
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]/;

const dirs: string[] = [];
afterEach(async () => {
  await closeFakeApis();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** What `POST /dispatches/{id}/cancel` answers (CONTRACT §2 v2), for a dispatch asked of its target. */
function cancelAnswerFactory(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    dispatchId: 'd-1',
    phase: 'submitted',
    status: 'running',
    cancelRequestedAt: '2026-12-01T10:00:00.000Z',
    cancel: { reason: 'no longer needed', asks: 1, answer: 'accepted by the target; the run is running', nextAskAt: null },
    cancelled: false,
    askedNow: true,
    ...overrides,
  };
}

/** A target at capacity as `GET /attention` lists it (CONTRACT §2 v2 `at_capacity`). */
function atCapacityFactory(overrides: Partial<AtCapacityLine> = {}): AtCapacityLine {
  return { kind: 'at_capacity', target: 'demo-agent', limit: 2, held: 2, heldByUnknownRuns: 1, waiting: 3, since: '2026-12-01T10:00:00.000Z', reason: 'all 2 slot(s) held, 1 by runs whose status is unknown; 3 dispatch(es) waiting', ...overrides };
}

const conflict = { error: { code: 'conflict', message: 'the dispatch is already over: nothing to cancel', details: { phase: 'submitted', status: 'completed' } } };

describe('describeCancel', () => {
  it('says a dispatch never submitted was cancelled at once', () => {
    expect(describeCancel(cancelAnswerFactory({ phase: 'cancelled', status: null, cancelled: true, cancel: { reason: 'r', asks: 0, answer: null, nextAskAt: null } }))).toBe(
      'cancelled at once: d-1 was never submitted, so its target never sees it',
    );
  });

  it('says the cancel was asked of the target, with its answer, and that only the target ends the run', () => {
    const [first, second] = describeCancel(cancelAnswerFactory()).split('\n');
    expect(first).toBe("cancel asked of the target: d-1 (requested at 2026-12-01T10:00:00.000Z); the target's answer: accepted by the target; the run is running");
    expect(second).toBe('the run is cancelled only when the target says so: npx ledger check d-1 --refresh --origin planner');
    // The check it suggests names what the cancel was called with (was: neither, so another origin's dispatch answered 404).
    expect(describeCancel(cancelAnswerFactory(), 'team-a', ['--stack', 'prod']).split('\n')[1]).toBe('the run is cancelled only when the target says so: npx ledger check d-1 --refresh --stack prod --origin team-a');
  });

  it('says when the target could not be reached and when it is asked again; an earlier ask is not asked twice', () => {
    const unreachable = cancelAnswerFactory({ cancel: { asks: 1, answer: 'the target could not be reached: HTTP 503', nextAskAt: '2026-12-01T10:00:30.000Z' } });
    expect(describeCancel(unreachable)).toContain("the target's answer: the target could not be reached: HTTP 503; asked again at 2026-12-01T10:00:30.000Z");
    const again = describeCancel(cancelAnswerFactory({ askedNow: false, cancel: { asks: 3, answer: null, nextAskAt: null } }));
    expect(again).toContain('cancel already asked: d-1 (requested at 2026-12-01T10:00:00.000Z, asked 3 time(s)); no answer from the target yet');
  });

  it('says when the target has confirmed the cancel', () => {
    expect(describeCancel(cancelAnswerFactory({ status: 'cancelled', cancelled: true }))).toBe('cancelled: d-1; the target confirmed it (run cancelled)');
  });

  it("escapes the target's answer: a bidi override or an escape sequence stays inert and adds no line", () => {
    const text = describeCancel(cancelAnswerFactory({ cancel: { asks: 1, answer: `ok${RLO}\nfake: cancelled ${ESC}[2J`, nextAskAt: null } }));
    expect(text).not.toMatch(RAW);
    expect(text).toContain('ok\\u202e\\u000afake: cancelled \\u001b[2J');
    expect(text.split('\n')).toHaveLength(2);
  });
});

describe('cancel (against a fake of the API)', () => {
  it('posts the reason as the owning origin, prints what happened and exits 0 on 202', async () => {
    const api = await fakeApi(() => ({ status: 202, body: cancelAnswerFactory() }));
    const printed: string[] = [];
    expect(await cancel(['d-1', '--reason', 'no longer needed', '--origin', 'reviewer'], (line) => printed.push(line), api.connect)).toBe(0);
    expect(api.seen).toEqual([{ method: 'POST', path: '/dispatches/d-1/cancel', origin: 'reviewer', accessKey: undefined, body: { reason: 'no longer needed' } }]);
    expect(printed[0]).toMatch(/^cancel asked of the target: d-1/);
  });

  it("exits 1 with the API's message for a dispatch already over (409), and prints the body as it came with --json", async () => {
    const api = await fakeApi(() => ({ status: 409, body: conflict }));
    const printed: string[] = [];
    expect(await cancel(['d-1', '--reason', 'too late'], (line) => printed.push(line), api.connect)).toBe(1);
    expect(printed).toEqual(['409 conflict: the dispatch is already over: nothing to cancel']);
    printed.length = 0;
    expect(await cancel(['d-1', '--reason', 'too late', '--json'], (line) => printed.push(line), api.connect)).toBe(1);
    expect(printed).toEqual([JSON.stringify(conflict)]);
    printed.length = 0;
    const answered = await fakeApi(() => ({ status: 202, body: cancelAnswerFactory({ phase: 'cancelled' }) }));
    expect(await cancel(['d-1', '--reason', 'r', '--json'], (line) => printed.push(line), answered.connect)).toBe(0);
    expect(JSON.parse(printed[0] ?? '')).toEqual(cancelAnswerFactory({ phase: 'cancelled' }));
  });

  it('encodes the dispatch id as one path segment (it cannot reach another route)', async () => {
    const api = await fakeApi(() => ({ status: 404, body: { error: { code: 'not_found', message: 'no dispatch' } } }));
    expect(await cancel(['d/../../targets/x?y', '--reason', 'r'], () => undefined, api.connect)).toBe(1);
    expect(api.seen[0]?.path).toBe('/dispatches/d%2F..%2F..%2Ftargets%2Fx%3Fy/cancel');
  });

  it.each([
    [[], /cancel needs exactly one <dispatchId>/],
    [['d-1', 'd-2', '--reason', 'r'], /cancel needs exactly one <dispatchId>/],
    [['d-1'], /cancel needs --reason/],
    [['d-1', '--reason', '  '], /cancel needs --reason/],
  ])('refuses %j with a usage error, sending nothing', async (args, problem) => {
    const api = await fakeApi(() => ({ status: 202, body: {} }));
    const refused = cancel(args, () => undefined, api.connect);
    await expect(refused).rejects.toBeInstanceOf(UsageError);
    await expect(refused).rejects.toThrow(problem);
    await expect(refused).rejects.toThrow('usage: ledger cancel <dispatchId> --reason R');
    expect(api.seen).toEqual([]);
  });
});

describe('slots release (against a fake of the API)', () => {
  it('posts the run, the reason and the dispatch as the operator, and prints who released which slot', async () => {
    const api = await fakeApi(() => ({ status: 200, body: { released: true, target: 'demo-agent', runId: 'r-7', dispatchId: 'd-7', status: 'unknown', releasedBy: 'local:operator' } }));
    const printed: string[] = [];
    expect(await slots(['release', '--target', 'demo-agent', '--run-id', 'r-7', '--reason', 'the agent lost it', '--dispatch-id', 'd-7'], (line) => printed.push(line), api.connect)).toBe(0);
    expect(api.seen).toEqual([
      { method: 'POST', path: '/targets/demo-agent/slots/release', origin: undefined, accessKey: undefined, body: { runId: 'r-7', reason: 'the agent lost it', dispatchId: 'd-7' } },
    ]);
    expect(printed).toEqual(['released: the slot of run r-7 (dispatch d-7) of target demo-agent, by local:operator; the run stays unknown']);
  });

  it('leaves the dispatch to the ledger when not given, and exits 1 with its message for 404, 409 and 502', async () => {
    const answers: Record<string, { status: number; body: unknown }> = {
      'r-none': { status: 404, body: { error: { code: 'not_found', message: 'no run r-none of target demo-agent holds a slot' } } },
      'r-known': { status: 409, body: { error: { code: 'conflict', message: 'the target still knows run r-known (running): its slot stays until it is known to be over' } } },
      'r-far': { status: 502, body: { error: { code: 'target_unreachable', message: 'the target could not be asked about the run: timeout' } } },
    };
    const api = await fakeApi((seen) => answers[(seen.body as { runId: string }).runId] ?? { status: 500, body: {} });
    for (const [runId, { status }] of Object.entries(answers)) {
      const printed: string[] = [];
      expect(await slots(['release', '--target', 'demo-agent', '--run-id', runId, '--reason', 'r'], (line) => printed.push(line), api.connect), runId).toBe(1);
      expect(printed[0], runId).toMatch(new RegExp(`^${status} (not_found|conflict|target_unreachable): `));
      expect(api.seen.at(-1)?.body).toEqual({ runId, reason: 'r' });
    }
  });

  it("prints a slot's release command that a shell hands back word for word, whatever the run id (regression: a run id with a space or a quote split into other words)", async () => {
    const api = await fakeApi(() => ({ status: 200, body: { released: true, target: 'demo-agent', runId: 'x', dispatchId: 'x', status: 'unknown', releasedBy: 'local:operator' } }));
    for (const [runId, dispatchId] of [
      ['r 1/it\'s "done" $HOME ~ *', 'd-1'],
      ['-r-2', '-d-2'],
      ['plain:r-3', 'd-3'],
    ] as const) {
      const held = { ...submitted(accepted(newDispatchFactory({ dispatchId }), NOW), { kind: 'accepted', runId, status: 'running', requestId: 'q-1' }, DEFAULT_RETRY_POLICY, NOW), slot: { shard: 0, at: NOW.toISOString() } };
      const hint = /its slot: npx ledger slots release (.+) --reason R$/.exec(whenTargetForgot(held))?.[1];
      expect(hint, runId).toBeDefined();
      // What a person pastes, as /bin/sh splits it: each word printed and read back apart.
      const words = execFileSync('/bin/sh', ['-c', `printf '%s\\0' ${hint} --reason R`], { encoding: 'utf8' }).split('\0').slice(0, -1);
      expect(await slots(['release', ...words], () => undefined, api.connect), runId).toBe(0);
      expect(api.seen.at(-1)?.body, runId).toEqual({ runId, reason: 'R', dispatchId });
    }
  });

  it('prints the body as it came with --json', async () => {
    const body = { released: true, target: 'demo-agent', runId: 'r-1', dispatchId: 'd-1', status: 'unknown', releasedBy: 'AIDAOPERATOR' };
    const api = await fakeApi(() => ({ status: 200, body }));
    const printed: string[] = [];
    expect(await slots(['release', '--target', 'demo-agent', '--run-id', 'r-1', '--reason', 'r', '--json'], (line) => printed.push(line), api.connect)).toBe(0);
    expect(printed).toEqual([JSON.stringify(body)]);
  });

  it.each([
    [[], /usage: ledger slots release/],
    [['grab', '--target', 't'], /usage: ledger slots release/],
    [['release', '--run-id', 'r', '--reason', 'x'], /needs --target/],
    [['release', '--target', 't', '--reason', 'x'], /needs --run-id/],
    [['release', '--target', 't', '--run-id', 'r'], /needs --reason/],
    [['release', 'extra', '--target', 't', '--run-id', 'r', '--reason', 'x'], /takes no positional arguments/],
  ])('refuses %j with a usage error, sending nothing', async (args, problem) => {
    const api = await fakeApi(() => ({ status: 200, body: {} }));
    const refused = slots(args, () => undefined, api.connect);
    await expect(refused).rejects.toBeInstanceOf(UsageError);
    await expect(refused).rejects.toThrow(problem);
    expect(api.seen).toEqual([]);
  });

  it("escapes what the ledger echoes of the target's run id", () => {
    const text = describeRelease({ target: 'demo-agent', runId: `r-${RLO}1${ESC}[8m`, dispatchId: 'd-1', status: 'unknown', releasedBy: 'op' });
    expect(text).not.toMatch(RAW);
    expect(text).toContain('run r-\\u202e1\\u001b[8m');
  });
});

describe('under --sigv4 (ledger local up --sigv4)', () => {
  it('signs a slot release as the operator and a cancel as the origin, as callers in AWS sign', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ledger-cli-flow-'));
    dirs.push(dir);
    const credentials = createLocalCredentials({ origins: ['planner'], targets: ['demo-agent'] });
    const credentialsFile = writeCredentials(dir, { region: 'us-east-1', service: 'lambda', credentials });
    const api = await fakeApi((seen) => (seen.path.includes('/slots/') ? { status: 200, body: { released: true } } : { status: 202, body: cancelAnswerFactory() }), { credentialsFile });
    expect(await slots(['release', '--target', 'demo-agent', '--run-id', 'r-1', '--reason', 'lost'], () => undefined, api.connect)).toBe(0);
    expect(await cancel(['d-1', '--reason', 'stop'], () => undefined, api.connect)).toBe(0);
    expect(api.seen.map((seen) => seen.accessKey)).toEqual([credentials.operator.accessKeyId, credentials.origins.planner?.accessKeyId]);
  });
});

describe('describeFailure', () => {
  it("shows the API's error code and message, and any other body as JSON", () => {
    expect(describeFailure(409, conflict)).toBe('409 conflict: the dispatch is already over: nothing to cancel');
    expect(describeFailure(500, { oops: true })).toBe('500: {"oops":true}');
    expect(describeFailure(403, { error: { code: 'forbidden', message: `no${RLO}` } }).split('\n')[0]).toBe('403 forbidden: no\\u202e');
  });

  it('says a 403 means the credentials were refused, whatever shape its body has (a function URL answers its own)', () => {
    expect(describeFailure(403, { error: { code: 'forbidden', message: 'the request signature does not match' } })).toBe(`403 forbidden: the request signature does not match\n${REFUSED}`);
    expect(describeFailure(403, { Message: 'Forbidden' })).toBe(`403: {"Message":"Forbidden"}\n${REFUSED}`);
    expect(REFUSED).toMatch(/^the credentials were refused/);
  });
});

describe('ledger attention --kind', () => {
  it('lists every kind when --kind is empty, as when it is not given', async () => {
    const api = await fakeApi(() => ({ status: 200, body: { items: [], cursor: null } }));
    expect(await attention(['--kind', ''], () => undefined, api.connect)).toBe(0);
    expect(api.seen.map((seen) => seen.path)).toEqual(['/attention?limit=50']);
  });
});

describe('describeAttention (ledger attention)', () => {
  it('shows a target at capacity readably: held/limit, held by unknown runs, waiting — and how to free a lost run\'s slot', () => {
    const lines = describeAttention([atCapacityFactory()]).split('\n');
    expect(lines[0]).toMatch(/^at capacity\s+slots held\s+held by unknown runs\s+waiting\s+full since$/);
    expect(lines[2]).toMatch(/^demo-agent\s+2\/2\s+1\s+3\s+2026-12-01T10:00:00\.000Z$/);
    expect(lines[3]).toBe(
      'demo-agent: 1 slot(s) held by runs whose status is unknown; for a run the target no longer knows (see: npx ledger attention --kind unknown): npx ledger slots release --target demo-agent --run-id RUN --dispatch-id D --reason TEXT',
    );
  });

  it('lists targets at capacity first, then the dispatches, and gives no release hint when no unknown run holds a slot', () => {
    const text = describeAttention([
      atCapacityFactory({ target: 'busy-agent', heldByUnknownRuns: 0, waiting: 1000 }),
      { kind: 'cancel_pending', dispatchId: 'd-9', origin: 'planner', target: 'busy-agent', since: '2026-12-01T10:00:00.000Z', reason: 'cancel asked' },
    ]);
    const lines = text.split('\n');
    expect(lines[2]).toMatch(/^busy-agent\s+2\/2\s+0\s+1000\+\s+2026-12-01T10:00:00\.000Z$/);
    expect(text).not.toContain('slots release');
    // At 80 columns the widest column (since) leaves the grid for a line of its own under the row.
    expect(lines[4]).toMatch(/^kind\s+dispatch\s+origin\s+target\s+why$/);
    expect(lines[6]).toMatch(/^cancel_pending\s+d-9\s+planner\s+busy-agent\s+cancel asked$/);
    expect(lines[7]).toBe('  since: 2026-12-01T10:00:00.000Z');
  });

  it('escapes every cell, a target-supplied reason included', () => {
    const text = describeAttention([
      atCapacityFactory({ target: `agent${RLO}` }),
      { kind: 'unknown', dispatchId: 'd-1', origin: 'planner', target: 'agent', since: 'now', reason: `lost r-${RLO}1${ESC}[2K` },
    ]);
    expect(text).not.toMatch(RAW);
    expect(text).toContain('agent\\u202e');
    expect(text).toContain('lost r-\\u202e1\\u001b[2K');
  });

  it('says when nothing needs attention', () => {
    expect(describeAttention([])).toBe('nothing needs attention');
  });
});

describe('attention (against a fake of the API)', () => {
  it('asks for at_capacity as the operator and prints the targets table', async () => {
    const api = await fakeApi(() => ({ status: 200, body: { items: [atCapacityFactory()], cursor: null } }));
    const printed: string[] = [];
    expect(await attention(['--kind', 'at_capacity'], (line) => printed.push(line), api.connect)).toBe(0);
    expect(api.seen[0]).toMatchObject({ method: 'GET', path: '/attention?limit=50&kind=at_capacity' });
    expect(printed[2]).toMatch(/^demo-agent\s+2\/2\s+1\s+3\s+2026-12-01T10:00:00\.000Z$/);
  });
});

describe('ledger registry target put --max-concurrent-runs', () => {
  const documents = mockClient(DynamoDBDocumentClient);
  afterEach(() => documents.reset());

  it('reads a whole number from 1 to 10,000, absent as unlimited', () => {
    expect(maxConcurrentRunsOf(undefined)).toBeUndefined();
    expect(maxConcurrentRunsOf('1')).toBe(1);
    expect(maxConcurrentRunsOf('10000')).toBe(10_000);
    for (const value of ['0', '10001', '-1', '2.5', '1e3', 'ten', '']) expect(() => maxConcurrentRunsOf(value), value).toThrow(/--max-concurrent-runs must be a whole number from 1 to 10,000/);
  });

  it('writes the limit into the target registration, and says so', async () => {
    documents.onAnyCommand().resolves({});
    const printed: string[] = [];
    expect(await registry(['target', 'put', '--table', 'ledger', '--name', 'research-agent', '--base-url', 'https://agents.example.com', '--max-concurrent-runs', '3'], (line) => printed.push(line))).toBe(0);
    expect(documents.commandCalls(PutCommand)[0]?.args[0].input.Item).toMatchObject({ name: 'research-agent', kind: 'http', baseUrl: 'https://agents.example.com', maxConcurrentRuns: 3 });
    // The limit lives in the slot counters' caps too (what the slot write is conditioned on), allotted in
    // one transaction over the shards: one shard of cap 3 here, with the limit in force beside it.
    const allotment = documents.commandCalls(TransactWriteCommand)[0]?.args[0].input.TransactItems ?? [];
    expect(allotment.map((item) => item.Update?.ExpressionAttributeValues?.[':cap']).filter((cap) => cap !== undefined)).toEqual([3]);
    expect(allotment[0]?.Update?.ExpressionAttributeValues?.[':limit']).toBe(3);
    expect(printed).toEqual(['target research-agent → https://agents.example.com, at most 3 run(s) at once']);
  });

  it('registers a target without a limit as before', async () => {
    documents.onAnyCommand().resolves({});
    documents.on(GetCommand).resolves({});
    const printed: string[] = [];
    expect(await registry(['target', 'put', '--table', 'ledger', '--name', 'open-agent', '--base-url', 'https://open.example.com'], (line) => printed.push(line))).toBe(0);
    expect(documents.commandCalls(PutCommand)[0]?.args[0].input.Item).not.toHaveProperty('maxConcurrentRuns');
    expect(printed).toEqual(['target open-agent → https://open.example.com, no limit on concurrent runs']);
  });

  it.each([
    [['target', 'put', '--table', 't', '--name', 'a', '--base-url', 'https://a.example.com', '--max-concurrent-runs', '0'], /from 1 to 10,000, got "0"/],
    [['target', 'put', '--table', 't', '--name', 'a', '--base-url', 'https://a.example.com', '--max-concurrent-runs', '10001'], /from 1 to 10,000, got "10001"/],
    [['principal', 'put', '--table', 't', '--id', 'AROAX', '--operator', '--max-concurrent-runs', '2'], /--max-concurrent-runs is a target's setting/],
  ])('refuses %j before writing anything', async (args, problem) => {
    documents.onAnyCommand().resolves({});
    await expect(registry(args, () => undefined)).rejects.toThrow(problem);
    expect(documents.calls()).toHaveLength(0);
  });
});

describe('ledger help', () => {
  it('names the flow-control commands and flags', () => {
    expect(USAGE).toContain('ledger cancel <dispatchId> --reason R [--origin O] [--json]');
    expect(USAGE).toContain('ledger slots release --target T --run-id R --reason TEXT [--dispatch-id D] [--json]');
    expect(USAGE).toContain('[--max-concurrent-runs N]');
    expect(USAGE).toContain('at_capacity');
  });
});
