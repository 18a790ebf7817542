import { escapeControls } from '../../shared/text.js';

/**
 * The page's one way to put data on screen. Every string becomes a text node (never markup: a
 * target's run id or summary cannot add an element or a script), with its control and bidi
 * characters escaped as the CLI shows them (CONTRACT §8 v2, shared/text.ts `escapeControls`): a
 * U+202E in a run id reads `\u202e`, it does not reverse the line.
 */
export type Child = Node | string | number | null | undefined | false;

export interface Props {
  readonly className?: string;
  readonly id?: string;
  readonly href?: string;
  readonly title?: string;
  /** Set as attributes (aria-*, data-*, role, type, for, name, value…): values are data, not markup. */
  readonly attrs?: Readonly<Record<string, string>>;
  readonly onClick?: (event: Event) => void;
}

export const text = (value: string | number): Text => document.createTextNode(escapeControls(String(value)));

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, props: Props = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (props.className) node.className = props.className;
  if (props.id) node.id = props.id;
  if (props.title) node.title = escapeControls(props.title);
  if (props.href !== undefined) node.setAttribute('href', props.href);
  for (const [name, value] of Object.entries(props.attrs ?? {})) node.setAttribute(name, value);
  if (props.onClick) node.addEventListener('click', props.onClick);
  append(node, children);
  return node;
}

export function append(parent: Node, children: readonly Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === 'string' || typeof child === 'number' ? text(child) : child);
  }
}

/** A `<section>` named by its heading, so it is a landmark a screen reader can jump to. */
export function section(id: string, heading: string, level: 'h2' | 'h3', ...children: Child[]): HTMLElement {
  return el('section', { id, attrs: { 'aria-labelledby': `${id}-heading` } }, el(level, { id: `${id}-heading` }, heading), ...children);
}

/** A term/description list from pairs; a null description is shown as a dash. */
export function facts(pairs: ReadonlyArray<readonly [string, Child]>): HTMLDListElement {
  const list = el('dl', { className: 'facts' });
  for (const [term, description] of pairs) list.append(el('dt', {}, term), el('dd', {}, description ?? '—'));
  return list;
}

/** A state word styled by what it means (`badge state-orphan_no_delivery`). */
export const badge = (state: string | null | undefined): HTMLElement =>
  el('span', { className: `badge state-${(state ?? 'none').replace(/[^a-z_]/g, '')}` }, state ?? '—');

/** A time as people read it, with the exact instant in a `<time>` element. */
export function when(iso: string | null | undefined): Child {
  if (!iso) return '—';
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return iso;
  return el('time', { attrs: { datetime: at.toISOString() }, title: iso }, at.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' }));
}

/**
 * Replaces a container's content on a refresh without losing the keyboard user's place: an element
 * marked `data-focus-key` that had focus is focused again in the new content.
 */
export function replaceKeepingFocus(container: Element, nodes: readonly Child[]): void {
  const focused = document.activeElement;
  const key = focused instanceof HTMLElement && container.contains(focused) ? focused.dataset.focusKey : undefined;
  container.replaceChildren();
  append(container, nodes);
  if (key === undefined) return;
  const again = [...container.querySelectorAll<HTMLElement>('[data-focus-key]')].find((candidate) => candidate.dataset.focusKey === key);
  again?.focus();
}

export const dispatchHref = (dispatchId: string): string => `#/dispatches/${encodeURIComponent(dispatchId)}`;

/** A link to a dispatch's page that keeps focus across refreshes. */
export const dispatchLink = (dispatchId: string): HTMLAnchorElement =>
  el('a', { href: dispatchHref(dispatchId), attrs: { 'data-focus-key': `dispatch:${dispatchId}` } }, el('code', {}, dispatchId));

/** A table cell that names its column (`data-label`), so a narrow screen can show rows as cards. */
export const cell = (label: string, ...content: Child[]): HTMLTableCellElement =>
  el('td', { attrs: { 'data-label': label } }, el('span', {}, ...content));
