import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { logger } from './deps.js';

/** The contract's error body: `{ error: { code, message, details? } }`, never a stack trace. */
function errorResponse(statusCode: number, code: string, message: string): APIGatewayProxyStructuredResultV2 {
  return {
    statusCode,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ error: { code, message } }),
  };
}

/**
 * The ledger API behind API Gateway (payload format 2.0). Routes arrive with the issues that own them;
 * anything not routed is a 404 in the contract's error shape.
 */
export const handler = async (event: APIGatewayProxyEventV2): Promise<APIGatewayProxyStructuredResultV2> => {
  const { method, path } = event.requestContext.http;
  logger.info('request', { method, path });
  return errorResponse(404, 'not_found', `no route for ${method} ${path}`);
};
