import { readFileSync } from 'node:fs';

/**
 * The addresses a TCP port is listened on, read from the kernel's socket tables (Linux /proc/net/tcp
 * and tcp6), without sending a packet: `127.0.0.1`, `0.0.0.0` (every interface), `::` and so on.
 */
export function listenersOn(port: number): string[] {
  const found: string[] = [];
  for (const [file, v6] of [['/proc/net/tcp', false], ['/proc/net/tcp6', true]] as const) {
    let table: string;
    try {
      table = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of table.split('\n').slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      if (!local || state !== '0A') continue; // 0A: LISTEN
      const [address, portHex] = local.split(':');
      if (!address || Number.parseInt(portHex ?? '', 16) !== port) continue;
      found.push(v6 ? ipv6Of(address) : ipv4Of(address));
    }
  }
  return found;
}

/** /proc/net/tcp's address: four bytes in the host's (little-endian) order. */
function ipv4Of(hex: string): string {
  return [3, 2, 1, 0].map((i) => Number.parseInt(hex.slice(i * 2, i * 2 + 2), 16)).join('.');
}

function ipv6Of(hex: string): string {
  if (/^0+$/.test(hex)) return '::';
  if (hex === '00000000000000000000000001000000') return '::1';
  return `ipv6:${hex}`;
}
