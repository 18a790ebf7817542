import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as protocol from '@dispatch-ledger/protocol';

/**
 * The wire protocol is spelled in one place: the CLI shows its values (states, kinds, modes, decisions)
 * from @dispatch-ledger/protocol, never from a copy. Regression: usage lines and the receipt and MCP texts
 * wrote "pending|claimed|delivered|dropped", "approve|cancel", "accepted|rejected" by hand, so a value the
 * protocol added or renamed would have left the help saying the old list. A run of two or more of one
 * enum's values joined by '|' in a CLI source is such a copy (a comment is code's word too: it goes).
 */
const CLI = join(import.meta.dirname, '..', '..', 'cli');

/** Every exported array of strings of the protocol: its enums. */
const isEnum = (value: unknown): value is readonly string[] => Array.isArray(value) && value.length > 1 && value.every((item) => typeof item === 'string');
const enums: Array<[string, readonly string[]]> = Object.entries(protocol as Record<string, unknown>).flatMap(([name, value]) => (isEnum(value) ? [[name, value] as [string, readonly string[]]] : []));

describe('the CLI shows protocol values from the protocol', () => {
  it('finds the enums it checks', () => {
    expect(enums.map(([name]) => name)).toEqual(expect.arrayContaining(['RESULT_STATES', 'RESULT_DELIVERY_MODES', 'APPROVAL_DECISIONS', 'OPERATOR_RECEIPT_KINDS', 'MANUAL_ATTESTATION_KINDS', 'ATTENTION_KINDS']));
  });

  it('spells no two values of one enum joined by "|" in its sources', () => {
    const copies: string[] = [];
    for (const file of readdirSync(CLI).filter((name) => name.endsWith('.ts'))) {
      const text = readFileSync(join(CLI, file), 'utf8');
      for (const [name, values] of enums) {
        for (const a of values) {
          for (const b of values) {
            if (a !== b && new RegExp(`(?<![\\w$])${a}\\|${b}(?![\\w$])`).test(text)) copies.push(`${file}: ${a}|${b} (${name})`);
          }
        }
      }
    }
    expect(copies).toEqual([]);
  });
});
