/** Placeholder until its issue-17 work lands: a clear refusal, never a pretend answer. */
export async function mcp(_args: string[], print: (line: string) => void): Promise<number> {
  print('ledger mcp: not built yet');
  return 2;
}
