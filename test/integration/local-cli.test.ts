import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, describe, expect, it } from 'vitest';
import { isAlive } from '../../local/engines/process.js';
import { projectRoot } from '../../local/paths.js';
import { readState } from '../../local/state.js';
import { eventually } from '../support/eventually.js';

const run = promisify(execFile);
const stateDir = mkdtempSync(join(tmpdir(), 'ledger-cli-'));
const env = { ...process.env, LEDGER_STATE_DIR: stateDir };

/**
 * The command a user runs from the project root: the bin `npx ledger` finds (the built CLI), started
 * without npx, which costs more CPU than the command itself on a machine the other files keep busy.
 * `npx ledger` as typed is run by the --help test below, and in a fresh project by the packaging test.
 */
const BUILT_LEDGER = join(projectRoot, 'node_modules', 'dispatch-ledger', 'bin', 'ledger.js');
function ledger(...args: string[]) {
  return run(process.execPath, [BUILT_LEDGER, ...args], { cwd: projectRoot, env, timeout: 180_000 });
}

afterAll(async () => {
  // Never leave a platform behind, whatever failed above.
  await ledger('local', 'down').catch(() => undefined);
  rmSync(stateDir, { recursive: true, force: true });
});

/** Retrying a command until it exits 0 (the queue is asynchronous): each try spawns the CLI, so poll slowly. */
const CLI_POLL = { intervalMs: 500 };

const CONTRACT_KEYS = [
  'region', 'apiUrl', 'dispatchQueueUrl', 'dlqUrl', 'sqsEndpoint', 'dynamodbEndpoint',
  's3Endpoint', 'eventBridgeEndpoint', 'eventBusName', 'eventLog', 'demoAgentUrl',
];

