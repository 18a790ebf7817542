import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { handlerEntry, PROJECT_ROOT, type LedgerFunctionName } from '../../infra/bundling.js';

/**
 * What a ledger function's code can ask AWS for, read from its source (no engine, no mock): the AWS
 * SDK commands the adapter methods it can reach send, and the table and indexes its queries name. The
 * infra tests hold each function's role to it, so a role that lacks what a code path calls fails the
 * synth test instead of an AccessDenied swallowed in production (the failures function's admission
 * nudge counted waiters on the wait index its role could not query).
 *
 * Reach is by name: from the handler, every module it imports (type-only imports carry no code);
 * outside `shared/adapters/` every call counts, and an adapter's method or helper counts once a
 * reached call names it (then the calls in its body count too). By name is an over-approximation —
 * two methods of one name both count — never an under-approximation, except for a method passed by
 * reference and never called by name, which no adapter does.
 */
export interface CodeCalls {
  /** IAM actions of the commands reachable adapter code sends (`dynamodb:Query`, `s3:PutObject`, …). */
  readonly actions: ReadonlySet<string>;
  /** What its queries read: `table`, or an index name. */
  readonly queried: ReadonlySet<string>;
  /** Commands that do not map to one action here (TransactWrite: its items' actions are granted as such). */
  readonly unmapped: ReadonlySet<string>;
}

/** The action a command needs. A command missing here fails the check: say what it needs. */
const ACTION_OF: Readonly<Record<string, string>> = {
  GetCommand: 'dynamodb:GetItem',
  GetItemCommand: 'dynamodb:GetItem',
  PutCommand: 'dynamodb:PutItem',
  PutItemCommand: 'dynamodb:PutItem',
  UpdateCommand: 'dynamodb:UpdateItem',
  UpdateItemCommand: 'dynamodb:UpdateItem',
  DeleteCommand: 'dynamodb:DeleteItem',
  QueryCommand: 'dynamodb:Query',
  BatchGetCommand: 'dynamodb:BatchGetItem',
  GetObjectCommand: 's3:GetObject',
  PutObjectCommand: 's3:PutObject',
  ListObjectsV2Command: 's3:ListBucket',
  DeleteObjectsCommand: 's3:DeleteObject',
  InvokeCommand: 'lambda:InvokeFunction',
  GetSecretValueCommand: 'secretsmanager:GetSecretValue',
  PutEventsCommand: 'events:PutEvents',
  // stepfunctions targets (CONTRACT §17).
  StartExecutionCommand: 'states:StartExecution',
  DescribeExecutionCommand: 'states:DescribeExecution',
  GetExecutionHistoryCommand: 'states:GetExecutionHistory',
  StopExecutionCommand: 'states:StopExecution',
  SendTaskSuccessCommand: 'states:SendTaskSuccess',
  SendTaskFailureCommand: 'states:SendTaskFailure',
  // durable targets (CONTRACT §17): submitted by InvokeCommand (lambda:InvokeFunction, above), then these.
  GetDurableExecutionCommand: 'lambda:GetDurableExecution',
  GetDurableExecutionHistoryCommand: 'lambda:GetDurableExecutionHistory',
  ListDurableExecutionsByFunctionCommand: 'lambda:ListDurableExecutionsByFunction',
  StopDurableExecutionCommand: 'lambda:StopDurableExecution',
  SendDurableExecutionCallbackSuccessCommand: 'lambda:SendDurableExecutionCallbackSuccess',
  SendDurableExecutionCallbackFailureCommand: 'lambda:SendDurableExecutionCallbackFailure',
};
/** A transaction's actions are those of its items (Put, Update, ConditionCheck), which the item writes already need. */
const NO_ACTION_OF_ITS_OWN = new Set(['TransactWriteCommand']);

const ADAPTERS = path.join(PROJECT_ROOT, 'shared', 'adapters') + path.sep;

interface Callable {
  readonly file: string;
  readonly name: string;
  readonly topLevelFunction: boolean;
  readonly calls: Set<string>;
  readonly commands: Set<string>;
  /** Indexes named as `IndexName: INDEX.x`; `dynamic` when IndexName is any other expression. */
  readonly indexNames: Set<string>;
  dynamicIndex: boolean;
  queries: boolean;
}

interface SourceFacts {
  readonly imports: string[];
  readonly callables: Callable[];
  /** Calls outside adapter callables: module code, and every call of a module outside `shared/adapters/`. */
  readonly seeds: Set<string>;
  /** `index: INDEX.x` anywhere in the file: the lists a dynamic IndexName may take its value from. */
  readonly indexValues: Set<string>;
}

const calleeName = (call: ts.CallExpression): string | undefined =>
  ts.isPropertyAccessExpression(call.expression) ? call.expression.name.text : ts.isIdentifier(call.expression) ? call.expression.text : undefined;

const indexOf = (expression: ts.Expression): string | undefined =>
  ts.isPropertyAccessExpression(expression) && ts.isIdentifier(expression.expression) && expression.expression.text === 'INDEX' ? expression.name.text : undefined;

function resolveImport(from: string, specifier: string): string | undefined {
  if (!specifier.startsWith('.')) return undefined;
  const base = path.resolve(path.dirname(from), specifier.replace(/\.js$/, ''));
  return [`${base}.ts`, path.join(base, 'index.ts')].find((candidate) => existsSync(candidate));
}

