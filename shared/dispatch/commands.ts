import type { DispatchState } from './state.js';

/**
 * The `ledger` command line that acts on a dispatch for its origin, as the ledger prints it in a view, an
 * attention item, an error or an event: `--origin` says which origin speaks on the local platform (the
 * route answers 404 to any other); against a stack the signer does, and the reader adds `--stack NAME`.
 * An origin name is a registered name (letters, digits, `._-`): it needs no quoting.
 *
 * @example
 * dispatchCommand({ dispatchId: 'd-1', origin: 'team-a' }, 'check', '--refresh') // 'npx ledger check d-1 --refresh --origin team-a'
 */
export const dispatchCommand = (state: Pick<DispatchState, 'dispatchId' | 'origin'>, verb: string, flags: string): string => `npx ledger ${verb} ${state.dispatchId} ${flags} --origin ${state.origin}`;
