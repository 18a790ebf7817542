import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { toJSONSchema } from 'zod/mini';
import { DETAIL_TYPES, EVENT_CATALOG, type DetailType } from '../shared/events/catalog.js';
import { EVENT_SOURCE } from '../shared/events/names.js';

/**
 * Writes the JSON Schema of every event's `detail` (CONTRACT §3) to `schemas/events/`, generated from
 * the zod schemas the publisher's tests validate against. Run `npm run schemas` after changing
 * `shared/events/catalog.ts`; a unit test fails while the files on disk differ from what this writes.
 */

export const SCHEMAS_DIR = fileURLToPath(new URL('../schemas/events/', import.meta.url));

/** `Run Stalled` → `run-stalled`. */
export const kebab = (detailType: string): string => detailType.toLowerCase().replace(/[^a-z0-9]+/g, '-');

export const schemaFileName = (detailType: DetailType): string => `${kebab(detailType)}.schema.json`;

/** The files this script writes: name and exact content. */
export function eventSchemaFiles(): Array<{ readonly name: string; readonly content: string }> {
  return DETAIL_TYPES.map((detailType) => {
    const { schema, description } = EVENT_CATALOG[detailType];
    const { $schema, ...rest } = toJSONSchema(schema);
    const document = {
      $schema,
      $id: `urn:${EVENT_SOURCE}:events:${kebab(detailType)}`,
      title: detailType,
      description: `${description} The \`detail\` of events with source "${EVENT_SOURCE}" and detail-type "${detailType}".`,
      ...rest,
    };
    return { name: schemaFileName(detailType), content: `${JSON.stringify(document, null, 2)}\n` };
  });
}

function main(): void {
  mkdirSync(SCHEMAS_DIR, { recursive: true });
  const files = eventSchemaFiles();
  const keep = new Set(files.map((file) => file.name));
  // A detail-type removed from the catalog must not leave its schema behind.
  for (const name of readdirSync(SCHEMAS_DIR)) if (name.endsWith('.schema.json') && !keep.has(name)) rmSync(join(SCHEMAS_DIR, name));
  for (const file of files) writeFileSync(join(SCHEMAS_DIR, file.name), file.content);
  console.log(`wrote ${files.length} event schemas to ${SCHEMAS_DIR}`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) main();
