import { parseArgs, type ParseArgsConfig } from 'node:util';

type Options = NonNullable<ParseArgsConfig['options']>;

/** Arguments a command cannot take as given: said with its usage, exit 2 (a usage mistake). */
export class ArgumentsError extends Error {
  override readonly name = 'ArgumentsError';
}

/**
 * The one positional a command takes (its dispatch id), undefined when none. A second is refused: words
 * after `--` are positionals, and an option written there (`check -- -d-1 --refresh`) was dropped unsaid.
 */
export function onePositional(positionals: readonly string[], usage: string): string | undefined {
  if (positionals.length > 1) throw new ArgumentsError(`one argument is taken, not also ${JSON.stringify(positionals[1])} (options go before --)\n${usage}`);
  return positionals[0];
}

/**
 * Is `word` one of the command's own options as written on a command line: `--name`, `--name=…`, or a
 * short `-c` the options declare?
 */
function isOwnOption(word: string, options: Options): boolean {
  if (word.startsWith('--')) return Object.hasOwn(options, word.slice(2).split('=', 1)[0] ?? '');
  return word.length === 2 && Object.values(options).some((option) => option.short === word[1]);
}

/**
 * A word written as a long option (`--froce`, `--dry-run=1`): never taken as the value before it, known or
 * not — a mistyped flag after `--reason` would otherwise become the reason. A claim token (base64url, no
 * '=') reads so only if all its 22 characters after `--` are lower-case letters, digits and dashes.
 */
const LONG_OPTION = /^--[a-z][a-z0-9-]*(=|$)/;

/** The long name of the option `word` names, written without `=`, when it takes a value: `--name`, or a declared short `-c`. */
function valueOptionName(word: string, options: Options): string | undefined {
  const name = word.startsWith('--') ? (word.includes('=') ? undefined : word.slice(2)) : word.length === 2 && word[0] === '-' ? Object.keys(options).find((key) => options[key]?.short === word[1]) : undefined;
  return name !== undefined && Object.hasOwn(options, name) && options[name]?.type === 'string' ? name : undefined;
}

/**
 * `node:util`'s `parseArgs` for every `ledger` command, with one difference: the value of an option that
 * takes one may begin with '-' (`--token -3Jx…`). parseArgs refuses that as ambiguous; but a claim token
 * is random base64url (one in 64 begins with '-'), and a reason is a person's text ("- see the ticket").
 * The guard parseArgs means by it stays: when the next word is one of the command's own options
 * (`--token --json`), or is written as a long option at all (`--reason --froce`), it is still an error.
 * Words after `--` are positionals, untouched.
 */
export function parseCommandArgs<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  const options: Options = config.options ?? {};
  const args = [...(config.args ?? [])];
  const joined: string[] = [];
  for (let at = 0; at < args.length; at += 1) {
    const word = args[at] as string;
    if (word === '--') {
      joined.push(...args.slice(at));
      break;
    }
    const next = args[at + 1];
    const name = valueOptionName(word, options);
    if (name !== undefined && next !== undefined && next !== '--' && next.startsWith('-') && !LONG_OPTION.test(next) && !isOwnOption(next, options)) {
      joined.push(`--${name}=${next}`);
      at += 1;
    } else {
      joined.push(word);
    }
  }
  return parseArgs<T>({ ...config, args: joined });
}
