import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  DISPATCH_ID_RULE,
  FINAL_RUN_STATUSES,
  MAX_API_BODY_DEPTH,
  MAX_CLAIM_RESULTS,
  MAX_LEASE_SECONDS,
  MAX_LIST_LIMIT,
  MAX_CURSOR_CHARS,
  DEFAULT_LIST_LIMIT,
  MAX_NOTE_CHARS,
  MAX_REASON_CHARS,
  MAX_SUMMARY_CHARS,
  RESULT_SUMMARY_PREVIEW_CHARS,
  MAX_WAIT_SECONDS,
  MIN_LEASE_SECONDS,
  MAX_EVIDENCE_REFS,
  MAX_EVIDENCE_BYTES,
  MAX_MESSAGE_BYTES,
  MAX_RESULT_BODY_BYTES,
  MAX_REF_BYTES,
  MAX_RUN_ID_CHARS,
  MAX_TASK_DEPTH,
  MAX_TIMEOUT_SECONDS,
  NATIVE_STATUS_RULE,
  ROUTE_DOCS,
  ROUTES,
  RUN_STATUSES,
  TARGET_ROUTES,
  type RouteCaller,
  type RouteName,
  type TargetRouteName,
} from '@dispatch-ledger/protocol';
import { queryNamesOf, ROUTE_SCHEMAS, type RouteSchemas } from '@dispatch-ledger/protocol/route-schemas';
import type * as z from 'zod/mini';
import { DETAIL_TYPES, EVENT_CATALOG } from '../shared/events/catalog.js';
import { VIEW_LIST_LIMIT } from '../shared/api/pages.js';
import { replaceDocBlocks } from './doc-blocks.js';

/**
 * Writes the generated parts of docs/protocol.md — the route table, the run statuses, the bounds and
 * the event detail-types — from `@dispatch-ledger/protocol` and the event catalog, between their
 * `<!-- generated:NAME -->` … `<!-- /generated:NAME -->` markers; the prose around them is left as it is.
 * Run `npm run docs:protocol` after changing either; a unit test fails while the file is stale.
 */

export const PROTOCOL_DOC = fileURLToPath(new URL('../docs/protocol.md', import.meta.url));

const WHO: Record<RouteCaller, string> = {
  owner: 'its origin',
  origin: 'that origin',
  operator: 'operator',
  operator_reads: 'operator (read)',
  target: 'its target',
};

function routeTable(): string {
  const rows = (Object.keys(ROUTES) as RouteName[]).map((name) => {
    const spec = ROUTES[name];
    const doc = ROUTE_DOCS[name];
    const names = queryNamesOf(name);
    const query = names.length > 0 ? `?${names.join('&')}` : '';
    return `| \`${spec.method} ${spec.path}${query}\` | ${spec.who.map((who) => WHO[who]).join(', ')} | ${doc.ok.join(', ')} | ${doc.errors.join(', ')} | \`${name}\`: ${doc.summary} |`;
  });
  return ['| route | who | ok | errors | name and what it does |', '| --- | --- | --- | --- | --- |', ...rows].join('\n');
}

function statuses(): string {
  return [
    `Run statuses a target reports: ${RUN_STATUSES.map((status) => `\`${status}\``).join(', ')}; final (never left): ${FINAL_RUN_STATUSES.map((status) => `\`${status}\``).join(', ')}.`,
    `The ledger's own \`unknown\` is never a target's word. A final event may carry \`nativeStatus\` (${NATIVE_STATUS_RULE}).`,
  ].join('\n');
}

