import { Logger } from '@aws-lambda-powertools/logger';

/** Composition root of the API function: built once per execution environment. */
export const logger = new Logger({ serviceName: 'dispatch-ledger', persistentKeys: { function: 'api' } });
