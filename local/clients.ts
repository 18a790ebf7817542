import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { S3Client } from '@aws-sdk/client-s3';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SFNClient } from '@aws-sdk/client-sfn';
import { SQSClient } from '@aws-sdk/client-sqs';
import { LOCAL_CREDENTIALS, LOCAL_REGION } from './engines/index.js';

/** Where each local service answers. All on 127.0.0.1. */
export interface LocalEndpoints {
  readonly dynamodbEndpoint: string;
  readonly sqsEndpoint: string;
  readonly s3Endpoint: string;
  readonly motoEndpoint: string;
}

export interface LocalClients {
  readonly dynamodb: DynamoDBClient;
  readonly streams: DynamoDBStreamsClient;
  /** fauxqs: the dispatch queue and its DLQ. */
  readonly sqs: SQSClient;
  readonly s3: S3Client;
  readonly eventBridge: EventBridgeClient;
  readonly secrets: SecretsManagerClient;
  /** moto's SQS: only the queue the local bus's catch-all rule delivers to. */
  readonly motoSqs: SQSClient;
  /** moto's Step Functions: the state machines of `stepfunctions` targets (CONTRACT §17). */
  readonly sfn: SFNClient;
  destroy(): void;
}

export function localClients(endpoints: LocalEndpoints): LocalClients {
  const base = { region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS, maxAttempts: 3 } as const;
  const clients = {
    dynamodb: new DynamoDBClient({ ...base, endpoint: endpoints.dynamodbEndpoint }),
    streams: new DynamoDBStreamsClient({ ...base, endpoint: endpoints.dynamodbEndpoint }),
    sqs: new SQSClient({ ...base, endpoint: endpoints.sqsEndpoint }),
    s3: new S3Client({ ...base, endpoint: endpoints.s3Endpoint, forcePathStyle: true }),
    eventBridge: new EventBridgeClient({ ...base, endpoint: endpoints.motoEndpoint }),
    secrets: new SecretsManagerClient({ ...base, endpoint: endpoints.motoEndpoint }),
    motoSqs: new SQSClient({ ...base, endpoint: endpoints.motoEndpoint }),
    sfn: new SFNClient({ ...base, endpoint: endpoints.motoEndpoint }),
  };
  return {
    ...clients,
    destroy: () => {
      for (const client of Object.values(clients)) client.destroy();
    },
  };
}

/**
 * The environment a handler sees locally: the same variables as in AWS, plus the SDK's
 * service-specific endpoint variables, so handler code is identical in both places.
 */
export function localHandlerEnvironment(endpoints: LocalEndpoints): Record<string, string> {
  return {
    AWS_REGION: LOCAL_REGION,
    AWS_DEFAULT_REGION: LOCAL_REGION,
    AWS_ACCESS_KEY_ID: LOCAL_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: LOCAL_CREDENTIALS.secretAccessKey,
    AWS_ENDPOINT_URL_DYNAMODB: endpoints.dynamodbEndpoint,
    AWS_ENDPOINT_URL_DYNAMODB_STREAMS: endpoints.dynamodbEndpoint,
    AWS_ENDPOINT_URL_SQS: endpoints.sqsEndpoint,
    AWS_ENDPOINT_URL_S3: endpoints.s3Endpoint,
    AWS_ENDPOINT_URL_EVENTBRIDGE: endpoints.motoEndpoint,
    AWS_ENDPOINT_URL_SECRETS_MANAGER: endpoints.motoEndpoint,
    AWS_ENDPOINT_URL_SFN: endpoints.motoEndpoint,
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
  };
}