function factsOf(file: string): SourceFacts {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
  const inAdapters = file.startsWith(ADAPTERS);
  const facts: SourceFacts = { imports: [], callables: [], seeds: new Set(), indexValues: new Set() };
  const visit = (node: ts.Node, into: Callable | undefined): void => {
    if ((ts.isImportDeclaration(node) && !node.importClause?.isTypeOnly) || (ts.isExportDeclaration(node) && !node.isTypeOnly)) {
      const specifier = node.moduleSpecifier;
      if (specifier && ts.isStringLiteral(specifier)) {
        const resolved = resolveImport(file, specifier.text);
        if (resolved) facts.imports.push(resolved);
      }
    }
    // A callable of an adapter: its calls count only once something reached calls it by name.
    const named =
      ts.isMethodDeclaration(node) && ts.isIdentifier(node.name)
        ? { name: node.name.text, topLevelFunction: false }
        : ts.isFunctionDeclaration(node) && node.name && node.parent === source
          ? { name: node.name.text, topLevelFunction: true }
          : ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.initializer && (ts.isArrowFunction(node.initializer) || ts.isFunctionExpression(node.initializer)) && node.parent.parent.parent === source
            ? { name: node.name.text, topLevelFunction: true }
            : undefined;
    if (inAdapters && named && into === undefined) {
      const callable: Callable = { file, ...named, calls: new Set(), commands: new Set(), indexNames: new Set(), dynamicIndex: false, queries: false };
      facts.callables.push(callable);
      ts.forEachChild(node, (child) => visit(child, callable));
      return;
    }
    if (ts.isCallExpression(node)) {
      const name = calleeName(node);
      if (name) (into ? into.calls : facts.seeds).add(name);
      if (node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteral(node.arguments[0])) {
        const resolved = resolveImport(file, node.arguments[0].text);
        if (resolved) facts.imports.push(resolved);
      }
    }
    if (ts.isNewExpression(node) && ts.isIdentifier(node.expression) && node.expression.text.endsWith('Command') && into) {
      into.commands.add(node.expression.text);
      if (node.expression.text === 'QueryCommand') into.queries = true;
    }
    if (ts.isPropertyAssignment(node) && ts.isIdentifier(node.name)) {
      if (node.name.text === 'IndexName' && into) {
        const index = indexOf(node.initializer);
        if (index) into.indexNames.add(index);
        else into.dynamicIndex = true;
      }
      if (node.name.text === 'index') {
        const index = indexOf(node.initializer);
        if (index) facts.indexValues.add(index);
      }
    }
    ts.forEachChild(node, (child) => visit(child, into));
  };
  visit(source, undefined);
  return facts;
}

/** The modules a function's bundle is built from (its handler and every relative import, transitively). */
function modulesOf(entry: string): Map<string, SourceFacts> {
  const modules = new Map<string, SourceFacts>();
  const pending = [entry];
  while (pending.length > 0) {
    const file = pending.pop() as string;
    if (modules.has(file)) continue;
    const facts = factsOf(file);
    modules.set(file, facts);
    pending.push(...facts.imports);
  }
  return modules;
}

/** What the named ledger function's code can ask AWS for (see {@link CodeCalls}). */
export function codeCallsOf(name: LedgerFunctionName): CodeCalls {
  const modules = modulesOf(handlerEntry(name));
  const callables = [...modules.values()].flatMap((facts) => facts.callables);
  const called = new Set([...modules.values()].flatMap((facts) => [...facts.seeds]));
  const reached = new Set<Callable>();
  for (let grew = true; grew; ) {
    grew = false;
    for (const callable of callables) {
      if (reached.has(callable) || !called.has(callable.name)) continue;
      reached.add(callable);
      for (const call of callable.calls) called.add(call);
      grew = true;
    }
  }
  const actions = new Set<string>();
  const unmapped = new Set<string>();
  const queried = new Set<string>();
  for (const callable of reached) {
    for (const command of callable.commands) {
      const action = ACTION_OF[command];
      if (action) actions.add(action);
      else unmapped.add(command);
    }
    if (!callable.queries) continue;
    // The query's index: named here, or by a helper that builds its input (duePageQuery), in the same
    // module or one it imports (ledger-commands.ts holds the commands the table adapters send).
    const near = new Set([callable.file, ...(modules.get(callable.file)?.imports ?? [])]);
    const helpers = callables.filter((other) => near.has(other.file) && other.topLevelFunction && callable.calls.has(other.name));
    const indexes = new Set([...callable.indexNames, ...helpers.flatMap((helper) => [...helper.indexNames])]);
    if (callable.dynamicIndex) for (const index of modules.get(callable.file)?.indexValues ?? []) indexes.add(index);
    for (const helper of helpers.filter((candidate) => candidate.dynamicIndex)) for (const index of modules.get(helper.file)?.indexValues ?? []) indexes.add(index);
    if (indexes.size === 0) queried.add('table');
    for (const index of indexes) queried.add(index);
  }
  for (const command of unmapped) if (NO_ACTION_OF_ITS_OWN.has(command)) unmapped.delete(command);
  return { actions, queried, unmapped };
}
