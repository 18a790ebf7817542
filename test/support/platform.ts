import { testEngines } from './engines.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SendMessageCommand } from '@aws-sdk/client-sqs';

import { localClients, type LocalClients } from '../../local/clients.js';
import { startPlatform, type PlatformOptions, type RunningPlatform } from '../../local/platform.js';
import { uniqueName } from './engines.js';
import { eventually } from './eventually.js';
import type { DispatchView } from '../../shared/dispatch/view.js';

/** The local platform on the shared test engines, with its own resources and second-scale clocks. */
export interface TestPlatform {
  readonly platform: RunningPlatform;
  readonly clients: LocalClients;
  /** Sends a raw body to the dispatch queue; returns the SQS message id. */
  send(body: string): Promise<string>;
  /** GET on the ledger API as an origin (X-Ledger-Origin). */
  get(path: string, origin?: string): Promise<{ status: number; body: unknown }>;
  /** The dispatch view as its origin sees it (default "planner"); throws unless 200. */
  view(dispatchId: string, options?: { origin?: string; query?: string }): Promise<DispatchView>;
  /** The view once `done` holds (the queue, the monitor and the target act asynchronously). */
  viewWhen(dispatchId: string, done: (view: DispatchView) => boolean, options?: { origin?: string; timeoutMs?: number }): Promise<DispatchView>;
  stop(): Promise<void>;
}

export { eventually } from './eventually.js';

export async function startTestPlatform(environment: Record<string, string> = {}, extra: Partial<Pick<PlatformOptions, 'lambdaTargets' | 'sigv4' | 'stateDir'>> = {}): Promise<TestPlatform> {
  // A state directory of its own unless the test brings one: removed again by stop().
  const stateDir = extra.stateDir ?? mkdtempSync(join(tmpdir(), 'ledger-platform-'));
  const ownsStateDir = extra.stateDir === undefined;
  const platform = await startPlatform({
    ...extra,
    stateDir,
    tickSeconds: 1,
    log: () => undefined,
    engines: testEngines(),
    prefix: uniqueName('t'),
    dispatchVisibilityTimeoutSeconds: 2,
    environment: {
      SUBMIT_RETRY_DELAYS_SECONDS: '1,1,1',
      CLAIM_SECONDS: '2',
      TARGET_TIMEOUT_MS: '2000',
      POWERTOOLS_LOG_LEVEL: 'ERROR',
      POWERTOOLS_METRICS_DISABLED: 'true',
      ...environment,
    },
  });
  const clients = localClients(testEngines());
  const get: TestPlatform['get'] = async (path, origin) => {
    const response = await fetch(`${platform.info.apiUrl}${path}`, { headers: origin ? { 'x-ledger-origin': origin } : {} });
    return { status: response.status, body: (await response.json()) as unknown };
  };
  const view: TestPlatform['view'] = async (dispatchId, options = {}) => {
    const { status, body } = await get(`/dispatches/${dispatchId}${options.query ?? ''}`, options.origin ?? 'planner');
    if (status !== 200) throw new Error(`GET /dispatches/${dispatchId} → ${status}`);
    return body as DispatchView;
  };
  return {
    platform,
    clients,
    async send(body) {
      const sent = await clients.sqs.send(new SendMessageCommand({ QueueUrl: platform.info.dispatchQueueUrl, MessageBody: body }));
      return sent.MessageId ?? '';
    },
    get,
    view,
    viewWhen(dispatchId, done, options = {}) {
      // A view that is not there yet (404) or not done yet is "not yet"; the timeout names the last one.
      return eventually(`dispatch ${dispatchId}`, () => view(dispatchId, options.origin ? { origin: options.origin } : {}), {
        timeoutMs: options.timeoutMs,
        until: done,
      });
    },
    async stop() {
      clients.destroy();
      await platform.stop();
      if (ownsStateDir) rmSync(stateDir, { recursive: true, force: true });
    },
  };
}
