/**
 * The page's reads, through its own server (`/api/...`, ui/routes.ts). The server relays the ledger's
 * answer as `{ status, body }`: a route that is missing or failing comes back as data, and the section
 * that asked says it could not load — the rest of the page carries on.
 */
import { SESSION_HEADER } from '../session.js';

export type Loaded<T> = { readonly ok: true; readonly body: T } | { readonly ok: false; readonly problem: string };

interface Relayed {
  readonly status: number;
  readonly body: unknown;
}

const isRelayed = (value: unknown): value is Relayed =>
  typeof value === 'object' && value !== null && typeof (value as { status?: unknown }).status === 'number' && 'body' in value;

/** The words of an error body `{ error: { code, message } }`, whatever else came. */
function problemOf(who: 'the ledger' | 'the status page', status: number, body: unknown): string {
  const error = typeof body === 'object' && body !== null ? (body as { error?: { code?: unknown; message?: unknown } }).error : undefined;
  const code = typeof error?.code === 'string' ? error.code : undefined;
  const message = typeof error?.message === 'string' ? error.message : undefined;
  return `${who} answered ${status}${code ? ` ${code}` : ''}${message ? `: ${message}` : ''}`;
}

/** Where this origin (`127.0.0.1:PORT`: storage is kept apart by port, unlike cookies) keeps the page's secret. */
const SESSION_KEY = 'ledger-status-session';
let session: string | undefined;

/**
 * Takes this start's secret from the printed URL (`/?token=…`) into storage and out of the address bar
 * and the history entry; without one in the URL, the secret kept before (a reload, another tab).
 * Call it before the first read. Storage may be refused (a locked-down profile): this document keeps it then.
 */
export function takeSession(): void {
  const url = new URL(location.href);
  const given = url.searchParams.get('token');
  if (given === null) {
    try {
      session = localStorage.getItem(SESSION_KEY) ?? undefined;
    } catch {
      session = undefined;
    }
    return;
  }
  session = given;
  try {
    localStorage.setItem(SESSION_KEY, given);
  } catch {
    // Kept in this document alone: a reload asks for the printed URL again.
  }
  url.searchParams.delete('token');
  history.replaceState(history.state, '', `${url.pathname}${url.search}${url.hash}`);
}

/** Every request to the page's server but its public files carries the secret. */
const headers = (): Record<string, string> => ({ accept: 'application/json', ...(session === undefined ? {} : { [SESSION_HEADER]: session }) });

export async function load<T>(path: string): Promise<Loaded<T>> {
  let response: Response;
  try {
    response = await fetch(`/api${path}`, { headers: headers(), cache: 'no-store' });
  } catch {
    return { ok: false, problem: 'the status page server is not answering (was `ledger ui` stopped?)' };
  }
  const answer: unknown = await response.json().catch(() => undefined);
  // The page's own server refused (no secret, an old one): its words, not the ledger's.
  if (!response.ok) return { ok: false, problem: problemOf('the status page', response.status, answer) };
  if (!isRelayed(answer)) return { ok: false, problem: 'the status page server sent something unreadable' };
  if (answer.status !== 200) return { ok: false, problem: problemOf('the ledger', answer.status, answer.body) };
  return { ok: true, body: answer.body as T };
}

/**
 * What the server tells the page once: how often to poll, how the commands it shows reach the same
 * ledger, and the phases and execution statuses to filter by. The lists come from the server's shared
 * modules (shared/dispatch/transitions.ts, counts.ts), not a copy here: those modules reach Node's
 * crypto through the state machine's retry module, which no browser bundle can carry.
 */
export interface PageConfig {
  readonly refreshMs: number;
  readonly connection: readonly string[];
  readonly remote: boolean;
  readonly phases: readonly string[];
  readonly statuses: readonly string[];
  /** The path templates of the ledger routes the page reads (from the protocol's route table, by the server): `{name}` is one segment. */
  readonly routes: Readonly<Record<PageRoute, string>>;
}

/** The routes the page reads, by their names in the protocol's route table. */
export type PageRoute = 'getDispatch' | 'listDispatches' | 'attention' | 'counts';
const PAGE_ROUTES: readonly PageRoute[] = ['getDispatch', 'listDispatches', 'attention', 'counts'];

/**
 * The path of a route the page reads, its `{name}` segments filled (each encoded) and its query added.
 *
 * @example
 * routeUrl(config, 'getDispatch', { dispatchId: 'd 1' }, { refresh: 'true' }) // '/dispatches/d%201?refresh=true'
 */
export function routeUrl(config: PageConfig, name: PageRoute, params: Readonly<Record<string, string>> = {}, query: Readonly<Record<string, string>> = {}): string {
  const path = config.routes[name].replace(/\{(\w+)\}/g, (_whole, param: string) => encodeURIComponent(params[param] ?? ''));
  const search = new URLSearchParams(query).toString();
  return search === '' ? path : `${path}?${search}`;
}

const strings = (value: unknown): string[] => (Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : []);

export async function loadConfig(): Promise<PageConfig> {
  const fallback: PageConfig = { refreshMs: 3000, connection: [], remote: false, phases: [], statuses: [], routes: { getDispatch: '', listDispatches: '', attention: '', counts: '' } };
  try {
    const response = await fetch('/config.json', { headers: headers(), cache: 'no-store' });
    const body = (await response.json()) as Partial<PageConfig>;
    return {
      refreshMs: typeof body.refreshMs === 'number' && body.refreshMs >= 200 ? body.refreshMs : fallback.refreshMs,
      connection: strings(body.connection),
      remote: body.remote === true,
      phases: strings(body.phases),
      statuses: strings(body.statuses),
      routes: Object.fromEntries(PAGE_ROUTES.map((name) => [name, typeof body.routes?.[name] === 'string' ? body.routes[name] : ''])) as Record<PageRoute, string>,
    };
  } catch {
    return fallback;
  }
}
