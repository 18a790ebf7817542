import { describe, expect, it } from 'vitest';
import { DETAIL_TYPES } from '../../shared/events/catalog.js';
import { ATTENTION_DETAIL_TYPES, checkedProfile, DETAIL_TYPE_NAMES, EventsProfileError, profileFromEnv, profileToEnv, publishedDetailTypes } from '../../shared/events/profile.js';

describe('events profiles (CONTRACT §3 v2)', () => {
  it('knows every detail-type of the catalog, and only those', () => {
    expect([...DETAIL_TYPE_NAMES].sort()).toEqual([...DETAIL_TYPES].sort());
  });

  it('attention is the contract\'s list: Blocked, Rejected, Failed, Stalled, Unobservable, Approval Wait Expired, Orphaned, Handled, Recovered, Superseded, Cancelled, Result Dropped', () => {
    expect([...ATTENTION_DETAIL_TYPES].sort()).toEqual(
      [
        'Dispatch Blocked',
        'Message Rejected',
        'Run Failed',
        'Run Stalled',
        'Run Unobservable',
        'Approval Wait Expired',
        'Dispatch Orphaned',
        'Dispatch Handled',
        'Run Recovered',
        'Run Superseded',
        'Run Cancelled',
        'Dispatch Cancelled',
        'Result Dropped',
      ].sort(),
    );
    expect(publishedDetailTypes('attention').has('Dispatch Submitted')).toBe(false);
    expect(publishedDetailTypes('all').size).toBe(DETAIL_TYPES.length);
    expect([...publishedDetailTypes(['Run Stalled'])]).toEqual(['Run Stalled']);
  });

  it('round-trips through the environment variable the stack sets, unset meaning all', () => {
    expect(profileFromEnv(undefined)).toBe('all');
    expect(profileFromEnv('')).toBe('all');
    expect(profileFromEnv(profileToEnv('attention'))).toBe('attention');
    expect(profileFromEnv(profileToEnv(['Dispatch Orphaned', 'Run Stalled']))).toEqual(['Dispatch Orphaned', 'Run Stalled']);
    expect(profileFromEnv(' Dispatch Orphaned , Run Stalled ')).toEqual(['Dispatch Orphaned', 'Run Stalled']);
    // An empty list publishes nothing: it must never read back as unset (= all). (Review fix.)
    expect(profileToEnv([])).toBe('none');
    expect(profileFromEnv('none')).toEqual([]);
    expect(publishedDetailTypes(profileFromEnv(profileToEnv([]))).size).toBe(0);
  });

  it('refuses an unknown or repeated detail-type, or anything else, with a clear error', () => {
    expect(() => checkedProfile(['Run Stalled', 'Run Stalld'])).toThrow(EventsProfileError);
    expect(() => checkedProfile(['Run Stalled', 'Run Stalld'])).toThrow(/"Run Stalld" is not a detail-type; known: Dispatch Accepted/);
    expect(() => checkedProfile(['Run Stalled', 'Run Stalled'])).toThrow(/listed twice/);
    expect(() => checkedProfile('some')).toThrow(/"all", "attention" or a list/);
    expect(() => profileFromEnv('Run Stalled,constructor')).toThrow(EventsProfileError);
  });
});
