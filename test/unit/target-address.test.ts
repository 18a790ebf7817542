import { createServer, type Server } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { registry as registryCommand } from '../../cli/operations.js';
import { readLedgerConfig } from '../../shared/adapters/config.js';
import { httpTarget, type HttpTargetOptions } from '../../shared/adapters/http-target.js';
import { parseStaticRegistry } from '../../shared/adapters/static-registry.js';
import { addressProblem, baseUrlProblem, type Resolver } from '../../shared/adapters/target-address.js';
import { buildLedgerAdapters } from '../../shared/adapters/wiring.js';
import { LedgerTable } from '../../shared/adapters/ledger-writes.js';
import type { SubmitRequest } from '../../shared/targets/port.js';
import { listen } from '../support/stub-target.js';

// CONTRACT §8 v2: in AWS a target's base URL is https, never loopback, link-local, unspecified or a
// metadata address — at registration, and again on the address every connection resolves to.
// Everything here listens on, or is refused before connecting to, 127.0.0.1; names are resolved by an
// injected resolver, never by DNS.


/** A 127.0.0.1 target that accepts every submission, counting what reached it. */
let stub: Server;
let port = 0;
const reached: string[] = [];
beforeAll(async () => {
  stub = createServer((req, res) => {
    reached.push(`${req.method ?? ''} ${req.url ?? ''}`);
    req.resume();
    req.on('end', () => {
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ runId: 'r-1', status: 'queued' }));
    });
  });
  port = await listen(stub);
});
afterAll(
  () =>
    new Promise<void>((resolve) => {
      stub.close(() => resolve());
      stub.closeAllConnections();
    }),
);
afterEach(() => {
  reached.length = 0;
});

const request: SubmitRequest = {
  dispatchId: 'd-address',
  attempt: 1,
  origin: 'planner',
  task: { behavior: 'complete' },
  expectedEvidence: [],
  callbackUrl: 'http://127.0.0.1:9',
};

