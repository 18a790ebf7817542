/**
 * Whether a parsed JSON value nests deeper than `levels` (the value itself is level 1, as a task is:
 * CONTRACT §1), found without recursion — `JSON.parse` reads nestings that `JSON.stringify`, zod and
 * DynamoDB's marshaller then overflow the stack on — and stopping at the first container too deep.
 */
export function nestsDeeperThan(value: unknown, levels: number): boolean {
  const stack: Array<{ readonly value: unknown; readonly depth: number }> = [{ value, depth: 1 }];
  while (stack.length > 0) {
    const node = stack.pop() as { readonly value: unknown; readonly depth: number };
    if (typeof node.value !== 'object' || node.value === null) continue;
    if (node.depth > levels) return true;
    const children: readonly unknown[] = Array.isArray(node.value) ? node.value : Object.values(node.value);
    for (const child of children) if (typeof child === 'object' && child !== null) stack.push({ value: child, depth: node.depth + 1 });
  }
  return false;
}
