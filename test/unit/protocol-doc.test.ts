import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ROUTES } from '@dispatch-ledger/protocol';
import { PROTOCOL_DOC, renderProtocolDoc } from '../../scripts/write-protocol-doc.js';

describe('docs/protocol.md', () => {
  it('is what `npm run docs:protocol` writes from the route table, the statuses, the bounds and the event catalog (run it after changing them)', () => {
    const onDisk = readFileSync(PROTOCOL_DOC, 'utf8');
    expect(onDisk).toBe(renderProtocolDoc(onDisk));
  });

  it('lists every route of the table, and would fail if one were added without writing it again', () => {
    const onDisk = readFileSync(PROTOCOL_DOC, 'utf8');
    for (const [name, spec] of Object.entries(ROUTES)) expect(onDisk, name).toContain(`\`${spec.method} ${spec.path}`);
    const stale = onDisk.replace(/^\| `GET \/counts.*\n/m, '');
    expect(renderProtocolDoc(stale)).not.toBe(stale);
  });

  it('has a section for every CONTRACT §n the code refers to, so those references resolve inside the repository', () => {
    const onDisk = readFileSync(PROTOCOL_DOC, 'utf8');
    for (let section = 1; section <= 18; section += 1) expect(onDisk, `§${section}`).toMatch(new RegExp(`^## §${section} `, 'm'));
  });
});
