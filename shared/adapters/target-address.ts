import type { LookupAddress, LookupOptions } from 'node:dns';
import { BlockList, isIP, isIPv4 } from 'node:net';
import { lazy } from '../lazy.js';

/**
 * Where a target may live (CONTRACT §8 v2). `public-only` is AWS: https only, and never a loopback,
 * link-local, unspecified or metadata address. `allow-loopback` is the local platform, whose demo agent
 * listens on http://127.0.0.1: loopback and http are fine there; link-local, unspecified and metadata
 * addresses are refused all the same. Private ranges (10/8, fc00::/7 …) stay allowed under both: a
 * target may live in the deployer's own network.
 */
export type AddressPolicy = 'public-only' | 'allow-loopback';

/** Resolves a host name to every address it has, as `dns.lookup(name, { all: true })` does. */
export type Resolver = (hostname: string) => Promise<ReadonlyArray<{ readonly address: string; readonly family: number }>>;

type Kind = 'loopback' | 'link-local' | 'unspecified' | 'metadata';

function blockOf(subnets: ReadonlyArray<readonly [string, number]>): BlockList {
  const list = new BlockList();
  // BlockList matches an IPv4 subnet against IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) too.
  for (const [network, prefix] of subnets) list.addSubnet(network, prefix, network.includes(':') ? 'ipv6' : 'ipv4');
  return list;
}

// The deprecated IPv4-compatible spelling (::a.b.c.d) of each IPv4 range is listed beside it; the
// IPv4-mapped one (::ffff:a.b.c.d) BlockList matches by itself. Metadata first: 169.254.169.254 is
// link-local too, but "metadata" says more. Built on the first check, not at every cold start.
const KINDS = /* @__PURE__ */ lazy((): ReadonlyArray<readonly [Kind, BlockList]> => [
  ['loopback', blockOf([['127.0.0.0', 8], ['::1', 128], ['::7f00:0', 104]])],
  ['metadata', blockOf([['169.254.169.254', 32], ['fd00:ec2::', 32], ['100.100.100.200', 32], ['::a9fe:a9fe', 128]])],
  ['link-local', blockOf([['169.254.0.0', 16], ['fe80::', 10], ['::a9fe:0', 112]])],
  ['unspecified', blockOf([['0.0.0.0', 8], ['::', 104]])],
]);

/** Why a connection to this IP address is refused under `policy`, or undefined when it is allowed. */
export function addressProblem(address: string, policy: AddressPolicy): string | undefined {
  const family = isIP(address);
  if (family === 0) return `${address} is not an IP address`;
  const kind = KINDS().find(([, list]) => list.check(address, family === 4 ? 'ipv4' : 'ipv6'))?.[0];
  if (kind === undefined || (kind === 'loopback' && policy === 'allow-loopback')) return undefined;
  return `${address} (${kind})`;
}

/**
 * Why `baseUrl` cannot be registered as a target under `policy`, or undefined. The URL is parsed the
 * WHATWG way first, which already turns numeric spellings (2130706433, 0x7f000001, 0177.0.0.1, 127.1)
 * into the dotted address checked here; a host name is checked again on every connection
 * ({@link guardedLookup}), where what it resolves to is known.
 */
export function baseUrlProblem(baseUrl: string, policy: AddressPolicy): string | undefined {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    return 'is not a URL';
  }
  if (url.protocol !== 'https:' && (policy === 'public-only' || url.protocol !== 'http:')) {
    return `must be ${policy === 'public-only' ? 'https' : 'http or https'}, got ${url.protocol}`;
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  // WHATWG serializes an IP host in brackets (v6) or as dotted decimal (v4), so a name needs no isIP:
  // its first call on a name compiles node's IPv6 pattern, ~3 ms of each cold start that parses a registry.
  if ((url.hostname.startsWith('[') || isIPv4(host)) && isIP(host) !== 0) {
    const problem = addressProblem(host, policy);
    return problem && `is ${problem}`;
  }
  // RFC 6761: every *.localhost name is loopback, whatever a resolver says today.
  if (policy === 'public-only' && /(^|\.)localhost\.?$/i.test(host)) return `is ${host} (loopback)`;
  return undefined;
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for `net.connect` (and so for `http.request`/`https.request`) that resolves with `resolve`
 * and refuses the connection when any address the name resolves to is refused under `policy` — on
 * every connection, so a name that resolved to a public address at registration and to 169.254.169.254
 * now (DNS rebinding) is refused now.
 */
export function guardedLookup(policy: AddressPolicy, resolve: Resolver) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    resolve(hostname).then(
      (answer) => {
        // Any refused address refuses the name: a rebinding answer may mix one in with good ones.
        const refused = answer.map((entry) => addressProblem(entry.address, policy)).find((problem) => problem !== undefined);
        const first = answer[0];
        // The name says it is ours (describeFailure in http-target shows the message as the reason).
        if (refused !== undefined) callback(Object.assign(new Error(`refused to connect: ${hostname} resolves to ${refused}`), { name: 'RefusedAddressError' }), '');
        else if (!first) callback(new Error(`no address for ${hostname}`), '');
        else if (options.all) callback(null, answer.map(({ address, family }) => ({ address, family })));
        else callback(null, first.address, first.family);
      },
      (error: unknown) => callback(error instanceof Error ? error : new Error(String(error)), ''),
    );
  };
}
