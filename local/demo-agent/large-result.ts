import { createHash } from 'node:crypto';

/**
 * The `result.body` of a `large_result` run (CONTRACT §10): a report of sections whose serialized JSON
 * is `bytes` long (UTF-8), the same for the same dispatchId every time, so a test can compare what the
 * origin's inbox hands back with what the target sent, byte for byte.
 */

const WORDS = [
  'ledger', 'dispatch', 'origin', 'target', 'run', 'attempt', 'evidence', 'receipt', 'monitor', 'lookup',
  'heartbeat', 'approval', 'result', 'inbox', 'lease', 'claim', 'summary', 'section', 'finding', 'incident',
  'timeline', 'cause', 'impact', 'action', 'owner', 'status', 'window', 'grace', 'proof', 'queue',
] as const;
/** The longest section's text: a body is several sections, not one string. */
const SECTION_CHARS = 2_000;

// A type, not an interface: it must be assignable to a JSON object (`Record<string, unknown>`).
export type LargeResultBody = {
  readonly dispatchId: string;
  readonly report: string;
  readonly sections: ReadonlyArray<{ readonly title: string; readonly text: string }>;
};

/** Words drawn from the hash chain of `seed`: deterministic, ASCII, separated by single spaces. */
function text(seed: string, chars: number): string {
  let out = '';
  for (let block = 0; out.length < chars; block += 1) {
    const digest = createHash('sha256').update(`${seed}#${block}`).digest();
    for (const byte of digest) {
      out += `${out === '' ? '' : ' '}${WORDS[byte % WORDS.length] ?? 'ledger'}`;
      if (out.length >= chars) break;
    }
  }
  return out.slice(0, chars);
}

const size = (body: LargeResultBody): number => Buffer.byteLength(JSON.stringify(body), 'utf8');

/**
 * A body whose JSON is exactly `bytes` long, or as short as a body can be (its empty shape with the
 * dispatchId) when `bytes` is smaller than that.
 *
 * @example
 * Buffer.byteLength(JSON.stringify(largeResultBody('d-1', 20_000))) // 20000
 */
export function largeResultBody(dispatchId: string, bytes: number): LargeResultBody {
  const sections: Array<{ title: string; text: string }> = [];
  let used = size({ dispatchId, report: '', sections });
  // Whole sections while they fit (each adds its JSON and, after the first, a comma), leaving the
  // report, where one ASCII character is one byte, to fill the rest exactly.
  for (let index = 1; ; index += 1) {
    const section = { title: `Section ${index}`, text: text(`${dispatchId}/section/${index}`, SECTION_CHARS) };
    const adds = Buffer.byteLength(JSON.stringify(section), 'utf8') + (sections.length > 0 ? 1 : 0);
    if (used + adds > bytes) break;
    sections.push(section);
    used += adds;
  }
  return { dispatchId, report: text(`${dispatchId}/report`, Math.max(0, bytes - used)), sections };
}
