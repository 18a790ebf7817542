import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CloudFormationClient, CreateStackCommand, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { CreateQueueCommand, GetQueueAttributesCommand, ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REFUSED } from '../../cli/answer.js';
import { STACK_OUTPUTS, type StackOutputName } from '../../infra/outputs.js';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from '../../local/engines/index.js';
import { projectRoot } from '../../local/paths.js';
import type { RunningPlatform } from '../../local/platform.js';
import { signedFetch, type LocalCredential, type SigningCredentials } from '../../local/runtime/sigv4.js';
import type { DispatchView } from '../../shared/dispatch/view.js';
import { uniqueName, testEngines } from '../support/engines.js';
import { eventually } from '../support/eventually.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * The remote CLI (CONTRACT §13): every API and queue command run as a user runs it against a deployed
 * stack — the built `ledger` (the bin `npx ledger` runs: what the `pretest` build made) `… --api-url URL
 * --queue-url URL --region R` or `--stack NAME`, in a child process, with credentials only in the SDK's default chain (the environment) — against the local
 * platform with `--sigv4`, which verifies SigV4 as the function URL does. The child finds no local
 * platform (an empty LEDGER_STATE_DIR), no shared config and no instance metadata, so nothing but the
 * flags and the environment can make a command work. Waiting is done with signed API calls from the
 * test, not by spawning the CLI again (each child costs a second of CPU).
 */
/** The bin `npx ledger` runs, without npx (a second of CPU more per command, on a machine the other files keep busy). */
const BUILT_LEDGER = join(projectRoot, 'node_modules', 'dispatch-ledger', 'bin', 'ledger.js');
let test: TestPlatform;
let platform: RunningPlatform;
let planner: LocalCredential;
let operator: LocalCredential;
const stateDir = mkdtempSync(join(tmpdir(), 'ledger-remote-cli-'));

beforeAll(async () => {
  test = await startTestPlatform({}, { sigv4: true });
  platform = test.platform;
  if (!platform.credentials) throw new Error('a --sigv4 platform gives credentials');
  planner = platform.credentials.origins.planner as LocalCredential;
  operator = platform.credentials.operator;
});
afterAll(async () => {
  await test?.stop();
  rmSync(stateDir, { recursive: true, force: true });
});

interface Ran {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * The built `ledger …args` with `who`'s keys as AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (and
 * AWS_SESSION_TOKEN for a role session), none at all for `undefined`; no other AWS_ or LEDGER_
 * variable of this process reaches it.
 */
async function ledger(who: SigningCredentials | undefined, args: readonly string[], extra: Readonly<Record<string, string>> = {}): Promise<Ran> {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('AWS_') && !name.startsWith('LEDGER_')));
  const env = {
    ...inherited,
    LEDGER_STATE_DIR: stateDir,
    AWS_CONFIG_FILE: join(stateDir, 'no-config'),
    AWS_SHARED_CREDENTIALS_FILE: join(stateDir, 'no-credentials'),
    AWS_EC2_METADATA_DISABLED: 'true',
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    AWS_ENDPOINT_URL_SQS: testEngines().sqsEndpoint,
    ...(who ? { AWS_ACCESS_KEY_ID: who.accessKeyId, AWS_SECRET_ACCESS_KEY: who.secretAccessKey, ...(who.sessionToken ? { AWS_SESSION_TOKEN: who.sessionToken } : {}) } : {}),
    ...extra,
  };
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [BUILT_LEDGER, ...args], { cwd: projectRoot, env, encoding: 'utf8', timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof failed.code === 'number' ? failed.code : -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}

/** The flags that name the deployed API and queue. */
const remote = (): string[] => ['--api-url', `${platform.info.apiUrl}/`, '--queue-url', platform.info.dispatchQueueUrl, '--region', LOCAL_REGION];

async function signedGet(path: string, who: SigningCredentials = planner): Promise<{ status: number; body: unknown }> {
  const response = await signedFetch(`${platform.info.apiUrl}${path}`, { method: 'GET' }, { credentials: who, region: LOCAL_REGION });
  return { status: response.status, body: (await response.json()) as unknown };
}

const viewWhen = (dispatchId: string, done: (view: DispatchView) => boolean): Promise<DispatchView> =>
  eventually(
    `dispatch ${dispatchId}`,
    async () => {
      const { status, body } = await signedGet(`/dispatches/${dispatchId}`);
      if (status !== 200) throw new Error(`GET /dispatches/${dispatchId} → ${status}`);
      return body as DispatchView;
    },
    { until: done },
  );

