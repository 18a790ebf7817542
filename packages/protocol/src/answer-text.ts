/**
 * Reading an HTTP answer of the ledger's API without holding more than a bound
 * (`@dispatch-ledger/protocol/answer-text`): the worker kit's callbacks and the client read every answer
 * through it. A 2xx answer larger than its bound is no answer of the ledger's (a proxy's page, a server
 * that is not the ledger): it is not read past the bound. Of an error answer the start is kept — its
 * code is there — so that a large refusal page is still the refusal it is.
 */

export interface AnswerBounds {
  /** The most bytes of a 2xx answer read; more is `too_large`. */
  readonly okBytes: number;
  /** The most bytes of any other answer kept; the rest is not read. */
  readonly errorBytes: number;
}

export type AnswerText =
  | { readonly kind: 'text'; readonly text: string }
  /** A 2xx answer over `okBytes`: `bytes` is what it declared, or what was read when the bound was passed. */
  | { readonly kind: 'too_large'; readonly bytes: number };

/** The answer's text within `bounds` (the body is cancelled once a bound is passed: the connection is freed). */
export async function readAnswerText(response: Response, bounds: AnswerBounds): Promise<AnswerText> {
  const ok = response.status >= 200 && response.status < 300;
  const cap = ok ? bounds.okBytes : bounds.errorBytes;
  const declared = Number(response.headers.get('content-length') ?? Number.NaN);
  if (ok && declared > cap) {
    await response.body?.cancel();
    return { kind: 'too_large', bytes: declared };
  }
  if (!response.body) return { kind: 'text', text: '' };
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    size += value.byteLength;
    if (size > cap) {
      await reader.cancel();
      if (ok) return { kind: 'too_large', bytes: size };
      return { kind: 'text', text: Buffer.concat(chunks).subarray(0, cap).toString('utf8') };
    }
  }
  return { kind: 'text', text: Buffer.concat(chunks).toString('utf8') };
}
