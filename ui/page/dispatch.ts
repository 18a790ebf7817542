import type { DispatchView } from '../../shared/dispatch/view.js';
import { evidenceWords } from '../../shared/dispatch/evidence-words.js';
import { load, routeUrl, type Loaded, type PageConfig } from './api.js';
import { badge, cell, el, facts, replaceKeepingFocus, section, when, type Child } from './dom.js';
import { bannersFor, commandsFor, monitorLine } from './words.js';

type Receipt = DispatchView['receipts'][number];
type OperatorReceipt = DispatchView['operatorReceipts'][number];

const list = (values: readonly string[], empty: string): Child =>
  values.length === 0 ? el('span', { className: 'quiet' }, empty) : el('ul', { className: 'refs' }, ...values.map((value) => el('li', {}, el('code', {}, value))));

/** The three claims, never inferred from one another (CONTRACT vocabulary), side by side. */
function claims(view: DispatchView): HTMLElement {
  const { execution, artifactAcceptance: acceptance, ownerDelivery: delivery } = view;
  const claim = (id: string, heading: string, state: string | null, rows: ReadonlyArray<readonly [string, Child]>, note: string): HTMLElement => {
    const box = section(id, heading, 'h3', el('p', { className: 'claim-state' }, badge(state)), facts(rows), el('p', { className: 'note' }, note));
    box.classList.add('claim');
    return box;
  };
  return el(
    'div',
    { className: 'claims' },
    claim(
      'claim-execution',
      'Execution',
      execution.status,
      [
        ['target said', execution.nativeStatus],
        ['monitor', monitorLine(view)],
        ['last activity', when(execution.lastActivityAt)],
        ['completed', when(execution.completedAt)],
        ...(execution.pendingApproval ? ([['approval pending', el('span', {}, el('code', {}, execution.pendingApproval.approvalId), ' since ', when(execution.pendingApproval.requestedAt))]] as const) : []),
        ...(execution.cancelRequestedAt ? ([['cancel asked', when(execution.cancelRequestedAt)]] as const) : []),
        ...(execution.result?.summary !== undefined ? ([['result', execution.result.summary]] as const) : []),
      ],
      'What the target did, as last observed.',
    ),
    claim(
      'claim-acceptance',
      'Artifact acceptance',
      acceptance.state,
      [
        ['basis', acceptance.basis],
        ['receipt', acceptance.receiptId],
      ],
      'Did someone check the artifact against the commission? Completion is not acceptance.',
    ),
    claim(
      'claim-delivery',
      'Owner delivery',
      delivery.state,
      [
        ['basis', delivery.basis === 'origin_ack' ? 'origin_ack (the origin acknowledged: runtime proof)' : delivery.basis],
        ['receipt', delivery.receiptId],
        ...(delivery.at ? ([['at', when(delivery.at)]] as const) : []),
        ...(delivery.recordedBy ? ([['by', delivery.recordedBy]] as const) : []),
      ],
      'Did the result reach whoever waits for it? Delivery needs an acknowledgement.',
    ),
  );
}

function evidence(view: DispatchView): HTMLElement {
  const { evidence: found } = view;
  const files =
    found.files.length === 0
      ? el('p', { className: 'quiet' }, evidenceWords({ status: view.execution.status, ...found }))
      : el(
          'table',
          { className: 'files' },
          el('caption', {}, 'Files the ledger checked, with the SHA-256 of the bytes it sealed'),
          el('thead', {}, el('tr', {}, ...['ref', 'SHA-256', 'bytes', 'checked'].map((name) => el('th', { attrs: { scope: 'col' } }, name)))),
          el(
            'tbody',
            {},
            ...found.files.map((file) =>
              el('tr', {}, cell('ref', el('code', {}, file.ref)), cell('SHA-256', el('code', { className: 'hash' }, file.sha256)), cell('bytes', file.bytes), cell('checked', when(file.checkedAt))),
            ),
          ),
        );
  return section(
    'evidence',
    'Evidence',
    'h3',
    el('p', {}, 'Outcome: ', badge(found.outcome)),
    facts([
      ['expected', list(found.expected, 'nothing expected')],
      ['missing', list(found.missing, 'none')],
      ['invalid', list(found.invalid, 'none')],
    ]),
    files,
  );
}

function timeline(view: DispatchView): HTMLElement {
  const entries: Array<{ at: string; node: HTMLElement }> = [
    ...view.receipts.map((receipt: Receipt) => ({
      at: receipt.at,
      node: el(
        'li',
        {},
        el('p', { className: 'card-title' }, badge(receipt.event), ' ', when(receipt.at), ` · attempt ${receipt.attempt}`),
        'runId' in receipt ? el('p', { className: 'meta' }, 'run ', el('code', {}, receipt.runId), 'requestId' in receipt ? ' · request ' : null, 'requestId' in receipt ? el('code', {}, receipt.requestId) : null) : null,
        'reason' in receipt ? el('p', { className: 'reason' }, receipt.reason) : null,
        receipt.files && receipt.files.length > 0 ? el('p', { className: 'meta' }, `${receipt.files.length} evidence file(s) checked`) : null,
      ),
    })),
    ...view.operatorReceipts.map((receipt: OperatorReceipt) => ({
      at: receipt.recordedAt,
      node: el(
        'li',
        { className: 'attested' },
        el('p', { className: 'card-title' }, badge(receipt.kind), ' ', badge(receipt.state), ' ', when(receipt.recordedAt)),
        el('p', { className: 'meta' }, `${receipt.basis}: verified by ${receipt.verifiedBy}`, receipt.recordedBy ? ` (recorded by ${receipt.recordedBy})` : null, ' · receipt ', el('code', {}, receipt.receiptId)),
        receipt.evidenceRef ? el('p', { className: 'meta' }, 'evidence ', el('code', {}, receipt.evidenceRef)) : null,
        receipt.note ? el('p', {}, receipt.note) : null,
      ),
    })),
  ];
  entries.sort((a, b) => a.at.localeCompare(b.at));
  const older = view.more && (view.more.receipts || view.more.operatorReceipts) ? el('p', { className: 'note' }, 'Older receipts are kept; this page shows the newest 50 of each list.') : null;
  return section('timeline', 'Receipt timeline', 'h3', entries.length === 0 ? el('p', { className: 'quiet' }, 'No receipt yet.') : el('ol', { className: 'timeline' }, ...entries.map((entry) => entry.node)), older);
}

