/** Placeholder until its issue-17 work lands: a clear refusal, never a pretend answer. */
export async function manual(_args: string[], print: (line: string) => void): Promise<number> {
  print('ledger manual: not built yet');
  return 2;
}
