import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localClients, type LocalClients } from '../../local/clients.js';
import { LOCAL_REGION } from '../../local/engines/index.js';
import { startPlatform, type RunningPlatform } from '../../local/platform.js';
import { signedFetch, signedHeaders, type LocalCredential, type LocalCredentials, type SigningCredentials } from '../../local/runtime/sigv4.js';
import type { LocalCredentialsFile, LocalState } from '../../local/state.js';
import { localTarget } from '../../cli/local-targets.js';
import { projectRoot } from '../../local/paths.js';
import { createLedgerClient } from '@dispatch-ledger/client';
import type { DispatchView } from '../../shared/dispatch/view.js';
import type { OperatorReceipt } from '../../shared/dispatch/receipts.js';
import { uniqueName, testEngines } from '../support/engines.js';
import { eventually } from '../support/eventually.js';
import { operatorReceiptBodyFactory } from '../support/factories.js';

/**
 * `ledger local up --sigv4` (CONTRACT §2 v2): the local API verifies SigV4 as a function URL with
 * AWS_IAM auth does, the caller is the principal registered for the signing key, and the demo agent
 * signs its callbacks as its target. Started like test/support/platform.ts does, with `sigv4: true`.
 */
let platform: RunningPlatform;
let clients: LocalClients;
let credentials: LocalCredentials;
let planner: LocalCredential;
let leadAgent: LocalCredential;

const stateDir = mkdtempSync(join(tmpdir(), 'ledger-sigv4-'));

beforeAll(async () => {
  platform = await startPlatform({
    stateDir,
    tickSeconds: 1,
    log: () => undefined,
    engines: testEngines(),
    prefix: uniqueName('t'),
    dispatchVisibilityTimeoutSeconds: 2,
    sigv4: true,
    environment: {
      SUBMIT_RETRY_DELAYS_SECONDS: '1,1,1',
      CLAIM_SECONDS: '2',
      TARGET_TIMEOUT_MS: '2000',
      POWERTOOLS_LOG_LEVEL: 'ERROR',
      POWERTOOLS_METRICS_DISABLED: 'true',
    },
  });
  clients = localClients(testEngines());
  if (!platform.credentials) throw new Error('a --sigv4 platform gives credentials');
  credentials = platform.credentials;
  planner = credentials.origins.planner as LocalCredential;
  leadAgent = credentials.origins['lead-agent'] as LocalCredential;
});
afterAll(async () => {
  clients?.destroy();
  await platform?.stop();
  rmSync(stateDir, { recursive: true, force: true });
});

/** A port nothing listens on now (asked of the OS, then let go). */
const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });

const api = (path: string): string => `${platform.info.apiUrl}${path}`;
const as = (who: SigningCredentials) => ({ credentials: who, region: LOCAL_REGION });

async function answer(response: Response): Promise<{ status: number; body: Record<string, unknown> }> {
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}
const signedGet = async (path: string, who: SigningCredentials = planner) => answer(await signedFetch(api(path), { method: 'GET' }, as(who)));
const signedPost = async (path: string, body: unknown, who: SigningCredentials = planner) =>
  answer(await signedFetch(api(path), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }, as(who)));

async function send(message: Record<string, unknown>): Promise<void> {
  await clients.sqs.send(new SendMessageCommand({ QueueUrl: platform.info.dispatchQueueUrl, MessageBody: JSON.stringify(message) }));
}

const viewWhen = (dispatchId: string, done: (view: DispatchView) => boolean) =>
  eventually(
    `dispatch ${dispatchId}`,
    async () => {
      const { status, body } = await signedGet(`/dispatches/${dispatchId}`);
      if (status !== 200) throw new Error(`GET /dispatches/${dispatchId} → ${status}`);
      return body as unknown as DispatchView;
    },
    { until: done },
  );

/** One `complete` dispatch of planner's, run to the end by the demo agent; shared by the tests below. */
let completed: Promise<DispatchView> | undefined;
function completedDispatch(): Promise<DispatchView> {
  completed ??= (async () => {
    const dispatchId = uniqueName('d');
    await send({ dispatchId, origin: 'planner', target: 'demo-agent', task: { behavior: 'complete' }, expectedEvidence: ['out/report.md'] });
    return viewWhen(dispatchId, (view) => view.execution.status === 'completed' && view.evidence.outcome === 'handled');
  })();
  return completed;
}

