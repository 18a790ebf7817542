import { describe, expect, inject, it } from 'vitest';
import { listenersOn } from '../support/listeners.js';

/**
 * The engines listen on 127.0.0.1 alone (README: "Every server listens on a free port of 127.0.0.1").
 * Regression: fauxqs's own start listens on every interface (0.0.0.0), so anyone on the network could
 * send dispatches into the local platform's queue, drain its DLQ or read its evidence. DynamoDB Local
 * has no bind option and listens on every interface; the README says so. (Read from Linux's socket tables.)
 */
describe('the shared engines', () => {
  const portOf = (endpoint: string): number => Number(new URL(endpoint).port);

  it('fauxqs (SQS, S3) and moto listen on 127.0.0.1 and nowhere else', () => {
    const engines = inject('engines');
    expect(listenersOn(portOf(engines.sqsEndpoint))).toEqual(['127.0.0.1']);
    expect(listenersOn(portOf(engines.motoEndpoint))).toEqual(['127.0.0.1']);
  });
});
