/** Placeholder until its issue-17 work lands: a clear refusal, never a pretend answer. */
export async function list(_args: string[], print: (line: string) => void): Promise<number> {
  print('ledger list: not built yet');
  return 2;
}
export async function counts(_args: string[], print: (line: string) => void): Promise<number> {
  print('ledger counts: not built yet');
  return 2;
}
