import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { InvokeCommand } from '@aws-sdk/client-lambda';
import { DescribeExecutionCommand } from '@aws-sdk/client-sfn';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lambdaClientFor } from '../../shared/adapters/lambda-target.js';
import { sfnClientFor } from '../../shared/adapters/stepfunctions-target.js';

/**
 * Every SDK call to a target ends by about the target timeout, its three tries included. Regression: the
 * Lambda and Step Functions clients were given `requestTimeout`, which the SDK only logs a warning for
 * when it passes, so a call that connected and was never answered held the function until its own
 * timeout — past the submission claim (60 s) that must outlast any one call.
 */

describe('the clients the ledger calls its Lambda and Step Functions targets with', () => {
  let server: Server;
  let endpoint: string;
  let requests = 0;
  beforeAll(async () => {
    // Takes every request and never answers it.
    server = createServer(() => {
      requests += 1;
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const config = () => ({ endpoint, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' }, });

  it('fail a Lambda invoke nobody answers as a TimeoutError, after the SDK’s three tries, each ended by a third of the target timeout', async () => {
    const before = requests;
    const lambda = lambdaClientFor(300, config());
    await expect(lambda.send(new InvokeCommand({ FunctionName: 'reviewer', InvocationType: 'Event', Payload: Buffer.from('{}') }))).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(requests - before).toBe(3);
    lambda.destroy();
  });

  it('fail a Step Functions call nobody answers the same way', async () => {
    const before = requests;
    const sfn = sfnClientFor(300, config());
    await expect(sfn.send(new DescribeExecutionCommand({ executionArn: 'arn:aws:states:us-east-1:111122223333:execution:m:e' }))).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(requests - before).toBe(3);
    sfn.destroy();
  });
});
