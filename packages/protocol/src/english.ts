import { config, type core } from 'zod/mini';

/**
 * Plain-English messages for every zod issue the protocol's schemas raise (`@dispatch-ledger/protocol/english`, imported for its effect by the schema modules: the ledger's answers and the client's refusals read the same). Classic `zod` installs its
 * locale on import; `zod/mini` (which the Lambda bundles use, for size) installs none, so its messages
 * would be a bare "Invalid input". Field errors in blocked reasons, 4xx bodies and audit failures quote
 * these messages, so every module whose validation messages reach people imports this once, for its
 * effect. (zod's own English locale costs ~2.7 KB of every bundle; this covers what we use.)
 */

/** Unknown keys named in a message: a body may hold thousands, each of any length; the rest are counted. */
const KEYS_NAMED = 3;
const KEY_CHARS = 40;

function unknownFields(keys: readonly string[]): string {
  // Clipped by code point, so a key is never cut inside a surrogate pair.
  const named = keys.slice(0, KEYS_NAMED).map((key) => (key.length > KEY_CHARS ? `${Array.from(key).slice(0, KEY_CHARS - 1).join('')}…` : key));
  const more = keys.length - named.length;
  return `unknown field${keys.length > 1 ? 's' : ''}: ${named.join(', ')}${more > 0 ? ` and ${more} more` : ''}`;
}

const kindOf = (input: unknown): string => (input === null ? 'null' : Array.isArray(input) ? 'array' : typeof input);
const unitOf = (origin: unknown): string => (origin === 'string' ? ' characters' : origin === 'array' || origin === 'set' ? ' items' : '');

export const englishIssue: core.$ZodErrorMap = (issue) => {
  switch (issue.code) {
    case 'invalid_type':
      // NaN is of type number: a query's `limit=abc`, read as a number.
      return typeof issue.input === 'number' && Number.isNaN(issue.input) ? 'not a number' : `expected ${issue.expected}, got ${kindOf(issue.input)}`;
    case 'invalid_value':
      return issue.values.length === 1 ? `expected ${JSON.stringify(issue.values[0])}` : `expected one of ${issue.values.map((value) => JSON.stringify(value)).join(', ')}`;
    case 'too_big':
      return `too big: at most ${issue.inclusive === false ? 'below ' : ''}${String(issue.maximum)}${unitOf(issue.origin)}`;
    case 'too_small':
      return `too small: at least ${issue.inclusive === false ? 'above ' : ''}${String(issue.minimum)}${unitOf(issue.origin)}`;
    case 'invalid_format':
      return issue.format === 'regex' && 'pattern' in issue ? `does not match ${String(issue.pattern)}` : `not a valid ${issue.format}`;
    case 'not_multiple_of':
      return `must be a multiple of ${String(issue.divisor)}`;
    case 'unrecognized_keys':
      return unknownFields(issue.keys);
    case 'invalid_union':
      return 'matches none of the allowed shapes';
    case 'invalid_key':
      return 'invalid key';
    case 'invalid_element':
      return 'invalid item';
    default:
      return issue.message ?? 'invalid value';
  }
};

config({ localeError: englishIssue });