describe('the local platform with --sigv4', () => {
  it('hands out an operator, origin and target credential, in a 0600 file named in the info', () => {
    expect(credentials.operator.principal).toEqual({ role: 'operator' });
    expect(planner.principal).toEqual({ role: 'origin', origin: 'planner' });
    expect(credentials.targets['demo-agent']?.principal).toEqual({ role: 'target', target: 'demo-agent' });
    const file = platform.info.credentialsFile ?? '';
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const written = JSON.parse(readFileSync(file, 'utf8')) as LocalCredentialsFile;
    expect(written).toEqual({ region: LOCAL_REGION, service: 'lambda', credentials });
  });

  it("completes a 'complete' dispatch: the demo agent's target-signed run events and evidence upload are accepted", async () => {
    const view = await completedDispatch();
    expect(view.execution.status).toBe('completed');
    expect(view.evidence.found).toEqual(['out/report.md']);
  });

  it('lets the enforcing API reach the loopback demo agent: an approval is forwarded and the run completes (regression: public-only refused it, 502)', async () => {
    const dispatchId = uniqueName('d');
    await send({ dispatchId, origin: 'planner', target: 'demo-agent', task: { behavior: 'await_approval' } });
    const waiting = await viewWhen(dispatchId, (view) => view.execution.pendingApproval !== null);
    const approvalId = waiting.execution.pendingApproval?.approvalId ?? '';
    expect(await signedPost(`/dispatches/${dispatchId}/approval`, { approvalId, decision: 'approve' })).toMatchObject({ status: 200 });
    expect((await viewWhen(dispatchId, (view) => view.execution.status === 'completed')).execution.status).toBe('completed');
  });

  it('lets a planner-signed request GET its own dispatch; another origin gets 404', async () => {
    const { dispatchId } = await completedDispatch();
    const own = await signedGet(`/dispatches/${dispatchId}`);
    expect(own).toMatchObject({ status: 200, body: { dispatchId, origin: 'planner' } });
    const other = await signedGet(`/dispatches/${dispatchId}`, leadAgent);
    expect(other).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
  });

  it('opens the operator routes to the operator credential only', async () => {
    expect((await signedGet('/attention', credentials.operator)).status).toBe(200);
    expect(await signedGet('/attention')).toMatchObject({ status: 403, body: { error: { code: 'forbidden' } } });
  });

  it('lets a planner-signed request POST a dispatch-owned route, recorded as the principal that signed it', async () => {
    const { dispatchId, runId } = await completedDispatch();
    const receipt = operatorReceiptBodyFactory({ receiptId: uniqueName('rc'), runId: runId ?? '' });
    const recorded = await signedPost(`/dispatches/${dispatchId}/receipts`, receipt);
    expect(recorded.status).toBe(201);
    expect(recorded.body as unknown as OperatorReceipt).toMatchObject({ receiptId: receipt.receiptId, origin: 'planner', recordedBy: planner.principalId });
    const notOwner = await signedPost(`/dispatches/${dispatchId}/receipts`, { ...receipt, receiptId: uniqueName('rc') }, leadAgent);
    expect(notOwner.status).toBe(404);
  });

  it('answers 403 forbidden to an unsigned request, X-Ledger-Origin or not', async () => {
    const { dispatchId } = await completedDispatch();
    for (const headers of [{}, { 'x-ledger-origin': 'planner' }] as Array<Record<string, string>>) {
      const unsigned = await answer(await fetch(api(`/dispatches/${dispatchId}`), { headers }));
      expect(unsigned).toEqual({ status: 403, body: { error: { code: 'forbidden', message: expect.stringMatching(/not signed/) } } });
    }
  });

  it('answers 403 to a request signed with the wrong secret, or by a key it does not know', async () => {
    const { dispatchId } = await completedDispatch();
    const wrongSecret = await signedGet(`/dispatches/${dispatchId}`, { accessKeyId: planner.accessKeyId, secretAccessKey: leadAgent.secretAccessKey });
    expect(wrongSecret).toMatchObject({ status: 403, body: { error: { code: 'forbidden', message: expect.stringMatching(/signature does not match/) } } });
    const unknown = await signedGet(`/dispatches/${dispatchId}`, { accessKeyId: 'AKIAUNKNOWNUNKNOWN00', secretAccessKey: planner.secretAccessKey });
    expect(unknown).toMatchObject({ status: 403, body: { error: { code: 'forbidden' } } });
  });

  it('answers 403 to a body changed after signing, and records nothing', async () => {
    const { dispatchId, runId } = await completedDispatch();
    const receipt = operatorReceiptBodyFactory({ receiptId: uniqueName('rc'), runId: runId ?? '', kind: 'owner_delivery', state: 'failed' });
    const url = api(`/dispatches/${dispatchId}/receipts`);
    const init = { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(receipt) };
    const headers = await signedHeaders(url, init, as(planner));
    const tampered = await answer(await fetch(url, { ...init, headers, body: JSON.stringify({ ...receipt, state: 'confirmed' }) }));
    expect(tampered).toMatchObject({ status: 403, body: { error: { code: 'forbidden', message: expect.stringMatching(/body does not match/) } } });
    const after = await signedGet(`/dispatches/${dispatchId}`);
    expect((after.body as unknown as DispatchView).operatorReceipts.map((r) => r.receiptId)).not.toContain(receipt.receiptId);
  });

  it('answers 403 to a signature dated more than 15 minutes ago', async () => {
    const { dispatchId } = await completedDispatch();
    const url = api(`/dispatches/${dispatchId}`);
    const headers = await signedHeaders(url, { method: 'GET' }, as(planner), new Date(Date.now() - 16 * 60_000));
    const stale = await answer(await fetch(url, { headers }));
    expect(stale).toMatchObject({ status: 403, body: { error: { code: 'forbidden', message: expect.stringMatching(/15 minutes/) } } });
  });
});

