import type { Clock } from '@dispatch-ledger/worker';

/** A clock moved by hand: timers fire only when `advance` passes their time. */
export function manualClock(): Clock & { advance(ms: number): void; jump(ms: number): void; pending(): number } {
  let now = 1_000_000;
  const timers: Array<{ at: number; fire: () => void; live: boolean }> = [];
  return {
    now: () => now,
    setTimer(ms, fire) {
      const timer = { at: now + ms, fire, live: true };
      timers.push(timer);
      return { cancel: () => void (timer.live = false) };
    },
    advance(ms) {
      const until = now + ms;
      for (;;) {
        const next = timers.filter((timer) => timer.live && timer.at <= until).sort((a, b) => a.at - b.at)[0];
        if (!next) break;
        now = next.at;
        next.live = false;
        next.fire();
      }
      now = until;
    },
    /** Time passes with no timer firing: the event loop held by synchronous work. */
    jump(ms) {
      now += ms;
    },
    pending: () => timers.filter((timer) => timer.live).length,
  };
}
