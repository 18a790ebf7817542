import type { Profiler } from 'node:inspector/promises';
import { describe, expect, it } from 'vitest';
import { selfTimes } from '../../bench/profile-intake.js';

const frame = (id: number, functionName: string, url: string): Profiler.ProfileNode => ({ id, callFrame: { functionName, url, scriptId: String(id), lineNumber: 0, columnNumber: 0 } });

describe('bench profile-intake: self time by area', () => {
  it('sums each sample into its frame\'s area, leaves idle out, and names our functions by file', () => {
    const profile: Profiler.Profile = {
      nodes: [
        frame(1, '(root)', ''),
        frame(2, '(idle)', ''),
        frame(3, 'stateItem', 'file:///work/main/shared/adapters/state-item.ts'),
        frame(4, 'send', 'file:///work/main/node_modules/@smithy/core/dist-cjs/index.js'),
        frame(5, 'writev', ''),
        frame(6, 'parse', 'file:///work/main/node_modules/zod/v4/core/parse.js'),
        frame(7, 'emit', 'node:events'),
        frame(8, '(garbage collector)', ''),
      ],
      startTime: 0,
      endTime: 100,
      samples: [2, 3, 3, 4, 5, 6, 7, 8, 2],
      timeDeltas: [50, 10, 20, 5, 7, 3, 2, 1, 40],
    };
    const { total, areas, ours } = selfTimes(profile);
    expect(total).toBe(48);
    expect(Object.fromEntries(areas)).toEqual({
      'our code (shared/, functions/)': 30,
      'AWS SDK (@aws-sdk, @smithy)': 5,
      'socket writes (writev)': 7,
      zod: 3,
      "node's HTTP, streams and events": 2,
      'garbage collector': 1,
    });
    expect(Object.fromEntries(ours)).toEqual({ 'stateItem shared/adapters/state-item.ts': 30 });
  });
});
