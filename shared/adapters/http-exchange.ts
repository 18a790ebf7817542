import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import * as z from 'zod/mini';
import { REQUEST_ID } from '@dispatch-ledger/protocol';
import { lazy } from '../lazy.js';
import type { guardedLookup } from './target-address.js';

/**
 * One HTTP exchange with a target, for the `http` target adapter (http-target.ts): the request sent with
 * node:http(s) through the address guard, the answer's body read boundedly, and every reason built from
 * what the target said bounded and scrubbed of the credentials we sent.
 */

/** Past this many bytes a body is not read further: an answer that long is not one we can use. */
export const MAX_BODY_BYTES = 64 * 1024;
const REASON_CHARS = 200;
/** C0/C1 controls plus the invisible and bidi-override characters that can disguise a log line. */
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]+/g;

/** CONTRACT §2's error shape, which targets are asked to share. */
const ErrorBodySchema = /* @__PURE__ */ lazy(() => z.object({ error: z.object({ message: z.string().check(z.minLength(1)) }) }));

// --- One call ----------------------------------------------------------------------------------------

export type BodyRead =
  | { readonly kind: 'complete'; readonly text: string }
  /** Over MAX_BODY_BYTES: only the first bytes were kept, good for a preview and nothing else. */
  | { readonly kind: 'too_large'; readonly prefix: string }
  | { readonly kind: 'broken'; readonly reason: string };

export type Answer =
  | { readonly kind: 'failed'; readonly reason: string }
  | {
      readonly kind: 'answered';
      readonly status: number;
      readonly body: BodyRead;
      /** The target's own well-formed `x-request-id`, else the one we sent. */
      readonly requestId: string;
      /** Bounds and scrubs a reason built from what the target said. */
      explain(text: string): string;
      /** The reason for a non-2xx answer that makes the target `unavailable`. */
      failure(): string;
    };

export interface ExchangeConfig {
  readonly agent: HttpAgent;
  readonly lookup: ReturnType<typeof guardedLookup>;
  readonly timeoutMs: number;
  readonly authHeader: (() => Promise<string | undefined>) | undefined;
  readonly newRequestId: () => string;
}

export type Exchange = (
  method: 'GET' | 'POST',
  url: string,
  extra?: { readonly headers?: Record<string, string>; readonly json?: unknown },
) => Promise<Answer>;

export function exchanger(config: ExchangeConfig): Exchange {
  return async (method, url, extra = {}) => {
    const sentRequestId = config.newRequestId();
    const headers: Record<string, string> = { accept: 'application/json', 'x-request-id': sentRequestId, ...extra.headers };
    const body = extra.json === undefined ? undefined : JSON.stringify(extra.json);
    if (body !== undefined) headers['content-type'] = 'application/json';

    let secrets: readonly string[] = [];
    if (config.authHeader) {
      let value: string | undefined;
      try {
        value = await config.authHeader();
      } catch (error) {
        // Only the error's class (SecretOutsideScopeError for a secretRef outside the stack's prefix):
        // a secret store's message is not ours to repeat.
        return { kind: 'failed', reason: `could not obtain the auth header (${error instanceof Error ? error.name : typeof error})` };
      }
      if (value !== undefined) {
        headers['authorization'] = value;
        secrets = secretFragments(value);
      }
    }
    const scrub = (text: string): string => boundReason(text, secrets);
    // What Node would refuse to send (CR, LF, NUL…): said without quoting the value, which may be a secret.
    if (Object.values(headers).some((value) => /[^\t\x20-\x7e\x80-\xff]/.test(value))) {
      return { kind: 'failed', reason: 'could not reach the target: invalid header value' };
    }

    const signal = AbortSignal.timeout(config.timeoutMs);
    let response: IncomingMessage;
    try {
      response = await send(url, { method, headers, body, signal, agent: config.agent, lookup: config.lookup });
    } catch (error) {
      return { kind: 'failed', reason: scrub(describeFailure(error, signal, config.timeoutMs)) };
    }
    // Always read (boundedly), even when the status says it all: an unread body holds the connection.
    const read = withoutCutSecret(await readBounded(response, signal, config.timeoutMs), secrets);
    const status = response.statusCode ?? 0;
    const theirs = response.headers['x-request-id'] ?? null;
    return {
      kind: 'answered',
      status,
      body: read,
      requestId: typeof theirs === 'string' && REQUEST_ID.test(theirs) ? theirs : sentRequestId,
      explain: scrub,
      failure: () => {
        const detail = read.kind === 'broken' ? read.reason : errorMessageOf(read);
        return scrub(detail === undefined ? `HTTP ${status}` : `HTTP ${status}: ${detail}`);
      },
    };
  };
}

/**
 * One request with node:http(s) — not `fetch`, whose undici takes no `lookup` — so that every address
 * is checked before connecting. Never follows a redirect (node:http does not).
 */
