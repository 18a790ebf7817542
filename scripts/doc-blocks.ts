/**
 * Generated blocks in a markdown document: `<!-- KIND:NAME -->` … `<!-- /KIND:NAME -->`, each rewritten
 * with its content and everything around it left as it is (docs/performance.md by `npm run bench`,
 * docs/protocol.md by `npm run docs:protocol`). Throws when a block's markers are missing.
 */
export function replaceDocBlocks(doc: string, kind: string, blocks: Readonly<Record<string, string>>, docName: string): string {
  let out = doc;
  for (const [name, content] of Object.entries(blocks)) {
    const open = `<!-- ${kind}:${name} -->`;
    const close = `<!-- /${kind}:${name} -->`;
    const start = out.indexOf(open);
    const end = out.indexOf(close);
    if (start < 0 || end < start) throw new Error(`${docName} has no ${open} … ${close} block`);
    out = `${out.slice(0, start + open.length)}\n${content}\n${out.slice(end)}`;
  }
  return out;
}