async function sendDirect(message: Record<string, unknown> | string, queueUrl = platform.info.dispatchQueueUrl): Promise<void> {
  await test.clients.sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: typeof message === 'string' ? message : JSON.stringify(message) }));
}

/** No stack trace ever reaches the person: a Node frame line is `    at …`. */
const NO_STACK = /^\s+at /m;

describe('the remote CLI, signed from the default credential chain (against ledger local up --sigv4)', () => {
  it('refuses a --body the ledger would refuse — malformed JSON, a missing field, a too-deep task — saying why, with nothing put on the queue', async () => {
    // A queue of its own that nothing consumes: what reaches it stays there to be counted.
    const { QueueUrl: queueUrl = '' } = await test.clients.sqs.send(new CreateQueueCommand({ QueueName: uniqueName('cli-send') }));
    const flags = ['--api-url', `${platform.info.apiUrl}/`, '--queue-url', queueUrl, '--region', LOCAL_REGION];
    const waiting = async (): Promise<string | undefined> =>
      (await test.clients.sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['ApproximateNumberOfMessages'] }))).Attributes?.['ApproximateNumberOfMessages'];
    let deep: Record<string, unknown> = {};
    for (let level = 0; level < 70; level += 1) deep = { deeper: deep };
    const refused: Array<[string, RegExp]> = [
      ['{"dispatchId": "d-1", ', /^the message is not JSON \(.+\); nothing was sent$/m],
      [JSON.stringify({ dispatchId: 'd-1', origin: 'planner', task: {} }), /^the ledger would refuse this message: target: expected string, got undefined; nothing was sent$/m],
      // Sent as written: no origin is filled in for it without --origin, and the refusal says how to give one.
      [JSON.stringify({ dispatchId: 'd-1', target: 'demo-agent', task: {} }), /^the ledger would refuse this message: origin: expected string, got undefined \(a --body or --file is sent as written: add "origin" to it, or give --origin\); nothing was sent$/m],
      [JSON.stringify({ dispatchId: 'd-1', origin: 'planner', target: 'demo-agent', task: deep }), /^the ledger would refuse this message: task: nests deeper than 64 levels.*; nothing was sent$/m],
    ];
    for (const [body, said] of refused) {
      const ran = await ledger(planner, ['send', '--body', body, ...flags]);
      expect(ran.code, body.slice(0, 40)).toBe(2);
      expect(ran.stderr).toMatch(said);
      expect(ran.stderr).not.toMatch(NO_STACK);
    }
    expect(await waiting()).toBe('0');
    const sent = await ledger(planner, ['send', '--body', JSON.stringify({ dispatchId: uniqueName('d-body'), origin: 'planner', target: 'demo-agent', task: {} }), ...flags]);
    expect(sent).toMatchObject({ code: 0, stderr: '' });
    expect(await waiting()).toBe('1');
    // --origin fills in a message that names none (was: ignored, and the message refused for its missing
    // origin); a message naming another origin is refused, not guessed.
    const noOrigin = JSON.stringify({ dispatchId: uniqueName('d-body'), target: 'demo-agent', task: {} });
    expect(await ledger(planner, ['send', '--origin', 'planner', '--body', noOrigin, ...flags])).toMatchObject({ code: 0, stderr: '' });
    const other = await ledger(planner, ['send', '--origin', 'planner', '--body', JSON.stringify({ dispatchId: 'd-3', origin: 'lead-agent', target: 'demo-agent', task: {} }), ...flags]);
    expect([other.code, other.stderr.trim()]).toEqual([2, 'the message names origin "lead-agent", --origin "planner": give one; nothing was sent']);
    expect(await waiting()).toBe('2');
    const bodies = (await test.clients.sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10 }))).Messages?.map((message) => JSON.parse(message.Body ?? '{}') as { origin?: string }) ?? [];
    expect(bodies.map((body) => body.origin)).toEqual(['planner', 'planner']);
  });

  it('sends a dispatch, checks it to completion, lists it, records a receipt, and claims and acks its result, as the planner', async () => {
    const dispatchId = uniqueName('d-remote');
    const sent = await ledger(planner, ['send', '--dispatch-id', dispatchId, '--behavior', 'complete', '--expect', 'out/report.md', '--stall-after', '120', '--grace', '30', '--approval-wait', '900', '--json', ...remote()]);
    expect(sent).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(sent.stdout)).toMatchObject({ dispatchId, messageId: expect.any(String) });
    const done = await viewWhen(dispatchId, (view) => view.execution.status === 'completed' && view.evidence.outcome === 'handled');

    const table = await ledger(planner, ['check', dispatchId, ...remote()]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(new RegExp(`^dispatch\\s+${dispatchId}\\s+\\(origin planner → target demo-agent, attempt 1\\)$`, 'm'));
    expect(table.stdout).toMatch(/^execution\s+completed \(target said completed\)$/m);
    expect(table.stdout).toMatch(/^evidence\s+handled: expected 1 file; checked: all found$/m);
    // The clocks sent with the message, shown (none runs now: the run completed and its evidence was checked).
    expect(table.stdout).toMatch(/^windows\s+stall after 120 s; approval wait 900 s; delivery grace 30 s$/m);
    const json = await ledger(planner, ['check', dispatchId, '--json', ...remote()]);
    expect(JSON.parse(json.stdout)).toMatchObject({ dispatchId, origin: 'planner', runId: done.runId, execution: { status: 'completed' } });

    const listed = await ledger(planner, ['status', ...remote()]);
    expect(listed.stdout).toMatch(new RegExp(`${dispatchId}\\s+demo-agent\\s+submitted\\s+completed`));

    const receipt = await ledger(planner, ['receipt', dispatchId, '--run', done.runId ?? '', '--kind', 'artifact_acceptance', '--state', 'accepted', '--verified-by', 'alice', ...remote()]);
    expect(receipt.code).toBe(0);
    // Recorded as the principal that signed: the planner's IAM user, not a header's say-so.
    expect(receipt.stdout).toMatch(new RegExp(`^recorded: receipt rc-\\S+ — artifact_acceptance accepted for dispatch ${dispatchId}, run ${done.runId ?? ''}, verified by alice \\(recorded by ${planner.principalId}, operator_attestation, `));

    const pending = await eventually(
      `${dispatchId}'s result in planner's inbox`,
      async () => ((await signedGet('/origins/planner/inbox?state=pending')).body as { items: Array<{ resultId: string; dispatchId: string }> }).items.find((item) => item.dispatchId === dispatchId),
      { until: (item) => item !== undefined },
    );
    const resultId = pending?.resultId ?? '';
    const claimed = await ledger(planner, ['inbox', 'claim', '--result-id', resultId, '--lease-seconds', '60', ...remote()]);
    // At 80 columns a column too wide for the grid is printed whole under its row: the ids stay whole either way.
    expect(claimed.stdout).toMatch(new RegExp(`^${resultId}\\s+(${dispatchId}\\s+)?1\\s+completed\\s+handled`, 'm'));
    expect(claimed.stdout).toContain(dispatchId);
    const claimToken = /^claimToken (\S+)$/m.exec(claimed.stdout)?.[1] ?? '';
    expect(claimToken).not.toBe('');
    const acked = await ledger(planner, ['inbox', 'ack', resultId, '--token', claimToken, ...remote()]);
    // The whole answer, stderr with it: a failed ack says why in its report (CI once saw exit 1 and no more).
    expect(acked).toEqual({ code: 0, stdout: `acked: ${resultId} → delivered (owner delivery confirmed, basis origin_ack)\n`, stderr: '' });
    expect(((await signedGet(`/dispatches/${dispatchId}`)).body as DispatchView).ownerDelivery).toMatchObject({ state: 'confirmed', basis: 'origin_ack' });
  });

  it('approves a dispatch waiting for approval, redispatches a blocked one and cancels a running one', async () => {
    const waiting = uniqueName('d-remote-approve');
    const blocked = uniqueName('d-remote-blocked');
    const running = uniqueName('d-remote-cancel');
    await sendDirect({ dispatchId: waiting, origin: 'planner', target: 'demo-agent', task: { behavior: 'await_approval' } });
    await sendDirect({ dispatchId: blocked, origin: 'planner', target: 'demo-agent', task: { behavior: 'reject' } });
    await sendDirect({ dispatchId: running, origin: 'planner', target: 'demo-agent', task: { behavior: 'slow', seconds: 60 } });

    const approvalId = (await viewWhen(waiting, (view) => view.execution.pendingApproval !== null)).execution.pendingApproval?.approvalId ?? '';
    const approved = await ledger(planner, ['approve', waiting, '--approval-id', approvalId, ...remote()]);
    expect(approved).toMatchObject({ code: 0, stdout: `approved: ${waiting} (approval ${approvalId})\n` });
    expect((await viewWhen(waiting, (view) => view.execution.status === 'completed')).execution.status).toBe('completed');

    await viewWhen(blocked, (view) => view.phase === 'blocked');
    const redispatched = await ledger(planner, ['redispatch', blocked, '--reason', 'the target was fixed', ...remote()]);
    expect(redispatched).toMatchObject({ code: 0, stdout: `redispatched: ${blocked}, attempt 2\n` });

    await viewWhen(running, (view) => view.execution.status === 'running');
    const cancelled = await ledger(planner, ['cancel', running, '--reason', 'no longer needed', ...remote()]);
    expect(cancelled.code).toBe(0);
    expect(cancelled.stdout).toMatch(new RegExp(`^(cancel asked of the target|cancelled): ${running}`));
    expect(((await signedGet(`/dispatches/${running}`)).body as DispatchView).execution).toMatchObject({ cancelRequestedAt: expect.any(String) });
  });

  it("calls the operator routes as the operator: attention, rejections, slots release; and redrives the DLQ with the stack's queue URLs", async () => {
    const attention = await ledger(operator, ['attention', '--json', ...remote()]);
    expect(attention.code).toBe(0);
    expect(JSON.parse(attention.stdout)).toMatchObject({ items: expect.any(Array) });

    const garbage = `not json ${uniqueName('x')}`;
    await sendDirect(garbage);
    await eventually('the rejection', async () => JSON.stringify((await signedGet('/rejections?limit=100', operator)).body), { until: (text) => text.includes(garbage) });
    const rejections = await ledger(operator, ['rejections', ...remote()]);
    expect(rejections.code).toBe(0);
    expect(rejections.stdout).toMatch(/not_json\s+\S+/);
    expect(rejections.stdout).toMatch(new RegExp(`(^| )${garbage}$`, 'm'));

    // No run of that id holds a slot: the ledger's own 404, reached as the operator (a planner would get 403).
    const released = await ledger(operator, ['slots', 'release', '--target', 'demo-agent', '--run-id', 'r-none', '--reason', 'lost', ...remote()]);
    expect(released).toMatchObject({ code: 1, stdout: '404 not_found: no run r-none of target demo-agent holds a slot\n', stderr: '' });

    await sendDirect(`dead letter ${uniqueName('x')}`, platform.info.dlqUrl);
    const moved = await ledger(operator, ['dlq', 'redrive', '--dlq-url', platform.info.dlqUrl, '--queue-url', platform.info.dispatchQueueUrl, '--region', LOCAL_REGION, '--json']);
    expect(moved).toMatchObject({ code: 0, stdout: '{"moved":1,"failed":[]}\n' });
  });

  it('lists every dispatch and counts them as the operator (a planner is refused), and records a manual attestation as the planner', async () => {
    const dispatchId = uniqueName('d-desk');
    const sent = await ledger(planner, ['send', '--dispatch-id', dispatchId, '--target', 'desk', '--json', ...remote()]);
    expect(sent.code).toBe(0);
    await viewWhen(dispatchId, (view) => view.submission.waitingFor === 'person');

    const listed = await ledger(operator, ['list', '--target', 'desk', '--json', ...remote()]);
    expect(listed.code).toBe(0);
    expect((JSON.parse(listed.stdout) as { items: Array<{ dispatchId: string; origin: string }> }).items).toContainEqual(expect.objectContaining({ dispatchId, origin: 'planner' }));
    const counted = await ledger(operator, ['counts', '--json', ...remote()]);
    expect(counted.code).toBe(0);
    expect(JSON.parse(counted.stdout)).toMatchObject({ total: expect.any(Number), phase: expect.any(Object) });
    // The operator's lists are the operator's: a planner's signed call is refused.
    const refused = await ledger(planner, ['list', ...remote()]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toMatch(/^403 forbidden/);

    const attested = await ledger(planner, ['manual', dispatchId, '--kind', 'manual_result_attested', '--note', 'filed by hand', '--json', ...remote()]);
    expect(attested.code).toBe(0);
    expect(JSON.parse(attested.stdout)).toMatchObject({ dispatchId, kind: 'manual_result_attested', basis: 'manual_attestation', recordedBy: planner.principalId });
    const view = await viewWhen(dispatchId, (candidate) => candidate.gate.satisfied);
    expect(view.gate.reasons.join(' ')).toMatch(/person/);
    for (const ran of [sent, listed, counted, refused, attested]) expect(ran.stdout + ran.stderr).not.toMatch(NO_STACK);
  });

  it('prints the 403 and exits 1 when the secret is wrong, and says there are no credentials when the chain has none', async () => {
    const wrong = await ledger({ accessKeyId: planner.accessKeyId, secretAccessKey: 'not-the-secret' }, ['check', 'd-anything', ...remote()]);
    expect(wrong.code).toBe(1);
    expect(wrong.stdout).toBe(`403 forbidden: the request signature does not match the one computed with the secret of this access key\n${REFUSED}\n`);
    const none = await ledger(undefined, ['status', ...remote()]);
    expect(none.code).toBe(1);
    expect(none.stdout).toBe('');
    expect(none.stderr).toMatch(/no AWS credentials: the default credential chain found none \(set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY/);
    for (const ran of [wrong, none]) expect(ran.stdout + ran.stderr).not.toMatch(NO_STACK);
  });
});