function send(
  url: string,
  init: { method: string; headers: Record<string, string>; body: string | undefined; signal: AbortSignal; agent: HttpAgent; lookup: ReturnType<typeof guardedLookup> },
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const { body, ...options } = init;
    const request = (url.startsWith('https:') ? httpsRequest : httpRequest)(url, options, resolve);
    request.once('error', reject);
    request.end(body);
  });
}

async function readBounded(response: IncomingMessage, signal: AbortSignal, timeoutMs: number): Promise<BodyRead> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of response as AsyncIterable<Buffer>) {
      const room = MAX_BODY_BYTES - size;
      size += chunk.byteLength;
      if (size > MAX_BODY_BYTES) {
        chunks.push(chunk.subarray(0, room));
        // The connection is dropped: we have what we will use.
        response.destroy();
        return { kind: 'too_large', prefix: Buffer.concat(chunks).toString('utf8') };
      }
      chunks.push(chunk);
    }
    return { kind: 'complete', text: Buffer.concat(chunks).toString('utf8') };
  } catch (error) {
    return { kind: 'broken', reason: `answer body unreadable: ${describeFailure(error, signal, timeoutMs)}` };
  }
}

export function parseBody<T>(body: BodyRead, schema: z.ZodMiniType<T>): T | undefined {
  if (body.kind !== 'complete') return undefined;
  let json: unknown;
  try {
    json = JSON.parse(body.text);
  } catch {
    return undefined;
  }
  const parsed = schema.safeParse(json);
  return parsed.success ? parsed.data : undefined;
}

/** Why a 2xx body could not be used, without repeating it. */
export function unreadable(body: BodyRead, expected: string): string {
  if (body.kind === 'too_large') return `answer body over ${MAX_BODY_BYTES} bytes, not read`;
  if (body.kind === 'broken') return body.reason;
  return `answer body is not a valid ${expected}`;
}

/** The target's `error.message` if it sent the contract's error shape, else a preview of its body. */
export function errorMessageOf(body: BodyRead): string | undefined {
  if (body.kind === 'broken') return undefined;
  const message = parseBody(body, ErrorBodySchema())?.error.message;
  if (message !== undefined) return message;
  // Whole, never cut here: a cut before the credentials are redacted could keep part of them. The
  // reason is bounded after redaction (boundReason), and a body is at most MAX_BODY_BYTES.
  const preview = body.kind === 'complete' ? body.text : body.prefix;
  return preview.trim() === '' ? undefined : preview;
}

function describeFailure(error: unknown, signal: AbortSignal, timeoutMs: number): string {
  if (signal.aborted) return `no answer within ${timeoutMs} ms`;
  if (!(error instanceof Error)) return `could not reach the target: ${String(error)}`;
  // Our own refusal of a resolved address: it says which, and that nothing was sent.
  if (error.name === 'RefusedAddressError') return error.message;
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return `could not reach the target: ${error.message}${cause}`;
}

// --- Reasons -------------------------------------------------------------------------------------------

/** The header value and, for `Scheme credentials`, the credentials alone: a target may echo either. */
function secretFragments(headerValue: string): readonly string[] {
  const forms = [headerValue, headerValue.replace(/^\S+\s+/, '')];
  const all = [...forms, ...forms.map((form) => form.replace(UNPRINTABLE, ' ').trim())];
  return [...new Set(all.filter((fragment) => fragment !== ''))].sort((a, b) => b.length - a.length);
}

/**
 * Makes text safe to store and show as a reason: secrets redacted, unprintable characters replaced by
 * a space, at most REASON_CHARS characters.
 */
function boundReason(text: string, secrets: readonly string[]): string {
  let clean = redact(text, secrets);
  clean = redact(clean.replace(UNPRINTABLE, ' ').replace(/\s+/g, ' ').trim(), secrets);
  if (clean.length <= REASON_CHARS) return clean;
  let cut = clean.slice(0, REASON_CHARS - 1);
  // Never end on half of a surrogate pair.
  if (/[\ud800-\udbff]$/.test(cut)) cut = cut.slice(0, -1);
  return `${cut}…`;
}

/**
 * A body cut at the read bound may end inside an echoed credential, which redaction (whole values only)
 * would miss: that unfinished end is redacted. Any end that begins a secret counts, however short.
 */
function withoutCutSecret(read: BodyRead, secrets: readonly string[]): BodyRead {
  if (read.kind !== 'too_large') return read;
  let cut = 0;
  for (const secret of secrets) {
    for (let length = secret.length - 1; length > cut; length -= 1) {
      if (read.prefix.endsWith(secret.slice(0, length))) cut = length;
    }
  }
  return cut === 0 ? read : { kind: 'too_large', prefix: `${read.prefix.slice(0, -cut)}[redacted]` };
}

function redact(text: string, secrets: readonly string[]): string {
  return secrets.reduce((acc, secret) => acc.split(secret).join('[redacted]'), text);
}
