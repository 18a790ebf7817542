import type { APIGatewayProxyEventV2WithIAMAuthorizer, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { ApiError, errorResponse } from '../../shared/api/http.js';
import { route } from '../../shared/api/routes.js';
import { clip } from '../../shared/text.js';
import type { LedgerConfig } from '../../shared/adapters/config.js';
import { apiDeps, logger } from './deps.js';

export { CONFIG } from './deps.js';

/**
 * The ledger API behind a Lambda function URL (payload 2.0, AWS_IAM auth; API Gateway's HTTP API sends
 * the same shape). Maps the event to a request,
 * routes it, and maps every failure to the contract's error body — never a stack trace.
 */
export function createHandler(config: LedgerConfig): (event: APIGatewayProxyEventV2WithIAMAuthorizer) => Promise<APIGatewayProxyStructuredResultV2> {
  const built = apiDeps(config);
  return async (event) => {
    const { method } = event.requestContext.http;
    try {
      // Targets call back on the URL this request came in on, unless one is configured.
      const deps = built.callbackUrl ? built : { ...built, callbackUrl: `https://${event.requestContext.domainName}` };
      return await route(deps, {
        method,
        rawPath: event.rawPath,
        query: event.queryStringParameters ?? {},
        headers: event.headers ?? {},
        body: event.body === undefined ? undefined : Buffer.from(event.body, event.isBase64Encoded ? 'base64' : 'utf8'),
        iamUserId: event.requestContext.authorizer?.iam?.userId,
      });
    } catch (error) {
      if (error instanceof ApiError) return errorResponse(error);
      logger.error('request failed', { method, path: clip(event.rawPath, 512), error: error instanceof Error ? error.message : String(error) });
      return errorResponse(new ApiError('internal', 'internal error'));
    }
  };
}
