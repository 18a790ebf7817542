import { DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { registry } from '../../cli/operations.js';
import { describeView } from '../../cli/dispatch.js';
import { manual } from '../../cli/manual.js';
import { manualAttestation } from '../../shared/dispatch/manual.js';
import { awaitingPerson, manualResultAttested } from '../../shared/dispatch/transitions/manual.js';
import { accepted } from '../../shared/dispatch/transitions/lifecycle.js';
import { dispatchView } from '../../shared/dispatch/view.js';
import { stateOnly } from '../../shared/dispatch/state.js';
import { closeFakeApis, fakeApi, type SeenRequest } from '../support/fake-api.js';
import { newDispatchFactory, NOW } from '../support/factories.js';

// `ledger manual` (CONTRACT §13) against the fake of the API on 127.0.0.1 (test/support/fake-api.ts),
// `ledger check`'s lines for a manual dispatch, and `ledger registry target put --kind manual` against a
// mock of the DynamoDB document client (the SDK boundary).

const RLO = '\u202e';
/** Raw control and bidi characters: none may reach a terminal. */
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]/;

afterEach(closeFakeApis);

/** Stored, waiting for a person. */
const waiting = () => stateOnly(awaitingPerson(accepted(newDispatchFactory({ target: 'desk' }), NOW), NOW));
const stored = (note = 'filed by hand') => manualAttestation(waiting(), { attestationId: 'ma-1', kind: 'manual_result_attested', note, evidenceRef: 'out/report.md' }, NOW, 'local:planner');

async function run(args: string[], answer: (seen: SeenRequest) => { status: number; body: unknown }) {
  const api = await fakeApi(answer);
  const lines: string[] = [];
  const code = await manual(args, (line) => lines.push(line), api.connect);
  return { code, lines, seen: api.seen };
}

describe('ledger manual', () => {
  it('posts the attestation as the origin and prints what was recorded and what it rests on', async () => {
    const { code, lines, seen } = await run(['d-2026-0001', '--kind', 'manual_result_attested', '--note', 'filed by hand', '--evidence-ref', 'out/report.md', '--attestation-id', 'ma-1', '--origin', 'lead-agent'], () => ({ status: 201, body: stored() }));
    expect(code).toBe(0);
    expect(seen).toEqual([
      { method: 'POST', path: '/dispatches/d-2026-0001/manual', origin: 'lead-agent', accessKey: undefined, body: { attestationId: 'ma-1', kind: 'manual_result_attested', note: 'filed by hand', evidenceRef: 'out/report.md' } },
    ]);
    expect(lines[0]).toContain('recorded: attestation ma-1 — manual_result_attested for dispatch d-2026-0001 (attempt 1), recorded by local:planner, manual_attestation');
    expect(lines[1]).toContain('not runtime proof');
  });

  it('says an identical retry was already recorded, and makes up an attestation id when none is given', async () => {
    const { code, lines, seen } = await run(['d-2026-0001', '--kind', 'manual_dispatch_written', '--note', 'handed over'], () => ({ status: 200, body: stored() }));
    expect(code).toBe(0);
    expect(lines[0]).toMatch(/^already recorded \(identical\): /);
    expect((seen[0]?.body as { attestationId: string }).attestationId).toMatch(/^ma-[0-9a-f]{16}$/);
    expect(seen[0]?.origin).toBe(process.env.LEDGER_ORIGIN ?? 'planner');
  });

  it('derives the attestation id from what is attested, so running the same command again is an identical retry', async () => {
    const idOf = async (args: string[]) => ((await run(args, () => ({ status: 201, body: stored() }))).seen[0]?.body as { attestationId: string }).attestationId;
    const args = ['d-2026-0001', '--kind', 'manual_result_attested', '--note', 'filed by hand', '--evidence-ref', 'out/report.md'];
    const first = await idOf(args);
    expect(await idOf(args)).toBe(first);
    expect(await idOf(['d-2026-0001', '--kind', 'manual_result_attested', '--note', 'filed by hand'])).not.toBe(first);
    expect(await idOf(['d-2026-0002', ...args.slice(1)])).not.toBe(first);
    expect(await idOf([...args.slice(0, 4), 'filed by hand.', ...args.slice(5)])).not.toBe(first);
    expect(await idOf(['d-2026-0001', '--kind', 'manual_blocked', ...args.slice(3)])).not.toBe(first);
    expect(await idOf([...args, '--attestation-id', 'ma-mine'])).toBe('ma-mine');
  });

  it('attests as the operator with --operator (no origin header)', async () => {
    const { seen } = await run(['d-2026-0001', '--kind', 'manual_delivery_attested', '--note', 'she has it', '--operator'], () => ({ status: 201, body: stored() }));
    expect(seen[0]?.origin).toBeUndefined();
  });

  it('prints the API\'s refusal escaped and exits 1; --json prints the body as it came', async () => {
    const refusal = { error: { code: 'invalid', message: `target "demo-agent${RLO}" is not a manual target` } };
    const human = await run(['d-1', '--kind', 'manual_result_attested', '--note', 'done'], () => ({ status: 422, body: refusal }));
    expect(human.code).toBe(1);
    expect(human.lines.join('\n')).toContain('422 invalid: target');
    expect(human.lines.join('\n')).not.toMatch(RAW);
    const json = await run(['d-1', '--kind', 'manual_result_attested', '--note', 'done', '--json'], () => ({ status: 422, body: refusal }));
    expect(json.code).toBe(1);
    expect(JSON.parse(json.lines.join(''))).toEqual(refusal);
  });

  it('refuses an unknown kind, a missing note, or --origin with --operator before calling anything', async () => {
    for (const args of [['d-1', '--kind', 'dispatch_completed', '--note', 'x'], ['d-1', '--kind', 'manual_blocked'], ['d-1', '--kind', 'manual_blocked', '--note', 'x', '--origin', 'o', '--operator']]) {
      const api = await fakeApi(() => ({ status: 201, body: stored() }));
      await expect(manual(args, () => undefined, api.connect)).rejects.toThrow(/usage: ledger manual/);
      expect(api.seen).toEqual([]);
    }
  });
});

