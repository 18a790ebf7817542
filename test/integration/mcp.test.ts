import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TOOL_NAMES } from '../../cli/mcp-server.js';
import { isAlive } from '../../local/engines/process.js';
import { projectRoot } from '../../local/paths.js';
import { writeState } from '../../local/state.js';
import type { DispatchView } from '../../shared/dispatch/view.js';
import { eventually } from '../support/eventually.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * `ledger mcp` (CONTRACT §13) as an MCP client runs it: `node bin/ledger.mjs mcp` started by the SDK's
 * own Client over StdioClientTransport, finding the local platform through LEDGER_STATE_DIR's
 * state.json, and driven through a dispatch's whole life — dispatch, check with refresh until handled,
 * accept the artifact, claim and ack the result — then an error, then close.
 */

let platform: TestPlatform;
let stateDir: string;
/**
 * `ledger` finds a platform only while the state's supervisor pid is a live process whose command
 * line names supervisor-main (cli/local.ts `runningState`: a stale state.json is never trusted). The
 * platform here runs inside the test process, so a do-nothing process stands in for its supervisor.
 */
let supervisorStandIn: ChildProcess;
let client: Client;
let transport: StdioClientTransport;
const clientErrors: Error[] = [];
let serverLog = '';

type ToolResult = Awaited<ReturnType<Client['callTool']>>;

const structured = <T>(result: ToolResult): T => result.structuredContent as T;