/** A resolver that answers `addresses` for every name, and records what it was asked. */
function resolverOf(...addresses: string[]): Resolver & { readonly asked: string[] } {
  const asked: string[] = [];
  const resolve = async (hostname: string) => {
    asked.push(hostname);
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return Object.assign(resolve, { asked });
}

const register = (baseUrl: string, options: HttpTargetOptions = {}) => () => httpTarget({ name: 'agent', kind: 'http', baseUrl }, options);

/** Loopback in every spelling a URL parser or a resolver may produce. */
const LOOPBACK_URLS = [
  'https://127.0.0.1/',
  'https://127.8.9.10/',
  'https://localhost/',
  'https://LOCALHOST./',
  'https://agents.localhost/',
  'https://[::1]/',
  'https://[::ffff:127.0.0.1]/',
  'https://[::ffff:7f00:1]/',
  'https://[0:0:0:0:0:ffff:7f00:1]/',
  // Numeric forms: WHATWG URL normalizes each of these to 127.0.0.1, and the check sees that.
  'https://2130706433/',
  'https://0x7f000001/',
  'https://0177.0.0.1/',
  'https://127.1/',
  'https://0x7f.1/',
  'https://%31%32%37.0.0.1/',
];
/** Refused under every policy: link-local, unspecified and metadata addresses. */
const NEVER_URLS = [
  'https://169.254.169.254/',
  'https://169.254.1.1/',
  'https://[fe80::1]/',
  'https://[fd00:ec2::254]/',
  'https://[fd00:ec2:0:1::1]/',
  'https://[::ffff:169.254.169.254]/',
  'https://[::ffff:a9fe:a9fe]/',
  'https://0.0.0.0/',
  'https://0/',
  'https://[::]/',
  'https://[::ffff:0.0.0.0]/',
  'https://2852039166/',
  'https://100.100.100.200/',
];

describe('trust boundaries: target base URLs at registration', () => {
  it('in AWS (public-only) takes only https, and refuses loopback, link-local, unspecified and metadata addresses in every spelling', () => {
    expect(register('https://agents.example.com/v1', { addressPolicy: 'public-only' })).not.toThrow();
    expect(register('https://[2001:db8::1]/', { addressPolicy: 'public-only' })).not.toThrow();
    expect(register('http://agents.example.com/', { addressPolicy: 'public-only' })).toThrow(/https/);
    for (const url of [...LOOPBACK_URLS, ...NEVER_URLS]) expect(register(url, { addressPolicy: 'public-only' }), url).toThrow(TypeError);
    for (const url of LOOPBACK_URLS) expect(baseUrlProblem(url, 'public-only'), url).toMatch(/loopback/);
    expect(baseUrlProblem('https://169.254.169.254/', 'public-only')).toMatch(/metadata/);
    expect(baseUrlProblem('https://169.254.1.1/', 'public-only')).toMatch(/link-local/);
    expect(baseUrlProblem('https://[fd00:ec2::254]/', 'public-only')).toMatch(/metadata/);
    expect(baseUrlProblem('https://0.0.0.0/', 'public-only')).toMatch(/unspecified/);
  });

  it('locally (allow-loopback, the default) takes http and loopback, and still refuses link-local, unspecified and metadata addresses', () => {
    expect(register(`http://127.0.0.1:${port}/`)).not.toThrow();
    expect(register(`http://localhost:${port}/`, { addressPolicy: 'allow-loopback' })).not.toThrow();
    expect(register('http://[::1]:4100/')).not.toThrow();
    for (const url of NEVER_URLS) expect(register(url.replace('https:', 'http:')), url).toThrow(TypeError);
  });

  it('classifies resolved addresses, IPv4-mapped and IPv4-compatible forms included', () => {
    for (const address of ['127.0.0.1', '::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '::127.0.0.1']) {
      expect(addressProblem(address, 'public-only'), address).toMatch(/loopback/);
      expect(addressProblem(address, 'allow-loopback'), address).toBeUndefined();
    }
    for (const address of ['169.254.169.254', 'fe80::1', 'fd00:ec2::254', '::ffff:169.254.169.254', '::169.254.169.254', '0.0.0.0', '::', '100.100.100.200']) {
      expect(addressProblem(address, 'public-only'), address).toBeDefined();
      expect(addressProblem(address, 'allow-loopback'), address).toBeDefined();
    }
    for (const address of ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946', '10.0.0.1']) expect(addressProblem(address, 'public-only'), address).toBeUndefined();
    expect(addressProblem('not an address', 'allow-loopback')).toMatch(/not an IP address/);
  });

  it('refuses the same base URLs in the deploy-time registry (LEDGER_REGISTRY) of an AWS deployment', () => {
    const withTarget = (baseUrl: string) => JSON.stringify({ principals: [], targets: [{ name: 'agent', kind: 'http', baseUrl }] });
    expect(parseStaticRegistry(withTarget('https://agents.example.com')).targets.get('agent')).toMatchObject({ baseUrl: 'https://agents.example.com' });
    for (const url of ['http://agents.example.com', 'https://127.1/', 'https://[::ffff:7f00:1]/', 'https://169.254.169.254/']) {
      expect(() => parseStaticRegistry(withTarget(url)), url).toThrow(/LEDGER_REGISTRY: target agent/);
    }
    // The local platform (open) registers its demo agent on 127.0.0.1.
    expect(parseStaticRegistry(withTarget(`http://127.0.0.1:${port}`), 'allow-loopback').targets.size).toBe(1);
  });

  describe('ledger registry target put', () => {
    const saved = { ...process.env };
    afterEach(() => {
      process.env = { ...saved };
    });

    it('refuses a base URL an AWS deployment would refuse, before writing anything', async () => {
      // Were anything written, it would go to a closed port of 127.0.0.1, and fail differently.
      Object.assign(process.env, { AWS_REGION: 'us-east-1', AWS_ACCESS_KEY_ID: 'x', AWS_SECRET_ACCESS_KEY: 'x', AWS_ENDPOINT_URL_DYNAMODB: 'http://127.0.0.1:9' });
      for (const url of ['http://agents.example.com', 'https://127.0.0.1', 'https://2130706433/', 'https://[::ffff:127.0.0.1]/', 'https://169.254.169.254/latest', 'https://[fd00:ec2::254]/']) {
        await expect(registryCommand(['target', 'put', '--table', 't', '--name', 'agent', '--base-url', url], () => undefined), url).rejects.toThrow(/--base-url/);
      }
    });
  });
});

describe('trust boundaries: the address of every connection (DNS rebinding)', () => {
  it('refuses to connect when the name resolves to a refused address, and never reaches it', async () => {
    for (const answer of [['169.254.169.254'], ['::ffff:169.254.169.254'], ['fd00:ec2::254'], ['0.0.0.0'], ['127.0.0.1', '169.254.169.254']]) {
      const resolve = resolverOf(...answer);
      const target = httpTarget({ name: 'agent', kind: 'http', baseUrl: `http://localhost:${port}` }, { addressPolicy: 'allow-loopback', resolve });
      const outcome = await target.submit(request);
      expect(outcome, answer.join(',')).toEqual({ kind: 'unavailable', reason: expect.stringMatching(/^refused to connect: localhost resolves to .*(link-local|metadata|unspecified)/) });
      expect(resolve.asked).toEqual(['localhost']);
    }
    expect(reached).toEqual([]);
  });

  it('connects to the address it checked, and resolves again on every call', async () => {
    const resolve = resolverOf('127.0.0.1');
    const target = httpTarget({ name: 'agent', kind: 'http', baseUrl: `http://localhost:${port}` }, { addressPolicy: 'allow-loopback', resolve });
    expect(await target.submit(request)).toMatchObject({ kind: 'accepted', runId: 'r-1' });
    expect(await target.submit(request)).toMatchObject({ kind: 'accepted', runId: 'r-1' });
    expect(reached).toEqual(['POST /runs', 'POST /runs']);
    expect(resolve.asked.length).toBeGreaterThanOrEqual(1);
  });

  it('never reuses a connection another adapter opened and checked (each target pools its own)', async () => {
    const checked = httpTarget({ name: 'agent', kind: 'http', baseUrl: `http://localhost:${port}` }, { resolve: resolverOf('127.0.0.1') });
    expect(await checked.submit(request)).toMatchObject({ kind: 'accepted' });
    const rebound = httpTarget({ name: 'agent', kind: 'http', baseUrl: `http://localhost:${port}` }, { resolve: resolverOf('169.254.169.254') });
    expect(await rebound.submit(request)).toEqual({ kind: 'unavailable', reason: 'refused to connect: localhost resolves to 169.254.169.254 (metadata)' });
    expect(reached).toEqual(['POST /runs']);
  });

  it('in AWS refuses a public name that resolves to loopback or metadata (rebinding), before connecting', async () => {
    expect(register('https://127.0.0.1/', { addressPolicy: 'public-only' })).toThrow(TypeError);
    for (const answer of ['127.0.0.1', '::1', '::ffff:7f00:1', '169.254.169.254', 'fd00:ec2::254']) {
      const resolve = resolverOf(answer);
      const target = httpTarget({ name: 'agent', kind: 'http', baseUrl: 'https://agents.example.test' }, { addressPolicy: 'public-only', resolve });
      for (const outcome of [await target.submit(request), await target.lookup('r-1'), await target.cancel('r-1')]) {
        expect(outcome, answer).toEqual({ kind: 'unavailable', reason: expect.stringMatching(/^refused to connect: agents\.example\.test resolves to /) });
      }
      expect(resolve.asked[0]).toBe('agents.example.test');
    }
    expect(reached).toEqual([]);
  });
});

describe('trust boundaries: the policy each deployment gets', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
  });
  const base = { LEDGER_TABLE_NAME: 't', EVIDENCE_BUCKET: 'b', API_BASE_URL: 'http://127.0.0.1:1' };

  it('is public-only in AWS (enforce) and allow-loopback on the local platform (open)', () => {
    Object.assign(process.env, base, { PRINCIPAL_MODE: 'enforce' });
    expect(readLedgerConfig().targetAddressPolicy).toBe('public-only');
    Object.assign(process.env, base, { PRINCIPAL_MODE: 'open' });
    expect(readLedgerConfig().targetAddressPolicy).toBe('allow-loopback');
  });

  it('wires the policy into every target the functions build', async () => {
    Object.assign(process.env, base, { PRINCIPAL_MODE: 'enforce', AWS_REGION: 'us-east-1' });
    const aws = buildLedgerAdapters(readLedgerConfig(), LedgerTable);
    // Refused, not thrown: a table entry the policy refuses must not fail the invocation that meets it.
    const refused = aws.targetFor({ name: 'agent', kind: 'http', baseUrl: `https://127.0.0.1:${port}` });
    for (const outcome of [await refused.submit(request), await refused.lookup('r-1'), await refused.cancel('r-1'), await refused.decideApproval('r-1', 'a-1', 'approve')]) {
      expect(outcome).toEqual({ kind: 'unavailable', reason: 'target agent: baseUrl is 127.0.0.1 (loopback)' });
    }
    expect(reached).toEqual([]);
    Object.assign(process.env, base, { PRINCIPAL_MODE: 'open' });
    const local = buildLedgerAdapters(readLedgerConfig(), LedgerTable);
    expect(await local.targetFor({ name: 'agent', kind: 'http', baseUrl: `http://127.0.0.1:${port}` }).submit(request)).toMatchObject({ kind: 'accepted' });
  });
});
