import { describe, expect, it } from 'vitest';
import { effectiveSender, mayActForOrigin, type Principal, type PrincipalRegistry } from '../../shared/principals/principals.js';

const registry = (entries: Record<string, Principal>): PrincipalRegistry => ({ resolve: async (id) => entries[id] });
const known = registry({
  AROAPLANNER: { role: 'origin', origin: 'planner' },
  AROAONCALL: { role: 'operator' },
  AROAAGENT: { role: 'target', target: 'research-agent' },
});

describe('effectiveSender: a message moved back from the DLQ speaks for its first sender', () => {
  it('honours the first sender when an operator (any of its sessions) moved the message', async () => {
    const sender = await effectiveSender(known, 'enforce', 'AROAONCALL:alice', 'AROAPLANNER:planner-1');
    expect(sender).toBe('AROAPLANNER:planner-1');
    expect(await mayActForOrigin(known, 'enforce', sender, 'planner')).toBe(true);
  });

  it('ignores the claim when anyone but an operator sends it, so no origin can borrow another\'s identity', async () => {
    expect(await effectiveSender(known, 'enforce', 'AROAAGENT:x', 'AROAPLANNER')).toBe('AROAAGENT:x');
    expect(await effectiveSender(known, 'enforce', 'AROASTRANGER', 'AROAPLANNER')).toBe('AROASTRANGER');
    expect(await mayActForOrigin(known, 'enforce', await effectiveSender(known, 'enforce', 'AROASTRANGER', 'AROAPLANNER'), 'planner')).toBe(false);
  });

  it('is the SQS sender when nothing was redriven, or when the registry is open (local)', async () => {
    expect(await effectiveSender(known, 'enforce', 'AROAPLANNER', undefined)).toBe('AROAPLANNER');
    expect(await effectiveSender(known, 'open', 'local', 'AROAPLANNER')).toBe('local');
  });
});
