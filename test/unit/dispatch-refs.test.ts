import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isSafeRef, MAX_REF_BYTES, refProblem, type RefProblem } from '../../shared/dispatch/refs.js';

/** CONTRACT §6: non-empty, POSIX relative, ≤ 512 bytes; no `/` prefix, no `\`, no controls/NUL, no `.`/`..` or empty segment. */

const SEGMENT_CHARS = [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-'];
const segmentArb = fc.string({ unit: fc.constantFrom(...SEGMENT_CHARS), minLength: 1, maxLength: 20 });
/** At most 24 segments of ≤ 20 bytes plus 23 slashes: 503 bytes, always within the limit. */
const segmentsArb = fc.array(segmentArb, { minLength: 1, maxLength: 24 });

const expectProblem = (ref: string, problem: RefProblem): void => {
  expect(refProblem(ref)).toBe(problem);
  expect(isSafeRef(ref)).toBe(false);
};

describe('refProblem', () => {
  it('accepts plain relative refs when every segment is a name', () => {
    for (const ref of ['report.md', 'out/report.md', 'a/b/c/d.txt', '.hidden', 'a/.config', '...', 'a..b/c', 'x-y_z/1.2.3']) {
      expect(refProblem(ref), ref).toBeUndefined();
      expect(isSafeRef(ref), ref).toBe(true);
    }
  });

  it('accepts percent-encoded characters when they decode to a safe ref', () => {
    expect(refProblem('out%20dir/report.md')).toBeUndefined();
    expect(refProblem('r%C3%A9sum%C3%A9.md')).toBeUndefined();
    // An encoded slash inside a segment decodes to two ordinary segments.
    expect(refProblem('a%2Fb')).toBeUndefined();
  });

  it('reports empty when the ref is the empty string', () => {
    expectProblem('', 'empty');
  });

  it('reports absolute when the ref starts with a slash', () => {
    expectProblem('/etc/passwd', 'absolute');
    expectProblem('/', 'absolute');
    expectProblem('//server/share', 'absolute');
  });

  it('reports absolute when the leading slash is percent-encoded', () => {
    expectProblem('%2Fetc/passwd', 'absolute');
    expectProblem('%2fetc', 'absolute');
  });

  it('reports backslash when the ref holds a backslash, raw or encoded', () => {
    expectProblem('a\\b', 'backslash');
    expectProblem('..\\x', 'backslash');
    expectProblem('a%5Cb', 'backslash');
    expectProblem('a%5cb', 'backslash');
  });

  it('reports control_character when the ref holds NUL, a C0 control, DEL or a C1 control', () => {
    for (const ref of ['a\u0000b', 'a\tb', 'a\nb', 'a\rb', 'a\u001fb', 'a\u007fb', 'a\u0085b', 'a\u009fb']) {
      expectProblem(ref, 'control_character');
    }
  });

  it('reports control_character when NUL or a control is percent-encoded', () => {
    expectProblem('a%00b', 'control_character');
    expectProblem('a%0Ab', 'control_character');
    expectProblem('a%7Fb', 'control_character');
    expectProblem('a%C2%85b', 'control_character');
  });

  it('reports empty_segment when a slash is doubled or trailing', () => {
    expectProblem('a//b', 'empty_segment');
    expectProblem('a/', 'empty_segment');
    expectProblem('a/b/', 'empty_segment');
  });

  it('reports empty_segment when the empty segment only appears after decoding', () => {
    expectProblem('a%2F%2Fb', 'empty_segment');
    expectProblem('a%2F', 'empty_segment');
  });

  it('reports dot_segment when a segment is . or ..', () => {
    for (const ref of ['.', '..', './a', '../a', 'a/./b', 'a/../b', 'a/..', 'a/.']) expectProblem(ref, 'dot_segment');
  });

  it('reports dot_segment when the dots are percent-encoded, in any case', () => {
    for (const ref of ['%2e%2e/x', '%2E%2E/x', '%2e./x', '.%2e/x', 'a/%2E/b', 'a/%2e%2e/b', 'a/%2e%2e', '%2e']) {
      expectProblem(ref, 'dot_segment');
    }
  });

  it('reports dot_segment when the slash next to the dots is percent-encoded', () => {
    expectProblem('..%2fx', 'dot_segment');
    expectProblem('..%2Fx', 'dot_segment');
    expectProblem('a%2F..%2Fb', 'dot_segment');
    expectProblem('x/%2e%2e%2fsecret', 'dot_segment');
  });

  it('refuses an encoded traversal when it ends in an encoded slash', () => {
    // `../` decoded: both an empty and a dot segment; either way it is unsafe.
    expect(isSafeRef('..%2f')).toBe(false);
    expect(isSafeRef('..%2F')).toBe(false);
    expect(isSafeRef('%2e%2e%2f')).toBe(false);
  });

  it('reports bad_percent_encoding when a percent sign does not start a valid UTF-8 escape', () => {
    for (const ref of ['%', 'a%', 'a%2', '%zz', '100%.txt', '%E0%A4%A', '%C0%AE', '%FF', '%C3']) {
      expectProblem(ref, 'bad_percent_encoding');
    }
  });

  it('accepts a ref of exactly 512 bytes when it is ASCII', () => {
    const ref = 'a'.repeat(MAX_REF_BYTES);
    expect(MAX_REF_BYTES).toBe(512);
    expect(refProblem(ref)).toBeUndefined();
  });

  it('reports too_long when an ASCII ref is 513 bytes', () => {
    expectProblem('a'.repeat(MAX_REF_BYTES + 1), 'too_long');
  });

  it('counts UTF-8 bytes, not characters, when multi-byte characters are used', () => {
    // é is 2 bytes, € 3 bytes, 😀 4 bytes (and 2 UTF-16 code units).
    expect(refProblem('é'.repeat(256))).toBeUndefined();
    expectProblem('é'.repeat(257), 'too_long');
    expect(refProblem(`${'€'.repeat(170)}ab`)).toBeUndefined(); // 510 + 2 = 512 bytes
    expectProblem(`${'€'.repeat(170)}abc`, 'too_long'); // 513 bytes in 173 characters
    expect(refProblem('😀'.repeat(128))).toBeUndefined(); // 512 bytes
    expectProblem('😀'.repeat(129), 'too_long'); // 516 bytes in 258 code units
  });

  it('counts the encoded form, not the decoded one, when the ref is percent-encoded', () => {
    // 171 escapes are 513 bytes as given, 171 bytes decoded.
    expectProblem('%41'.repeat(171), 'too_long');
    expect(refProblem('%41'.repeat(170))).toBeUndefined();
  });

  it('is safe when built from name segments joined by slashes', () => {
    fc.assert(
      fc.property(segmentsArb, (segments) => {
        const ref = segments.join('/');
        expect(Buffer.byteLength(ref, 'utf8')).toBeLessThanOrEqual(MAX_REF_BYTES);
        expect(refProblem(ref)).toBeUndefined();
      }),
    );
  });

  it('becomes unsafe when a safe ref is prefixed with a slash', () => {
    fc.assert(
      fc.property(segmentsArb, (segments) => {
        expect(refProblem(`/${segments.join('/')}`)).toBe('absolute');
      }),
    );
  });

  it('becomes unsafe when a .. segment is inserted anywhere, raw or percent-encoded', () => {
    fc.assert(
      fc.property(segmentsArb, fc.nat(), fc.constantFrom('..', '.', '%2e%2e', '%2E%2E', '%2e', '.%2E'), (segments, at, dots) => {
        const position = at % (segments.length + 1);
        const withDots = [...segments.slice(0, position), dots, ...segments.slice(position)];
        expect(refProblem(withDots.join('/'))).toBe('dot_segment');
      }),
    );
  });
});

describe('refProblem on malformed Unicode', () => {
  it('refuses a ref holding a lone surrogate (it has no UTF-8 form)', () => {
    expect(refProblem('out/\ud800.md')).toBe('malformed_unicode');
    expect(refProblem('out/\udc00')).toBe('malformed_unicode');
    expect(refProblem('out/😀.md')).toBeUndefined();
  });
});
