/**
 * The integration tests' two bounds on liveness. They are never checks of speed: a wait returns as soon as
 * what it awaits shows, and only a failure ever reaches a bound. A wait's bound names what never came; the
 * test's is the backstop of a test whose steps all crawl (several waits of one test can add up past it).
 *
 * Generous, because CI runs three integration files side by side on two saturated cores: on 2026-12-06 a
 * whole file ran 3–7× slower than in the run before, and two 15–30 s waits expired on steps that came.
 */

/** One step of the platform's own (the intake taking a message, a monitor tick acting, an event published). */
export const STEP_MS = 60_000;

/** One integration test: several steps. Vitest's `testTimeout` for the integration project. */
export const TEST_MS = 240_000;
