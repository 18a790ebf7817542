/**
 * The monitor function's timeout, in AWS and on the local platform: a tick's budget is cut from what is
 * left of it. A module of its own so the construct sets it without carrying the monitor's code.
 */
export const MONITOR_TIMEOUT_SECONDS = 120;
