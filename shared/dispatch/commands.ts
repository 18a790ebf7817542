import type { DispatchState } from './state.js';
import { hasControls } from '../text.js';

/**
 * The `ledger` command line that acts on a dispatch for its origin, as the ledger and the CLI print it (a
 * view, an attention item, an error, an event, a hint after a command): `--origin` says which origin
 * speaks on the local platform (the route answers 404 to any other); against a stack the signer does,
 * and the reader adds `--stack NAME`. An id that begins with '-' goes last, after `--` (it would read
 * as an option). An id matches `[A-Za-z0-9._:-]`: no quoting; an origin (`[a-z0-9-]`, perhaps '-' first) is
 * written by `optionWords`.
 *
 * @example
 * dispatchCommand({ dispatchId: 'd-1', origin: 'team-a' }, 'check', '--refresh') // 'npx ledger check d-1 --refresh --origin team-a'
 * dispatchCommand({ dispatchId: '-d', origin: 'team-a' }, 'check', '--refresh') // 'npx ledger check --refresh --origin team-a -- -d'
 */
export function dispatchCommand(state: Pick<DispatchState, 'dispatchId' | 'origin'>, verb: string, flags: string): string {
  const dashed = state.dispatchId.startsWith('-');
  return ['npx ledger', verb, ...(dashed ? [] : [state.dispatchId]), ...(flags ? [flags] : []), optionWords('origin', state.origin), ...(dashed ? ['--', state.dispatchId] : [])].join(' ');
}

/**
 * A value as one shell word, for a command a person copies: as it is when it holds only characters no
 * shell reads specially, else in single quotes (a quote inside written `'\''`). A run id is the
 * target's own (spaces, quotes, `$`, `~`, `*` and a leading `=`, which zsh reads as a command's path, are
 * all allowed in it), so it is always written so. A value with a character a terminal would act on
 * (a newline, a bidi mark: shown escaped, so a quoted copy would name another id) is written as `$'…'`
 * with `\uXXXX` escapes, which bash and zsh read back as the same value.
 *
 * @example
 * shellWord('r-1/a:b') // 'r-1/a:b'
 * shellWord("it's 1") // `'it'\''s 1'`
 * shellWord('a\nb') // `$'a\u000ab'`
 */
export function shellWord(value: string): string {
  if (/^[A-Za-z0-9._:/@%+,-]+$/.test(value)) return value;
  if (hasControls(value)) {
    const escaped = [...value].map((char) => (char === '\\' || char === "'" ? `\\${char}` : hasControls(char) ? `\\u${(char.codePointAt(0) ?? 0).toString(16).padStart(4, '0')}` : char));
    return `$'${escaped.join('')}'`;
  }
  return `'${value.replaceAll("'", "'\\''")}'`;
}

/**
 * An option and its value as a person copies them: `--name value`, or `--name=value` when the value begins
 * with '-' (it would read as an option), the value one shell word.
 *
 * @example
 * optionWords('run-id', 'r 1') // "--run-id 'r 1'"
 * optionWords('run-id', '-r') // '--run-id=-r'
 */
export function optionWords(name: string, value: string): string {
  return value.startsWith('-') ? `--${name}=${shellWord(value)}` : `--${name} ${shellWord(value)}`;
}
