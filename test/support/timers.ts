/**
 * Timers this process holds now, by Node's own count of its active resources. A test compares two
 * counts — "stop() left no timer behind" — instead of timing how long something took.
 */
export function activeTimers(): number {
  return process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
}
