import { homedir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cacheDir, stateDir, projectRoot } from '../../local/paths.js';
import { infoLine, type LocalInfo } from '../../local/state.js';

describe('local paths', () => {
  it('caches DynamoDB Local per user, outside the clone, unless DISPATCH_LEDGER_CACHE says otherwise', () => {
    expect(cacheDir({})).toBe(join(homedir(), '.cache', 'dispatch-ledger'));
    expect(cacheDir({ XDG_CACHE_HOME: '/x/cache' })).toBe('/x/cache/dispatch-ledger');
    expect(cacheDir({ DISPATCH_LEDGER_CACHE: '/y', XDG_CACHE_HOME: '/x/cache' })).toBe('/y');
    expect(cacheDir({}).startsWith(projectRoot)).toBe(false);
  });

  it('keeps the platform state in the git-ignored .ledger folder unless LEDGER_STATE_DIR says otherwise', () => {
    // <cwd>/.ledger/local, wherever the CLI's own code is (CONTRACT §16: never inside node_modules).
    expect(stateDir({}, '/work/app')).toBe(join('/work/app', '.ledger', 'local'));
    expect(stateDir({})).toBe(join(process.cwd(), '.ledger', 'local'));
    expect(stateDir({ LEDGER_STATE_DIR: '/tmp/s' })).toBe('/tmp/s');
  });
});

describe('infoLine', () => {
  it("prints exactly the contract's keys, in the contract's order, on one line", () => {
    const info: LocalInfo & { extra: string } = {
      demoAgentUrl: 'http://127.0.0.1:6',
      eventLog: '/e.jsonl',
      eventBusName: 'dispatch-ledger',
      eventBridgeEndpoint: 'http://127.0.0.1:5',
      s3Endpoint: 'http://127.0.0.1:4',
      dynamodbEndpoint: 'http://127.0.0.1:3',
      sqsEndpoint: 'http://127.0.0.1:4',
      dlqUrl: 'q2',
      dispatchQueueUrl: 'q1',
      apiUrl: 'http://127.0.0.1:1',
      region: 'us-east-1',
      extra: 'not in the contract',
    };
    const line = infoLine(info);
    expect(line).not.toContain('\n');
    expect(Object.keys(JSON.parse(line) as object)).toEqual([
      'region', 'apiUrl', 'dispatchQueueUrl', 'dlqUrl', 'sqsEndpoint', 'dynamodbEndpoint',
      's3Endpoint', 'eventBridgeEndpoint', 'eventBusName', 'eventLog', 'demoAgentUrl',
    ]);
  });
});