describe('your own worker on a --sigv4 platform', () => {
  it('gets a signing identity at `ledger local target add`, and its signed callbacks complete a dispatch (was: 403, no way to sign)', async () => {
    // The bug it pins: only the demo agent had a target credential, so a worker of your own could not
    // sign its callbacks, and `target add` had no way to give it one. Now the CLI mints one, registers
    // it, and writes it as an AWS profile the worker's default credential chain reads.
    const port = await freePort();
    const name = 'signed-mine';
    const lines: string[] = [];
    const running = (): LocalState => ({ status: 'ready', pid: process.pid, startedAt: new Date().toISOString(), pids: {}, info: platform.info, ledgerTable: platform.resources.ledgerTable, logDir: stateDir, invocationLog: join(stateDir, 'invocations.jsonl') });
    await localTarget(['add', name, '--url', `http://127.0.0.1:${port}`], (line) => void lines.push(line), { stateDir, running, connectTo: async () => createLedgerClient({ local: platform.info }), now: () => new Date() });
    const profiles = join(stateDir, 'aws-credentials');
    expect(lines.at(-1)).toBe(`--sigv4: the worker signs as target ${name} — createWorker({ …, signer: sigv4Signer({ region: '${LOCAL_REGION}' }) }), run with AWS_SHARED_CREDENTIALS_FILE=${profiles} AWS_PROFILE=target-${name}`);
    expect(statSync(profiles).mode & 0o777).toBe(0o600);

    // The worker as a user runs it: a plain node script, its keys from the environment's profile.
    const script = `
import { createWorker, sigv4Signer } from '@dispatch-ledger/worker';
const worker = createWorker({ name: 'signed-mine', signer: sigv4Signer({ region: '${LOCAL_REGION}' }), run: async (task, ctx) => {
  await ctx.putEvidence('out/signed.md', 'signed by the worker');
  return { summary: 'signed: ' + task.goal };
} });
const { url } = await worker.listen(${port});
console.log(JSON.stringify({ url }));
`;
    const child = spawn(process.execPath, ['--input-type=module', '--eval', script], {
      cwd: projectRoot,
      env: { PATH: process.env['PATH'] ?? '', HOME: stateDir, AWS_SHARED_CREDENTIALS_FILE: profiles, AWS_PROFILE: `target-${name}`, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      let out = '';
      child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
      await eventually('the worker to listen', () => (out.includes(`127.0.0.1:${port}`) ? true : undefined));
      const dispatchId = uniqueName('d-signed');
      await send({ dispatchId, origin: 'planner', target: name, task: { goal: 'sign it' }, expectedEvidence: ['out/signed.md'] });
      const done = await viewWhen(dispatchId, (view) => view.execution.status === 'completed' && view.evidence.outcome === 'handled');
      expect(done.execution.result?.summary).toBe('signed: sign it');
      expect(done.evidence.found).toEqual(['out/signed.md']);
    } finally {
      child.kill();
    }
  });

  // Regression: `target remove` took the registration away but left the target's key in the platform's
  // credentials file (and its AWS profile), so whoever held it could still sign as that target until
  // `local down`.
  it('takes its signing identity away at `ledger local target remove`: the key is refused at once, its profile gone', async () => {
    const name = 'removed-mine';
    const running = (): LocalState => ({ status: 'ready', pid: process.pid, startedAt: new Date().toISOString(), pids: {}, info: platform.info, ledgerTable: platform.resources.ledgerTable, logDir: stateDir, invocationLog: join(stateDir, 'invocations.jsonl') });
    const deps = { stateDir, running, connectTo: async () => createLedgerClient({ local: platform.info }), now: () => new Date() };
    await localTarget(['add', name, '--url', `http://127.0.0.1:${await freePort()}`], () => undefined, deps);
    const file = JSON.parse(readFileSync(platform.info.credentialsFile ?? '', 'utf8')) as LocalCredentialsFile;
    const key = file.credentials.targets[name];
    if (!key) throw new Error('target add gave no credential');
    const profiles = join(stateDir, 'aws-credentials');
    expect(readFileSync(profiles, 'utf8')).toContain(`[target-${name}]`);
    // Signed as the target, a read of a run it never had is the ledger's answer, not the signature check's.
    // (The control poll needs ?dispatchId=: the route's own 400 shows the signature was taken.)
    expect(await signedGet('/runs/r-none/control', key)).toEqual({ status: 400, body: { error: { code: 'malformed', message: 'dispatchId is required (?dispatchId=)' } } });

    await localTarget(['remove', name, '--force'], () => undefined, deps);
    expect(await signedGet('/runs/r-none/control', key)).toMatchObject({ status: 403, body: { error: { code: 'forbidden', message: 'the access key is not known to this API' } } });
    expect(readFileSync(profiles, 'utf8')).not.toContain(`[target-${name}]`);
    expect((JSON.parse(readFileSync(platform.info.credentialsFile ?? '', 'utf8')) as LocalCredentialsFile).credentials.targets[name]).toBeUndefined();
  });
});