function bounds(): string {
  const rows: Array<[string, string]> = [
    ['dispatch id', DISPATCH_ID_RULE],
    ['run id', `1..${MAX_RUN_ID_CHARS.toLocaleString('en-US')} characters; \`/\` allowed (percent-encoded in a path)`],
    ['evidence refs expected or claimed', `at most ${MAX_EVIDENCE_REFS}`],
    ['an evidence ref', `at most ${MAX_REF_BYTES} UTF-8 bytes, safe (§6)`],
    ['an evidence file', `at most ${MAX_EVIDENCE_BYTES.toLocaleString('en-US')} bytes (4 MiB)`],
    ['a dispatch message', `at most ${MAX_MESSAGE_BYTES.toLocaleString('en-US')} bytes (1 MiB, the queue's maximum), counted as the text the queue is sent`],
    ['a final event’s `result.body`', `any JSON of at most ${MAX_RESULT_BODY_BYTES.toLocaleString('en-US')} bytes (256 KiB)`],
    ['a task', `nests at most ${MAX_TASK_DEPTH} levels (the task object is level 1)`],
    ['any API body', `nests at most ${MAX_API_BODY_DEPTH.toLocaleString('en')} levels`],
    ['any of a dispatch’s clocks', `at most ${MAX_TIMEOUT_SECONDS.toLocaleString('en')} s (30 days)`],
    ['a reason (cancel, redispatch, slot release, evidence mark)', `1..${MAX_REASON_CHARS} characters, not blank`],
    ['an inbox release’s reason', `optional, at most ${MAX_REASON_CHARS} characters (not kept)`],
    ['a note (receipt, attestation)', `at most ${MAX_NOTE_CHARS.toLocaleString('en')} characters`],
    ['a result summary', `at most ${MAX_SUMMARY_CHARS.toLocaleString('en')} characters taken; the first ${RESULT_SUMMARY_PREVIEW_CHARS} kept and shown (a preview: whole text goes in \`result.body\`)`],
    ['a list page (`limit`, on the lists that take one)', `1..${MAX_LIST_LIMIT}; ${DEFAULT_LIST_LIMIT} when none is given`],
    ['a page of a dispatch’s own list (its runs, receipts, attestations: no `limit`)', `${VIEW_LIST_LIMIT} entries, newest first`],
    ['a list cursor', `1..${MAX_CURSOR_CHARS.toLocaleString('en-US')} characters, as the list gave it`],
    ['an inbox lease', `${MIN_LEASE_SECONDS}..${MAX_LEASE_SECONDS} s`],
    ['an inbox long poll (`waitSeconds`)', `0..${MAX_WAIT_SECONDS} s`],
    ['results in one claim', `1..${MAX_CLAIM_RESULTS}`],
  ];
  return ['| what | bound |', '| --- | --- |', ...rows.map(([what, bound]) => `| ${what} | ${bound} |`)].join('\n');
}

/** The fields of an object schema, each marked `?` when it may be left out. */
function fieldsOf(schema: z.ZodMiniType): string {
  const shape = (schema as z.ZodMiniType & { readonly def: { readonly shape?: Record<string, z.ZodMiniType> } }).def.shape ?? {};
  return Object.entries(shape)
    .map(([name, field]) => `\`${name}${field._zod.optin === 'optional' ? '?' : ''}\``)
    .join(', ');
}

/** What each route that reads a body or a checked query takes, from ROUTE_SCHEMAS. */
function requests(): string {
  const rows = (Object.keys(ROUTE_SCHEMAS) as RouteName[]).flatMap((name) => {
    const schemas: RouteSchemas<unknown> = ROUTE_SCHEMAS[name];
    const parts = [schemas.body && `body: ${fieldsOf(schemas.body())}`, schemas.query && `query: ${fieldsOf(schemas.query())}`].filter(Boolean);
    return parts.length === 0 ? [] : [`| \`${name}\` | ${parts.join('; ')} |`];
  });
  return ['| route | takes (a body: any other field is refused; a query: the ledger reads only these, the client sends no other) |', '| --- | --- |', ...rows].join('\n');
}

function targetRoutes(): string {
  return ['| route | name |', '| --- | --- |', ...(Object.keys(TARGET_ROUTES) as TargetRouteName[]).map((name) => `| \`${TARGET_ROUTES[name].method} ${TARGET_ROUTES[name].path}\` | \`${name}\` |`)].join('\n');
}

function events(): string {
  return ['| detail-type | when |', '| --- | --- |', ...DETAIL_TYPES.map((type) => `| \`${type}\` | ${EVENT_CATALOG[type].description} |`)].join('\n');
}

export const GENERATED: Record<string, () => string> = { routes: routeTable, requests, 'target-routes': targetRoutes, statuses, bounds, events };

/** `doc` with every generated block written afresh; throws when a marker is missing. */
export function renderProtocolDoc(doc: string): string {
  return replaceDocBlocks(doc, 'generated', Object.fromEntries(Object.entries(GENERATED).map(([name, render]) => [name, render()])), 'docs/protocol.md');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  writeFileSync(PROTOCOL_DOC, renderProtocolDoc(readFileSync(PROTOCOL_DOC, 'utf8')));
  console.log(`wrote ${PROTOCOL_DOC}`);
}
