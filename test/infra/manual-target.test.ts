import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseStaticRegistry } from '../../shared/adapters/static-registry.js';
import { synthesizeLedger, type Synthesized } from './synth.js';

/** A manual target at deploy time (CONTRACT §13): in the registry every function reads, with nothing to call. */

type Resource = { readonly Type: string; readonly Properties?: Record<string, unknown> };

let synth: Synthesized;
let resources: Record<string, Resource>;

beforeAll(() => {
  synth = synthesizeLedger({ extend: (stack) => stack.ledger.addTarget({ name: 'desk', kind: 'manual' }) });
  resources = synth.template.toJSON().Resources as Record<string, Resource>;
});
afterAll(() => synth.dispose());

/** The LEDGER_REGISTRY value of every function that has one, references standing as "TOKEN-n". */
function registries(): string[] {
  return Object.values(resources).flatMap((resource) => {
    const value = (resource.Properties?.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables?.LEDGER_REGISTRY;
    if (value === undefined) return [];
    if (typeof value === 'string') return [value];
    const [, parts] = (value as { 'Fn::Join': [string, unknown[]] })['Fn::Join'];
    return [parts.map((part, index) => (typeof part === 'string' ? part : `TOKEN-${index}`)).join('')];
  });
}

describe('a manual target at deploy time', () => {
  it('reaches every function\'s registry as kind manual, with no base URL, secret or limit', () => {
    const found = registries();
    expect(found.length).toBeGreaterThanOrEqual(4);
    for (const json of found) expect(parseStaticRegistry(json).targets.get('desk')).toEqual({ name: 'desk', kind: 'manual' });
  });

  it('is refused twice under one name at synth time', () => {
    expect(() => synth.stack.ledger.addTarget({ name: 'desk', kind: 'manual' })).toThrow(/registered twice/);
  });
});
