/**
 * A value built on its first use and kept: for what a module would otherwise build when it is
 * imported although only some paths use it (zod schemas, lookup tables). A cold start then pays for
 * it only when the invocation needs it, and a bundle whose code never calls the getter leaves it out.
 *
 * Call it marked pure — `/* @__PURE__ *\/ lazy(() => …)` — or esbuild keeps every call in every
 * bundle that imports the module: it cannot see that `lazy` has no side effects from another module.
 *
 * @example
 * const registrySchema = /* @__PURE__ *\/ lazy(() => z.object({ targets: z.array(targetSchema) }));
 * registrySchema().safeParse(value);
 */
export { lazy } from '@dispatch-ledger/protocol';
