import type { DetailType } from './catalog.js';

/**
 * What a deployment puts on the bus (CONTRACT §3 v2): every detail-type (`all`, the default), only
 * those that need someone's attention (`attention`), or a list of its own. Every committed change is
 * still derived, counted in metrics and visible through the API: the profile only decides which events
 * are published, and EventBridge bills each one.
 *
 * No zod and no catalog here: the publisher's bundle carries this module.
 */
export type EventsProfile = 'all' | 'attention' | readonly DetailType[];

/**
 * Every detail-type, and whether the `attention` profile publishes it. Exhaustive by type: a new
 * detail-type does not compile until it says which side it is on.
 */
const ATTENTION: { readonly [T in DetailType]: boolean } = {
  'Dispatch Accepted': false,
  'Dispatch Submitted': false,
  'Dispatch Blocked': true,
  'Message Rejected': true,
  'Run Completed': false,
  'Run Failed': true,
  'Run Cancelled': true,
  'Run Recovered': true,
  'Approval Requested': false,
  'Run Superseded': true,
  'Run Stalled': true,
  'Run Unobservable': true,
  'Dispatch Handled': true,
  'Dispatch Orphaned': true,
  'Approval Wait Expired': true,
  'Result Ready': false,
  'Result Delivered': false,
  'Result Dropped': true,
  'Dispatch Cancelled': true,
  'Receipt Recorded': false,
};

/** Every detail-type name (without the zod catalog). */
export const DETAIL_TYPE_NAMES = Object.keys(ATTENTION) as readonly DetailType[];
/** What the `attention` profile publishes: Blocked, Rejected, Failed, Stalled, Unobservable, Approval Wait Expired, Orphaned, Handled, Recovered, Superseded, Cancelled (the run's and the dispatch's), Result Dropped. */
export const ATTENTION_DETAIL_TYPES: readonly DetailType[] = DETAIL_TYPE_NAMES.filter((type) => ATTENTION[type]);

const isDetailType = (name: string): name is DetailType => Object.hasOwn(ATTENTION, name);

/** The detail-types a profile publishes. */
export function publishedDetailTypes(profile: EventsProfile): ReadonlySet<DetailType> {
  if (profile === 'all') return new Set(DETAIL_TYPE_NAMES);
  if (profile === 'attention') return new Set(ATTENTION_DETAIL_TYPES);
  return new Set(profile);
}

/** A profile named by a person (a construct prop, a CLI flag) that is not one: says what is wrong, lists what is allowed. */
export class EventsProfileError extends Error {
  override readonly name = 'EventsProfileError';
}

/**
 * Checks a profile given in code or configuration: `all`, `attention`, or a list of known
 * detail-types without repeats. Throws EventsProfileError naming the first problem.
 */
export function checkedProfile(profile: unknown): EventsProfile {
  if (profile === 'all' || profile === 'attention') return profile;
  if (!Array.isArray(profile)) throw new EventsProfileError(`events must be "all", "attention" or a list of detail-types, not ${JSON.stringify(profile)?.slice(0, 80) ?? String(profile)}`);
  const seen = new Set<string>();
  for (const name of profile as unknown[]) {
    if (typeof name !== 'string' || !isDetailType(name)) throw new EventsProfileError(`events: ${JSON.stringify(name)?.slice(0, 80)} is not a detail-type; known: ${DETAIL_TYPE_NAMES.join(', ')}`);
    if (seen.has(name)) throw new EventsProfileError(`events: "${name}" is listed twice`);
    seen.add(name);
  }
  return [...seen] as DetailType[];
}

/** An empty list: nothing on the bus (the API and the metrics only); `none` in the environment, never read as unset. */
const NONE = 'none';

/** The profile as an environment variable carries it (`all`, `attention`, `none`, or detail-types joined by commas). */
export function profileToEnv(profile: EventsProfile): string {
  const checked = checkedProfile(profile);
  if (typeof checked === 'string') return checked;
  return checked.length === 0 ? NONE : checked.join(',');
}

/** The profile from its environment variable; unset or empty → `all`. Throws EventsProfileError on an unknown name. */
export function profileFromEnv(value: string | undefined): EventsProfile {
  const text = value?.trim() ?? '';
  if (text === '' || text === 'all' || text === 'attention') return text === '' ? 'all' : text;
  if (text === NONE) return [];
  return checkedProfile(text.split(',').map((name) => name.trim()));
}