beforeAll(async () => {
  platform = await startTestPlatform();
  stateDir = mkdtempSync(join(tmpdir(), 'ledger-mcp-'));
  supervisorStandIn = spawn(process.execPath, ['-e', 'setInterval(() => {}, 2 ** 30)', 'supervisor-main'], { stdio: 'ignore' });
  const pid = supervisorStandIn.pid ?? 0;
  writeState(stateDir, {
    status: 'ready',
    pid,
    startedAt: new Date().toISOString(),
    pids: { supervisor: pid },
    info: platform.platform.info,
    logDir: join(stateDir, 'logs'),
    invocationLog: platform.platform.invocationLog,
  });

  transport = new StdioClientTransport({
    command: process.execPath,
    args: ['bin/ledger.mjs', 'mcp'],
    cwd: projectRoot,
    env: { ...getDefaultEnvironment(), LEDGER_STATE_DIR: stateDir, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    stderr: 'pipe',
  });
  transport.stderr?.on('data', (chunk: Buffer) => {
    serverLog += chunk.toString('utf8');
  });
  client = new Client({ name: 'ledger-mcp-test', version: '0.0.0' });
  // Anything on the server's stdout that is not an MCP message lands here.
  client.onerror = (error) => clientErrors.push(error);
  await client.connect(transport);
});

afterAll(async () => {
  await client?.close();
  supervisorStandIn?.kill();
  await platform?.stop();
  if (stateDir) rmSync(stateDir, { recursive: true, force: true });
});

describe('ledger mcp over stdio', () => {
  it('lists the ten tools, each with an input schema, the descriptions teaching the stance', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual([...TOOL_NAMES].sort());
    for (const tool of tools) {
      expect(tool.inputSchema.type).toBe('object');
      expect(tool.description).toBeTruthy();
    }
    const description = (name: string): string => tools.find((tool) => tool.name === name)?.description ?? '';
    expect(description('redispatch')).toMatch(/check the run first/i);
    expect(description('redispatch')).toMatch(/runs the work again, even work that completed/);
    expect(description('list_rejections')).toMatch(/conflicts/);
    expect(description('check_dispatch')).toMatch(/"unknown" is not failure/);
    expect(description('check_dispatch')).toMatch(/completion is not acceptance/i);
    expect(description('claim_results')).toMatch(/only ack_result confirms owner delivery/);
    // The schemas are the API's: the dispatch message's fields, the receipt's kinds.
    expect(tools.find((tool) => tool.name === 'dispatch')?.inputSchema.properties).toHaveProperty('expectedEvidence');
    expect(tools.find((tool) => tool.name === 'record_receipt')?.inputSchema.properties).toHaveProperty('kind.enum', ['artifact_acceptance', 'owner_delivery']);
  });

  it('dispatches, checks with refresh until handled, accepts the artifact, claims and acks the result', async () => {
    const dispatchId = 'd-mcp-1';
    const sent = await client.callTool({
      name: 'dispatch',
      arguments: {
        dispatchId,
        target: 'demo-agent',
        task: { behavior: 'complete', goal: 'summarise the incident' },
        expectedEvidence: ['out/report.md'],
        delivery: { mode: 'callback' },
      },
    });
    expect(sent.isError).toBeFalsy();
    expect(structured(sent)).toMatchObject({ dispatchId, origin: 'planner', intake: 'queued: on the dispatch queue, not yet recorded' });
    expect(structured<{ messageId: string }>(sent).messageId).toMatch(/\S/);

    const handled = await eventually(
      `check_dispatch ${dispatchId} handled`,
      async () => {
        const checked = await client.callTool({ name: 'check_dispatch', arguments: { dispatchId, refresh: true } });
        return checked.isError ? undefined : structured<DispatchView>(checked);
      },
      { intervalMs: 250, until: (view) => view.evidence.outcome === 'handled' },
    );
    expect(handled).toMatchObject({ origin: 'planner', execution: { status: 'completed' }, evidence: { found: ['out/report.md'] }, artifactAcceptance: { state: 'unverified' } });
    const runId = handled.runId ?? '';
    expect(runId).not.toBe('');

    const receipt = await client.callTool({
      name: 'record_receipt',
      arguments: { dispatchId, receiptId: 'rc-mcp-1', runId, kind: 'artifact_acceptance', state: 'accepted', verifiedBy: 'mcp-test', evidenceRef: 'out/report.md' },
    });
    expect(receipt.isError).toBeFalsy();
    expect(structured(receipt)).toMatchObject({ receiptId: 'rc-mcp-1', dispatchId, runId, kind: 'artifact_acceptance', state: 'accepted', basis: 'operator_attestation' });

    const claimed = await eventually(
      `claim_results holding ${dispatchId}`,
      async () => {
        const claim = await client.callTool({ name: 'claim_results', arguments: { mode: 'after_turn', max: 10 } });
        return claim.isError ? undefined : structured<{ claimToken: string | null; results: Array<{ resultId: string; dispatchId: string }> }>(claim);
      },
      { intervalMs: 250, until: (claim) => claim.results.some((result) => result.dispatchId === dispatchId) },
    );
    const result = claimed.results.find((each) => each.dispatchId === dispatchId);
    const acked = await client.callTool({ name: 'ack_result', arguments: { resultId: result?.resultId ?? '', claimToken: claimed.claimToken ?? '' } });
    expect(acked.isError).toBeFalsy();
    expect(structured(acked)).toMatchObject({ resultId: result?.resultId, state: 'delivered' });

    // The three claims, each proven on its own: completed, accepted by a person, delivered by the ack.
    const after = structured<DispatchView>(await client.callTool({ name: 'check_dispatch', arguments: { dispatchId } }));
    expect(after).toMatchObject({
      execution: { status: 'completed' },
      artifactAcceptance: { state: 'accepted', receiptId: 'rc-mcp-1', basis: 'operator_attestation' },
      ownerDelivery: { state: 'confirmed', basis: 'origin_ack' },
      gate: { satisfied: true },
    });

    // check_dispatch answers one line first: the three claims and what to do next.
    const checked = await client.callTool({ name: 'check_dispatch', arguments: { dispatchId } });
    expect((checked.content as Array<{ text: string }>)[0]?.text).toBe('execution completed · evidence handled · acceptance accepted · delivery confirmed — next: nothing: the work is done, accepted and delivered');

    // The same id with other content is refused as a conflict: list_rejections shows it, and the summary counts it.
    await client.callTool({ name: 'dispatch', arguments: { dispatchId, target: 'demo-agent', task: { behavior: 'complete', goal: 'something else' } } });
    const conflicts = await eventually(
      'the conflict in list_rejections',
      async () => structured<{ items: Array<{ reason: string; dispatchId?: string }> }>(await client.callTool({ name: 'list_rejections', arguments: { limit: 10 } })),
      { intervalMs: 250, until: (page) => page.items.some((item) => item.reason === 'conflict') },
    );
    expect(conflicts.items.find((item) => item.reason === 'conflict')).toMatchObject({ reason: 'conflict' });
    const summary = (await client.callTool({ name: 'check_dispatch', arguments: { dispatchId } })).content as Array<{ text: string }>;
    expect(summary[0]?.text).toMatch(/\(1 later message\(s\) with this id and other content refused: conflict\)$/);

    // The history tool lists it for this origin.
    const history = structured<{ items: Array<{ dispatchId: string }> }>(await client.callTool({ name: 'dispatch_status', arguments: { limit: 10 } }));
    expect(history.items.map((item) => item.dispatchId)).toContain(dispatchId);
  });

  it("answers an unknown dispatch as a tool error carrying the API's not_found", async () => {
    const checked = await client.callTool({ name: 'check_dispatch', arguments: { dispatchId: 'd-mcp-nobody' } });
    expect(checked.isError).toBe(true);
    expect(structured<{ error: { code: string; message: string } }>(checked).error).toMatchObject({ code: 'not_found' });
    const [content] = checked.content as Array<{ type: string; text: string }>;
    expect(JSON.parse(content?.text ?? '')).toMatchObject({ error: { code: 'not_found' } });
  });

  it('wrote nothing but MCP messages on stdout, its log on stderr, and is gone once the client closes', async () => {
    expect(clientErrors).toEqual([]);
    expect(serverLog).toContain('"msg":"ledger mcp serving on stdio"');
    const pid = transport.pid;
    expect(pid).toBeGreaterThan(0);
    await client.close();
    await eventually('the ledger mcp process to exit', () => (isAlive(pid ?? 0) ? undefined : true));
    // It left on the end of its stdin, as a client closing it asks, not on the signal that follows.
    expect(serverLog).toContain('"msg":"ledger mcp stopped"');
  });
});
