/** Placeholder until its issue-17 work lands: a clear refusal, never a pretend answer. */
export async function ui(_args: string[], print: (line: string) => void): Promise<number> {
  print('ledger ui: not built yet');
  return 2;
}
