// Cuts GitHub's published OpenAPI description (@octokit/openapi, pinned
// here, generated/api.github.com.json: 13 MB, more than Stoplight Prism
// starts on in reasonable time and memory) down to the operations the
// fake GitHub and oncely's GitHub adapter use, with every component they
// reference (unchanged but for the rewrite below). Usage:
// node cut-openapi.mjs OUT.json
import { readFileSync, writeFileSync } from "node:fs";

// The operations kept: "method path" as the description spells them.
const operations = [
  "post /repos/{owner}/{repo}/issues",
  "get /repos/{owner}/{repo}/issues",
  "get /repos/{owner}/{repo}/issues/{issue_number}",
  "post /repos/{owner}/{repo}/issues/{issue_number}/comments",
  "get /repos/{owner}/{repo}/issues/{issue_number}/comments",
  "get /repos/{owner}/{repo}/issues/comments",
  "get /search/issues",
  "get /rate_limit",
];

const out = process.argv[2];
if (!out) {
  console.error("usage: node cut-openapi.mjs OUT.json");
  process.exit(2);
}
const source = new URL("./node_modules/@octokit/openapi/generated/api.github.com.json", import.meta.url);
const full = JSON.parse(readFileSync(source, "utf8"));

const paths = {};
for (const op of operations) {
  const [method, path] = op.split(" ");
  const item = full.paths[path];
  if (!item || !item[method]) {
    console.error(`the description has no ${op}`);
    process.exit(1);
  }
  paths[path] ??= item.parameters ? { parameters: item.parameters } : {};
  paths[path][method] = item[method];
}

// Keep every component reachable from the kept operations.
const components = {};
const seen = new Set();
const walk = (node) => {
  if (Array.isArray(node)) return node.forEach(walk);
  if (!node || typeof node !== "object") return;
  for (const [k, v] of Object.entries(node)) {
    if (k === "$ref" && typeof v === "string" && v.startsWith("#/components/") && !seen.has(v)) {
      seen.add(v);
      const [, , kind, name] = v.split("/");
      const target = full.components?.[kind]?.[name];
      if (target === undefined) {
        console.error(`unresolved ${v}`);
        process.exit(1);
      }
      (components[kind] ??= {})[name] = target;
      walk(target);
    } else {
      walk(v);
    }
  }
};
walk(paths);

// Prism compiles schemas with Ajv, which refuses OpenAPI 3.0's nullable
// on a schema without a type (GitHub writes "oneOf: [string, integer],
// nullable: true"), and then validates nothing against the operation. Such
// a schema is rewritten to the equivalent anyOf of its alternatives, each
// nullable (GitHub's alternatives are disjoint types, so anyOf accepts
// what oneOf does). Any other untyped nullable is an error here.
let rewritten = 0;
const nullable = (node) => {
  if (Array.isArray(node)) return node.forEach(nullable);
  if (!node || typeof node !== "object") return;
  if (node.nullable === true && node.type === undefined) {
    const alts = node.oneOf ?? node.anyOf;
    if (!alts || alts.some((a) => a.type === undefined)) {
      console.error(`an untyped nullable schema the cut cannot rewrite: ${JSON.stringify(node).slice(0, 200)}`);
      process.exit(1);
    }
    delete node.oneOf;
    delete node.nullable;
    node.anyOf = alts.map((a) => ({ ...a, nullable: true }));
    rewritten++;
  }
  Object.values(node).forEach(nullable);
};
nullable(paths);
nullable(components);

const { openapi, info, servers, tags, externalDocs } = full;
writeFileSync(out, JSON.stringify({ openapi, info, servers, tags, externalDocs, paths, components }, null, 1));
console.log(`${operations.length} operations, ${seen.size} components, ${rewritten} untyped nullable schemas rewritten, version ${info.version}`);
