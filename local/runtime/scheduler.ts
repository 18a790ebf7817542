import { randomUUID } from 'node:crypto';
import type { Context, ScheduledEvent } from 'aws-lambda';
import { describeError, lambdaContext, withinTimeout, type InvocationListener } from './context.js';

export type ScheduledHandler = (event: ScheduledEvent, context: Context) => Promise<unknown>;

export interface ScheduledFunction {
  readonly functionName: string;
  readonly handler: ScheduledHandler;
  readonly timeoutMs?: number;
}

/**
 * Invokes scheduled handlers every `tickSeconds`, as an EventBridge schedule would: with a real
 * `Scheduled Event`, and without waiting for the previous invocation to end (in AWS a slow run and the
 * next tick overlap too, so handlers must tolerate it).
 */
export class Scheduler {
  private timer: NodeJS.Timeout | undefined;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly functions: readonly ScheduledFunction[],
    private readonly options: {
      readonly tickSeconds: number;
      readonly region: string;
      readonly onInvocation?: InvocationListener;
    },
  ) {
    if (!(options.tickSeconds > 0)) throw new RangeError(`tick must be > 0 seconds, got ${options.tickSeconds}`);
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.tick(), this.options.tickSeconds * 1_000);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await Promise.allSettled([...this.inFlight]);
  }

  #ticks = 0;
  /** Ticks started so far (a test counts them: what happened without one). */
  get ticks(): number {
    return this.#ticks;
  }

  /** One tick now: invokes every scheduled function once and waits for them. */
  async tick(now = new Date()): Promise<void> {
    this.#ticks += 1;
    const runs = this.functions.map((fn) => this.invoke(fn, now));
    await Promise.all(runs);
  }

  private invoke(fn: ScheduledFunction, now: Date): Promise<void> {
    const { region } = this.options;
    const context = lambdaContext(fn.functionName, fn.timeoutMs ?? 60_000, region);
    const event: ScheduledEvent = {
      version: '0',
      id: randomUUID(),
      'detail-type': 'Scheduled Event',
      source: 'aws.events',
      account: '000000000000',
      time: now.toISOString().replace(/\.\d{3}Z$/, 'Z'),
      region,
      resources: [`arn:aws:events:${region}:000000000000:rule/${fn.functionName}-schedule`],
      detail: {},
    };
    const started = Date.now();
    const run = withinTimeout(fn.handler(event, context), fn.timeoutMs ?? 60_000)
      .then(
        () => undefined,
        (thrown: unknown) => describeError(thrown),
      )
      .then((error) => {
        this.options.onInvocation?.({
          at: new Date(started).toISOString(),
          function: fn.functionName,
          requestId: context.awsRequestId,
          trigger: 'schedule',
          durationMs: Date.now() - started,
          outcome: error ? 'error' : 'ok',
          ...(error ? { error } : {}),
        });
      });
    this.inFlight.add(run);
    void run.finally(() => this.inFlight.delete(run));
    return run;
  }
}