describe('the remote CLI with --stack NAME (a stack in moto\'s CloudFormation with the real output names)', () => {
  let stackName: string;
  const endpoints = (): Record<string, string> => ({
    AWS_ENDPOINT_URL_CLOUDFORMATION: testEngines().motoEndpoint,
    AWS_ENDPOINT_URL_DYNAMODB: testEngines().dynamodbEndpoint,
  });

  beforeAll(async () => {
    stackName = uniqueName('DispatchLedger').replace(/[^A-Za-z0-9-]/g, '-');
    // The deployed stack's outputs, each pointing at the local --sigv4 platform; every name of STACK_OUTPUTS.
    const values: Record<StackOutputName, string> = {
      ApiUrl: `${platform.info.apiUrl}/`,
      DispatchQueueUrl: platform.info.dispatchQueueUrl,
      DeadLetterQueueUrl: platform.info.dlqUrl,
      LedgerTableName: platform.resources.ledgerTable,
      EvidenceBucketName: platform.resources.evidenceBucket,
      StreamFailureBucketName: 'stream-failures',
      EventBusName: platform.info.eventBusName,
      AlarmTopicArn: `arn:aws:sns:${LOCAL_REGION}:000000000000:alarms`,
    };
    const template = {
      AWSTemplateFormatVersion: '2010-09-09',
      // moto wants a resource; this one creates nothing.
      Resources: { Handle: { Type: 'AWS::CloudFormation::WaitConditionHandle' } },
      Outputs: Object.fromEntries(STACK_OUTPUTS.map((name) => [name, { Value: values[name] }])),
    };
    const cloudformation = new CloudFormationClient({ region: LOCAL_REGION, endpoint: testEngines().motoEndpoint, credentials: LOCAL_CREDENTIALS });
    try {
      await cloudformation.send(new CreateStackCommand({ StackName: stackName, TemplateBody: JSON.stringify(template) }));
      const { Stacks = [] } = await cloudformation.send(new DescribeStacksCommand({ StackName: stackName }));
      expect(Stacks[0]?.Outputs?.map((output) => output.OutputKey).sort()).toEqual([...STACK_OUTPUTS].sort());
    } finally {
      cloudformation.destroy();
    }
  });

  it('sends and checks a dispatch through the outputs of the stack, and redrives its DLQ', async () => {
    const dispatchId = uniqueName('d-stack');
    const stack = ['--stack', stackName, '--region', LOCAL_REGION];
    const sent = await ledger(planner, ['send', '--dispatch-id', dispatchId, '--behavior', 'complete', ...stack], endpoints());
    expect(sent).toMatchObject({ code: 0, stderr: '' });
    expect(sent.stdout).toMatch(new RegExp(`^sent message \\S+ \\(dispatch ${dispatchId}\\); check it with: npx ledger check ${dispatchId} --stack ${stackName} --region ${LOCAL_REGION} --origin planner\\n$`));
    await viewWhen(dispatchId, (view) => view.execution.status === 'completed');
    const checked = await ledger(planner, ['check', dispatchId, '--json', ...stack], endpoints());
    expect(checked.code).toBe(0);
    expect(JSON.parse(checked.stdout)).toMatchObject({ dispatchId, origin: 'planner', execution: { status: 'completed' } });

    await sendDirect(`dead letter ${uniqueName('x')}`, platform.info.dlqUrl);
    const moved = await ledger(operator, ['dlq', 'redrive', '--json', ...stack], endpoints());
    expect(moved).toMatchObject({ code: 0, stdout: '{"moved":1,"failed":[]}\n' });
  });

  it('says so clearly when there is no such stack', async () => {
    const missing = await ledger(planner, ['check', 'd-1', '--stack', 'NoSuchLedgerStack', '--region', LOCAL_REGION], endpoints());
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/no stack "NoSuchLedgerStack" in us-east-1/);
    expect(missing.stderr).not.toMatch(NO_STACK);
  });
});
