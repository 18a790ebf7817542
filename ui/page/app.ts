import { loadConfig, takeSession, type PageConfig } from './api.js';
import { mountDispatch } from './dispatch.js';
import { el } from './dom.js';
import { mountOverview } from './overview.js';

/**
 * The status page: one document, two views chosen by the hash (`#/` the overview, `#/dispatches/{id}`
 * a dispatch), each polled every few seconds and updated in place — the document is never reloaded,
 * so a dispatch that completes while someone watches changes state where it stands.
 */
const DISPATCH_ROUTE = /^#\/dispatches\/([^/]+)$/;
/** The longest wait between two reads while none succeeds (a ledger that is down is asked less and less often). */
const MAX_BACKOFF_MS = 60_000;

function dispatchIdOf(hash: string): string | undefined {
  const match = DISPATCH_ROUTE.exec(hash);
  if (!match?.[1]) return undefined;
  try {
    return decodeURIComponent(match[1]);
  } catch {
    return undefined;
  }
}

async function start(): Promise<void> {
  const main = document.getElementById('main');
  const updated = document.getElementById('updated');
  if (!main || !updated) return;
  takeSession();
  const config: PageConfig = await loadConfig();
  let refresh: () => Promise<boolean> = async () => true;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let round = 0;
  /** Ticks in a row that could read nothing: each doubles the wait before the next, up to MAX_BACKOFF. */
  let failing = 0;
  /** The round of the tick whose reads are under way, if it is the latest (it schedules the next itself); 0: none. */
  let reading = 0;

  // One refresh at a time; the next is scheduled when it ends, so a slow ledger is never piled on. A tab
  // nobody sees reads nothing (each tick is several signed calls to the ledger); it reads again when shown.
  const tick = async (): Promise<void> => {
    clearTimeout(timer);
    const mine = ++round;
    // A hidden tab stops the loop here: no next tick is scheduled until it is shown.
    if (document.hidden) return;
    let read = false;
    reading = mine;
    try {
      read = await refresh();
      const now = el('time', { attrs: { datetime: new Date().toISOString() } }, new Date().toLocaleTimeString());
      // "updated" only when something was read (regression: said after every tick, every read failed or not).
      if (read) updated.replaceChildren('updated ', now);
      else updated.replaceChildren('nothing could be read at ', now, '; showing what was read before');
    } catch (error) {
      updated.textContent = `the page could not refresh: ${error instanceof Error ? error.message : String(error)}`;
    } finally {
      if (reading === mine) reading = 0;
    }
    failing = read ? 0 : failing + 1;
    if (mine === round) timer = setTimeout(() => void tick(), Math.min(config.refreshMs * 2 ** failing, MAX_BACKOFF_MS));
  };
  // Shown again: read at once, whether a hidden tick stopped the loop or a tick waits out a backoff
  // (regression: shown during a backoff, the tab said "nothing could be read" for up to a minute more) —
  // unless the latest tick is reading: it schedules its own next, and a second beside it would break one
  // refresh at a time. An older tick still reading schedules nothing (it is not the latest), so it is no reason to wait.
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden && reading !== round) void tick();
  });

  const mount = (): void => {
    const dispatchId = dispatchIdOf(location.hash);
    refresh = dispatchId === undefined ? mountOverview(main, config) : mountDispatch(main, dispatchId, config);
    document.title = dispatchId === undefined ? 'Dispatch Ledger — status' : `${dispatchId} — Dispatch Ledger`;
    // A new view takes the focus to its top, as a page load would, for keyboard and screen-reader users.
    main.focus({ preventScroll: true });
    window.scrollTo(0, 0);
    void tick();
  };
  window.addEventListener('hashchange', mount);
  // The skip link moves focus, not the route (its #main is no view of ours).
  document.querySelector('a.skip')?.addEventListener('click', (event) => {
    event.preventDefault();
    main.focus();
  });
  mount();
}

void start();