function runs(view: DispatchView): HTMLElement {
  return section(
    'runs',
    'Runs',
    'h3',
    el(
      'table',
      { className: 'runs' },
      el('thead', {}, el('tr', {}, ...['attempt', 'run', 'status', 'target said', 'completed', 'ended'].map((name) => el('th', { attrs: { scope: 'col' } }, name)))),
      el(
        'tbody',
        {},
        ...view.runs.map((run) =>
          el(
            'tr',
            {},
            cell('attempt', run.attempt),
            cell('run', run.runId ? el('code', {}, run.runId) : '—'),
            cell('status', badge(run.status)),
            cell('target said', run.nativeStatus ?? '—'),
            cell('completed', when(run.completedAt)),
            cell('ended', run.superseded ? 'superseded ' : null, run.endedAt ? when(run.endedAt) : '—', run.reason ? ` (${run.reason})` : null),
          ),
        ),
      ),
    ),
  );
}

function actions(view: DispatchView, config: PageConfig): HTMLElement {
  return section(
    'act',
    'Act on it',
    'h3',
    el('p', { className: 'note' }, 'This page only reads. These commands act, from a terminal with the same credentials:'),
    el('ul', { className: 'commands' }, ...commandsFor(view, config.connection, config.remote).map((command) => el('li', {}, el('p', {}, command.does), el('pre', {}, el('code', {}, command.line))))),
  );
}

function render(view: DispatchView, config: PageConfig): Child[] {
  return [
    el('p', { className: 'meta' }, `${view.origin} → ${view.target} · attempt ${view.attempt} · phase `, badge(view.phase), view.blockedReason ? ` (${view.blockedReason})` : null, ' · run ', view.runId ? el('code', {}, view.runId) : '—'),
    ...bannersFor(view).map((banner) => el('p', { className: 'alert', attrs: { 'data-kind': banner.kind } }, banner.text)),
    claims(view),
    section(
      'unknowns',
      'What is not known',
      'h3',
      view.unknowns.length === 0 ? el('p', { className: 'quiet' }, 'Nothing is unknown.') : el('ul', {}, ...view.unknowns.map((unknown) => el('li', {}, unknown))),
    ),
    section('gate', 'Gate', 'h3', view.gate.satisfied ? el('p', {}, badge('satisfied'), ' the dispatch receipts prove it done') : el('ul', {}, ...view.gate.reasons.map((reason) => el('li', {}, reason)))),
    evidence(view),
    timeline(view),
    runs(view),
    actions(view, config),
  ];
}

/** The dispatch page (`#/dispatches/{id}`): polled like the overview, and looked up at the target on demand. */
export function mountDispatch(main: HTMLElement, dispatchId: string, config: PageConfig): () => Promise<boolean> {
  const path = routeUrl(config, 'getDispatch', { dispatchId });
  const body = el('div');
  const lookedUp = el('span', { className: 'meta', attrs: { role: 'status' } });
  const lookUp = el('button', { attrs: { type: 'button' } }, 'Look the run up at the target now');
  main.replaceChildren(
    el('nav', { attrs: { 'aria-label': 'Back' } }, el('a', { href: '#/' }, '← Everything')),
    el('section', { id: 'dispatch', attrs: { 'aria-labelledby': 'dispatch-heading' } }, el('h2', { id: 'dispatch-heading' }, 'Dispatch ', el('code', {}, dispatchId)), el('p', { className: 'toolbar' }, lookUp, ' ', lookedUp), body),
  );
  /** Shows the dispatch as read; answers whether it could be read. */
  const show = async (query: string): Promise<Loaded<DispatchView>> => {
    const view = await load<DispatchView>(`${path}${query}`);
    replaceKeepingFocus(body, view.ok ? render(view.body, config) : [el('p', { className: 'problem', attrs: { role: 'status' } }, `Could not load this dispatch: ${view.problem}`)]);
    return view;
  };
  // The line says what the click came to, and stays (the next poll replaces the body, not this line).
  // Regression: it said "looked up at …" whatever the answer, so a failed lookup read as done.
  lookUp.addEventListener('click', () => {
    lookUp.disabled = true;
    lookedUp.textContent = 'looking the run up…';
    void show('?refresh=true').then(
      (view) => {
        lookUp.disabled = false;
        // The ledger looks a run up at most once in a while (a click meanwhile gets what it holds): "asked", not "looked up".
        lookedUp.textContent = view.ok ? `asked the ledger to look the run up at ${new Date().toLocaleTimeString()}` : `the lookup failed: ${view.problem}`;
      },
      () => {
        lookUp.disabled = false;
      },
    );
  });
  return async () => (await show('')).ok;
}
