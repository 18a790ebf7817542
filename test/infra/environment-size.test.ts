import { App, Duration, Stack } from 'aws-cdk-lib';
import { Annotations, Match } from 'aws-cdk-lib/assertions';
import { AccountPrincipal, Role } from 'aws-cdk-lib/aws-iam';
import { Code, Function as LambdaFunction, Runtime } from 'aws-cdk-lib/aws-lambda';
import { describe, expect, it } from 'vitest';
import { DispatchLedger } from '@dispatch-ledger/cdk';

/**
 * Lambda refuses a function whose environment totals more than 4 KB, and the ledger functions carry the
 * deploy-time registry (every target, origin and principal) in theirs. Regression: nothing said so until
 * the deploy failed at Lambda, minutes in (about 11 lambda targets, or 45 origins).
 */
function ledgerWith(lambdaTargets: number, origins: number): { app: App; stack: Stack } {
  const app = new App();
  const stack = new Stack(app, 'DispatchLedger', { env: { account: '111122223333', region: 'eu-west-1' } });
  const ledger = new DispatchLedger(stack, 'Ledger');
  for (let n = 0; n < lambdaTargets; n += 1) {
    ledger.addLambdaTarget(`worker-${n}`, new LambdaFunction(stack, `Worker${n}`, { code: Code.fromInline('exports.handler = async () => undefined;'), handler: 'index.handler', runtime: Runtime.NODEJS_22_X, timeout: Duration.minutes(1) }));
  }
  for (let n = 0; n < origins; n += 1) ledger.addOrigin(new Role(stack, `Origin${n}`, { assumedBy: new AccountPrincipal('111122223333') }), `origin-team-${n}`);
  return { app, stack };
}

const WARNING = Match.stringLikeRegexp("function\\(s\\) will likely be about \\d+ bytes, over Lambda's 4096");

describe("the functions' environment against Lambda's 4 KB", () => {
  it('fails the synth when the registry cannot fit, saying how to register the rest at run time', () => {
    const { app } = ledgerWith(0, 60);
    expect(() => app.synth()).toThrow(/the environment of the intake, api, monitor, failures, orchestrators function\(s\) is at least \d+ bytes, over Lambda's 4096: the deploy-time registry \(60 principals, 0 targets, 0 origins' settings\) is what grows: register more origins and principals at run time instead/);
  });

  it('warns when it will likely not fit (the names and ARNs it holds are known only at deploy)', () => {
    const { stack } = ledgerWith(12, 0);
    Annotations.fromStack(stack).hasWarning('*', WARNING);
  });

  it('says nothing for a ledger well within it', () => {
    const { stack } = ledgerWith(3, 10);
    Annotations.fromStack(stack).hasNoWarning('*', WARNING);
  });
});
