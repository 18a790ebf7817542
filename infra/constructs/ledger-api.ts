import { FunctionUrl, FunctionUrlAuthType, InvokeMode } from 'aws-cdk-lib/aws-lambda';
import { ArnPrincipal, type IGrantable } from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import type { LedgerFunction } from './ledger-function.js';

export interface LedgerApiProps {
  readonly api: LedgerFunction;
}

/**
 * The ledger HTTP API (CONTRACT §2) as a Lambda function URL with `AWS_IAM` auth: every route is
 * behind SigV4, and the handler maps the caller's IAM identity to an origin, target or operator via
 * the principal registry.
 *
 * Why a function URL, not API Gateway: a lifecycle makes ~5 API calls (2 heartbeats, completion,
 * an evidence upload, a receipt); an HTTP API bills $1 per million requests, i.e. ~$5 per million
 * lifecycles — half the whole budget. A function URL adds no charge on top of the invocation, and
 * its 6 MB request limit holds the largest body we accept (4 MB evidence).
 */
export class LedgerApi extends Construct {
  readonly url: FunctionUrl;

  constructor(scope: Construct, id: string, props: LedgerApiProps) {
    super(scope, id);
    this.url = new FunctionUrl(this, 'Url', {
      function: props.api.function,
      authType: FunctionUrlAuthType.AWS_IAM,
      invokeMode: InvokeMode.BUFFERED,
    });
  }

  /** Lets an origin, a target or an operator call the API (what it may do there is the registry's say). */
  grantInvoke(grantee: IGrantable): void {
    this.url.grantInvokeUrl(grantee);
  }

  /**
   * The same, as a permission on the API function itself (resource-based) for a role the API's own
   * grants depend on — a lambda target's worker, which the API invokes: an identity grant would make
   * the two policies wait on each other.
   */
  allowRole(id: string, roleArn: string, api: LedgerFunction): void {
    api.function.addPermission(id, { principal: new ArnPrincipal(roleArn), action: 'lambda:InvokeFunctionUrl', functionUrlAuthType: FunctionUrlAuthType.AWS_IAM });
    // Function URLs also require InvokeFunction through the URL (as grantInvokeUrl grants it).
    api.function.addPermission(`${id}ViaUrl`, { principal: new ArnPrincipal(roleArn), action: 'lambda:InvokeFunction', invokedViaFunctionUrl: true });
  }
}