describe('describeView of a manual dispatch', () => {
  it('says it waits for a person and how to record what they did', () => {
    const text = describeView(dispatchView(waiting(), undefined));
    expect(text).toMatch(/^submission +0 call\(s\), waiting for person$/m);
    expect(text).toMatch(/^unknown +waits for a person \(manual target "desk"\).*npx ledger manual d-2026-0001 --kind K --note N/m);
    expect(text).toMatch(/^gate +not satisfied: manual target: waiting for a person/m);
  });

  it('shows the attestations apart from the receipts, and what a satisfied gate rests on', () => {
    const attestation = stored(`filed${RLO}`);
    const state = manualResultAttested(waiting(), { attestationId: attestation.attestationId, at: attestation.recordedAt }, NOW);
    const text = describeView(dispatchView(state, undefined, undefined, [], [], [], [{ ...attestation, recordedBy: `local:planner${RLO}` }]));
    expect(text).toMatch(/^receipts +dispatch_written@/m);
    expect(text).toMatch(/^manual +ma-1: manual_result_attested by local:planner.* \(manual_attestation\)@.*, evidence out\/report\.md$/m);
    expect(text).toMatch(/^gate +satisfied — rests on a person's attestation/m);
    expect(text).not.toMatch(RAW);
  });
});

describe('ledger registry target put --kind manual', () => {
  const documents = mockClient(DynamoDBDocumentClient);
  beforeEach(() => documents.reset());

  it('registers a manual target with no base URL, secret or limit, and says what it means', async () => {
    documents.onAnyCommand().resolves({});
    documents.on(GetCommand).resolves({});
    const printed: string[] = [];
    expect(await registry(['target', 'put', '--table', 'ledger', '--name', 'desk', '--kind', 'manual'], (line) => printed.push(line))).toBe(0);
    const { pk: _pk, sk: _sk, ...item } = documents.commandCalls(PutCommand)[0]?.args[0].input.Item ?? {};
    // Its first registration: revision 1 (the limit's caps, had it one, would be written for it).
    expect(item).toEqual({ name: 'desk', kind: 'manual', registrationRev: 1 });
    expect(printed[0]).toMatch(/^target desk: manual — dispatches to it are recorded and wait for a person/);
  });

  it.each([
    [['target', 'put', '--table', 't', '--name', 'desk', '--kind', 'manual', '--base-url', 'https://a.example.com'], /takes no --base-url/],
    [['target', 'put', '--table', 't', '--name', 'desk', '--kind', 'manual', '--max-concurrent-runs', '2'], /takes no --base-url, --secret-id or --max-concurrent-runs/],
    [['target', 'put', '--table', 't', '--name', 'desk', '--kind', 'carrier-pigeon'], /--kind must be http or manual/],
  ])('refuses %j before writing anything', async (args, problem) => {
    documents.onAnyCommand().resolves({});
    await expect(registry(args, () => undefined)).rejects.toThrow(problem);
    expect(documents.calls()).toHaveLength(0);
  });
});

// Regression: a view holds the newest 50 entries of each list; `ledger check` never said a dispatch had
// more (the view's `more` cursors), so a person read 50 receipts as all of them.
describe('describeView of a dispatch with more than the view shows', () => {
  it('says which lists hold more and where the older entries are read', () => {
    const view = { ...dispatchView(waiting(), undefined), more: { receipts: 'c-r', operatorReceipts: null, manualAttestations: null, runs: 'c run' } };
    const text = describeView(view);
    expect(text).toMatch(/^older +the view shows the newest 50 of each list; more receipts: GET \/dispatches\/d-2026-0001\/receipts\?cursor=c-r; more runs: GET \/dispatches\/d-2026-0001\/runs\?cursor=c%20run$/m);
    expect(describeView(dispatchView(waiting(), undefined))).not.toMatch(/^older/m);
  });
});