describe('npx ledger local up / down', () => {
  it('up --detach --json prints the contract line; down leaves none of the processes it started', async () => {
    const up = await ledger('local', 'up', '--detach', '--json', '--tick', '1');

    const lines = up.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    const info = JSON.parse(lines[0] ?? '') as Record<string, string>;
    expect(Object.keys(info)).toEqual(CONTRACT_KEYS);
    expect(info.eventBusName).toBe('dispatch-ledger');
    for (const key of ['apiUrl', 'sqsEndpoint', 'dynamodbEndpoint', 's3Endpoint', 'eventBridgeEndpoint', 'demoAgentUrl']) {
      expect(info[key]).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    }
    const stats = await fetch(`${info.demoAgentUrl}/stats`);
    expect(await stats.json()).toEqual({ submissions: {}, runs: {}, attempts: {}, open: 0, maxOpen: { 'demo-agent': 0, 'demo-agent-limited': 0 } });

    const state = readState(stateDir);
    const pids = Object.values(state?.pids ?? {});
    expect(Object.keys(state?.pids ?? {}).sort()).toEqual(['dynamodbLocal', 'fauxqs', 'moto', 'supervisor']);
    expect(pids.every(isAlive)).toBe(true);

    // The commands people use against it.
    await ledger('send', '--dispatch-id', 'd-cli-1', '--behavior', 'complete', '--expect', 'out/a.md');
    const checked = await eventually('ledger check d-cli-1', () => ledger('check', 'd-cli-1', '--json'), CLI_POLL);
    expect(JSON.parse(checked.stdout)).toMatchObject({ dispatchId: 'd-cli-1', phase: 'submitted', evidence: { expected: ['out/a.md'] } });
    const logged = await eventually('Dispatch Submitted in ledger events', () => ledger('events', '--dispatch', 'd-cli-1', '--json'), {
      ...CLI_POLL,
      until: (out) => out.stdout.includes('"detail-type":"Dispatch Submitted"'),
    });
    const types = logged.stdout.trim().split('\n').map((line) => (JSON.parse(line) as { 'detail-type': string })['detail-type']);
    // Accepted and submitted in one write: one Dispatch Submitted stands for both (CONTRACT §3 v2).
    expect(types[0]).toBe('Dispatch Submitted');
    expect(types).not.toContain('Dispatch Accepted');
    const { runId } = JSON.parse(checked.stdout) as { runId: string };
    const receipt = ['receipt', 'd-cli-1', '--run', runId, '--kind', 'artifact_acceptance', '--state', 'accepted', '--verified-by', 'alice', '--receipt-id', 'rc-cli-1'];
    const recorded = await ledger(...receipt, '--json');
    expect(JSON.parse(recorded.stdout)).toMatchObject({ receiptId: 'rc-cli-1', dispatchId: 'd-cli-1', runId, state: 'accepted', basis: 'operator_attestation' });
    expect((await ledger(...receipt)).stdout).toContain('already recorded (identical): receipt rc-cli-1');
    const listed = await ledger('status');
    expect(listed.stdout).toMatch(/d-cli-1\s+demo-agent\s+submitted/);
    const foreign = await ledger('check', 'd-cli-1', '--origin', 'someone-else').then(
      () => 'found',
      (error: { stdout: string }) => error.stdout,
    );
    expect(foreign).toContain('404');

    // Contract §9's operator commands: rejections, approve, redispatch.
    // The CLI refuses a body that is not JSON (nothing is sent); one put on the queue by other means is rejected by the intake.
    const refusedLocally = await ledger('send', '--body', 'this is not json').then(
      () => 'sent',
      (error: { stderr: string; code: number }) => `${error.code}: ${error.stderr}`,
    );
    expect(refusedLocally).toMatch(/^2: the message is not JSON \(.+\); nothing was sent/);
    const local = readState(stateDir)?.info;
    const sqs = new SQSClient({ region: local?.region ?? '', endpoint: local?.sqsEndpoint ?? '', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
    await sqs.send(new SendMessageCommand({ QueueUrl: local?.dispatchQueueUrl ?? '', MessageBody: 'this is not json' }));
    sqs.destroy();
    const rejected = await eventually('a not_json rejection in ledger rejections', () => ledger('rejections', '--json'), {
      ...CLI_POLL,
      until: (out) => out.stdout.includes('not_json'),
    });
    expect(JSON.parse(rejected.stdout)).toMatchObject({ items: [{ reason: 'not_json', bodyPreview: 'this is not json' }] });
    const wrongApproval = await ledger('approve', 'd-cli-1', '--approval-id', 'ap-nope').then(
      () => 'approved',
      (error: { stdout: string }) => error.stdout,
    );
    expect(wrongApproval).toMatch(/^409 \w+: /);
    await ledger('send', '--dispatch-id', 'd-cli-2', '--behavior', 'reject');
    await eventually('d-cli-2 blocked in ledger check', () => ledger('check', 'd-cli-2', '--json'), {
      ...CLI_POLL,
      until: (out) => out.stdout.includes('"phase":"blocked"'),
    });
    expect((await ledger('redispatch', 'd-cli-2', '--reason', 'the target was fixed')).stdout).toContain('redispatched: d-cli-2, attempt 2');

    // Contract §10 through `ledger inbox`: d-cli-1's result waits in planner's inbox; claimed by id and
    // acked, it confirms owner delivery on the origin's word.
    const pending = await eventually("d-cli-1's result in ledger inbox list", () => ledger('inbox', 'list', '--state', 'pending', '--json'), {
      ...CLI_POLL,
      until: (out) => out.stdout.includes('"dispatchId":"d-cli-1"'),
    });
    const waiting = (JSON.parse(pending.stdout) as { items: Array<{ resultId: string; dispatchId: string }> }).items.find((item) => item.dispatchId === 'd-cli-1');
    const resultId = waiting?.resultId ?? '';
    const claimed = await ledger('inbox', 'claim', '--result-id', resultId, '--lease-seconds', '60');
    expect(claimed.stdout).toMatch(new RegExp(`${resultId}\\s+d-cli-1\\s+1\\s+completed\\s+handled`));
    const claimToken = /^claimToken (\S+)$/m.exec(claimed.stdout)?.[1] ?? '';
    expect(claimToken).not.toBe('');
    const refused = await ledger('inbox', 'ack', resultId, '--token', 'not-the-token').then(
      () => 'acked',
      (error: { stdout: string; code: number }) => `${error.code} ${error.stdout}`,
    );
    expect(refused).toMatch(/^1 409 \w+: /);
    expect((await ledger('inbox', 'ack', resultId, '--token', claimToken)).stdout).toContain(`acked: ${resultId} → delivered`);
    const confirmed = JSON.parse((await ledger('check', 'd-cli-1', '--json')).stdout) as { ownerDelivery: { state: string; basis: string } };
    expect(confirmed.ownerDelivery).toMatchObject({ state: 'confirmed', basis: 'origin_ack' });
    const usage = await ledger('inbox', 'renew', resultId, '--token', claimToken).then(
      () => 'renewed',
      (error: { stderr: string }) => error.stderr,
    );
    expect(usage).toContain('ledger inbox renew needs --lease-seconds');

    const second = await ledger('local', 'up', '--detach', '--json').then(
      () => 'started twice',
      (error: { stderr: string }) => error.stderr,
    );
    expect(second).toContain('already running');

    const down = await ledger('local', 'down');
    expect(down.stdout).toContain('stopped 4 processes');
    expect(pids.filter(isAlive)).toEqual([]);
    expect(readState(stateDir)).toBeUndefined();
    // Not running: each says where it looked (was: just "not running", from any folder).
    expect((await ledger('local', 'down')).stdout.trim()).toBe(`the local platform was not running (looked in ${stateDir}: run down from the folder you ran up in)`);
    const status = await ledger('local', 'status').then(
      () => ({ code: 0, stdout: '' }),
      (error: { code: number; stdout: string }) => error,
    );
    expect([status.code, status.stdout.trim()]).toEqual([3, `the local platform is not running (looked in ${stateDir}: run ledger from the folder you ran up in)`]);
  });

  it('up --demo --once (what npm start runs, then stops) reaches ready, runs the demo and stops everything', async () => {
    const started = await ledger('local', 'up', '--demo', '--once', '--tick', '1');

    expect(started.stdout).toMatch(/local platform ready in \d+\.\d s/);
    expect(started.stdout).toContain('demo done');
    expect(started.stdout).toMatch(/stopped 4 processes/);
    const invocations = readFileSync(join(stateDir, 'invocations.jsonl'), 'utf8');
    expect(invocations).toContain('"function":"intake"');
    expect(readState(stateDir)).toBeUndefined();
  });

  it('up --json --once prints the info line alone on stdout, what stopping did on stderr (regression: "stopped N processes" followed it on stdout)', async () => {
    const started = await ledger('local', 'up', '--json', '--once', '--tick', '1');
    const lines = started.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(Object.keys(JSON.parse(lines[0] ?? '') as object)).toEqual(CONTRACT_KEYS);
    expect(started.stderr).toMatch(/stopped 4 processes/);
    expect(readState(stateDir)).toBeUndefined();
  });
});

describe('npx ledger --help and mistakes, as a new user types them', () => {
  it('answers --help on a command with its usage (exit 0), and an unknown command with its name in the first line (exit 2)', async () => {
    // Through npx, exactly as typed.
    const help = await run('npx', ['ledger', 'local', 'up', '--help'], { cwd: projectRoot, env, timeout: 180_000 });
    expect(help.stdout).toMatch(/^usage:\n {2}ledger local up /);
    expect(help.stderr).toBe('');
    const unknown = await ledger('frobnicate').then(
      () => ({ code: 0, stderr: '' }),
      (error: { code: number; stderr: string }) => error,
    );
    expect(unknown.code).toBe(2);
    expect(unknown.stderr.split('\n')[0]).toBe('ledger: unknown command "frobnicate"');
  });
});
