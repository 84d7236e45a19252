// Evaluates the CRD's CEL rules (x-kubernetes-validations) with a real CEL
// implementation (@bufbuild/cel), as kube-apiserver would on create: the test
// API server (tests/support) checks the schema but does not run CEL.
//
//   node cel_rules_test.mjs --cel-sh scripts/cel.sh --crd CRD.yaml
//        --must-pass DIR_OR_FILE... --broken FILE
//
// Each rule is evaluated at its place in openAPIV3Schema with `self` bound to
// the object there; a rule whose place is absent from the document is not
// evaluated (kube-apiserver does the same). Values are typed from the schema
// the way Kubernetes types them: integer (and the number form of
// x-kubernetes-int-or-string) as CEL int, number as double, objects as maps,
// so has(), % and comparisons mean what they mean in the API server.
// Kubernetes' CEL libraries (quantity, url, ...) and transition rules
// (oldSelf) are not provided: a rule that needs them fails to evaluate, and
// the test fails until this script learns them.
//
// Passes when every rule compiles, every --must-pass TrainJob passes every
// rule, every --broken TrainJob fails exactly the rule its annotation
// cel-test.pacer.dev/breaks names ("<path>: <start of the message>"), and
// every rule has at least one broken TrainJob (so a new rule needs a case).
// Exit codes: 0 pass, 1 fail, 77 skip (node packages cannot be installed).
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const breaksAnnotation = "cel-test.pacer.dev/breaks";

function parseArgs(argv) {
  const args = { mustPass: [], broken: [] };
  for (let i = 0; i < argv.length; i++) {
    const value = argv[i + 1];
    switch (argv[i]) {
      case "--cel-sh": args.celSh = value; break;
      case "--crd": args.crd = value; break;
      case "--must-pass": args.mustPass.push(value); break;
      case "--broken": args.broken.push(value); break;
      default: throw new Error(`unknown argument ${argv[i]}`);
    }
    i++;
  }
  if (!args.celSh || !args.crd || args.mustPass.length === 0 || args.broken.length === 0) {
    throw new Error("usage: --cel-sh FILE --crd FILE --must-pass PATH... --broken FILE...");
  }
  return args;
}

const args = parseArgs(process.argv.slice(2));

// The packages: installed (or found) by scripts/cel.sh; without them the test
// cannot run, which is a skip, not a failure.
let celDir;
try {
  celDir = execFileSync(args.celSh, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
} catch (e) {
  console.log(`SKIP: @bufbuild/cel cannot be installed here (${String(e.stderr || e.message).trim()})`);
  process.exit(77);
}
const require = createRequire(path.join(celDir, "package.json"));
const { parse, plan, celEnv, isCelError } = require("@bufbuild/cel");
const YAML = require("yaml");

function readDocuments(file) {
  return YAML.parseAllDocuments(fs.readFileSync(file, "utf8")).map((doc, i) => {
    if (doc.errors.length > 0) throw new Error(`${file} document ${i + 1}: ${doc.errors[0].message}`);
    return doc.toJS();
  });
}

function yamlFiles(p) {
  if (!fs.statSync(p).isDirectory()) return [p];
  return fs.readdirSync(p).filter((f) => /\.ya?ml$/.test(f)).sort().map((f) => path.join(p, f));
}

// --- the rules -------------------------------------------------------------

const crd = readDocuments(args.crd)[0];
const version = crd.spec.versions.find((v) => v.storage) ?? crd.spec.versions[0];
const rootSchema = version.schema.openAPIV3Schema;
const env = celEnv();

// Every rule with its place: `spec.model`, `spec.checkpoint[]` (each item),
// `spec.labels{}` (each map value).
const rules = [];
const failures = [];
(function collect(schema, where) {
  if (!schema || typeof schema !== "object") return;
  (schema["x-kubernetes-validations"] ?? []).forEach((rule, index) => {
    const entry = { where, index, source: rule.rule, message: rule.message ?? rule.messageExpression ?? rule.rule };
    entry.name = `${where || "<root>"}: ${entry.message}`;
    try {
      entry.program = plan(env, parse(rule.rule));
    } catch (e) {
      failures.push(`rule ${entry.name} does not compile: ${e.message}`);
    }
    rules.push(entry);
  });
  for (const [key, sub] of Object.entries(schema.properties ?? {})) collect(sub, where ? `${where}.${key}` : key);
  if (schema.items) collect(schema.items, `${where}[]`);
  if (typeof schema.additionalProperties === "object") collect(schema.additionalProperties, `${where}{}`);
  for (const key of ["allOf", "anyOf", "oneOf"]) (schema[key] ?? []).forEach((sub) => collect(sub, where));
})(rootSchema, "");

// --- typing values as Kubernetes does ---------------------------------------

// A value with no schema (x-kubernetes-preserve-unknown-fields): JSON's whole
// numbers are int64 in Kubernetes.
function untyped(value) {
  if (Array.isArray(value)) return value.map(untyped);
  if (value !== null && typeof value === "object") {
    return new Map(Object.entries(value).map(([k, v]) => [k, untyped(v)]));
  }
  if (typeof value === "number" && Number.isInteger(value)) return BigInt(value);
  return value;
}

function typed(schema, value) {
  if (value === null || value === undefined || !schema) return untyped(value);
  if (schema["x-kubernetes-int-or-string"]) return typeof value === "number" ? BigInt(value) : value;
  switch (schema.type) {
    case "integer":
      if (!Number.isInteger(value)) throw new Error(`${JSON.stringify(value)} is not an integer`);
      return BigInt(value);
    case "number":
      return Number(value);
    case "array":
      return value.map((item) => typed(schema.items, item));
    case "object": {
      const map = new Map();
      for (const [key, v] of Object.entries(value)) {
        const sub = schema.properties?.[key] ??
          (typeof schema.additionalProperties === "object" ? schema.additionalProperties : undefined);
        map.set(key, typed(sub, v));
      }
      return map;
    }
    default:
      return value;
  }
}

// --- evaluation ------------------------------------------------------------

// Evaluates every rule whose place is present in `doc`; returns
// [{rule, ok, error}] in schema order.
function evaluate(doc) {
  const results = [];
  (function visit(schema, value, where) {
    if (!schema || value === null || value === undefined) return;
    for (const rule of rules.filter((r) => r.where === where && r.program)) {
      let outcome;
      try {
        outcome = rule.program({ self: typed(schema, value) });
      } catch (e) {
        outcome = { message: e.message, error: true };
      }
      if (isCelError(outcome) || outcome?.error) {
        results.push({ rule, ok: false, error: outcome.message });
      } else if (typeof outcome !== "boolean") {
        results.push({ rule, ok: false, error: `evaluated to ${String(outcome)}, not a bool` });
      } else {
        results.push({ rule, ok: outcome });
      }
    }
    if (Array.isArray(value)) {
      value.forEach((item) => visit(schema.items, item, `${where}[]`));
    } else if (typeof value === "object") {
      for (const [key, v] of Object.entries(value)) {
        if (schema.properties?.[key]) visit(schema.properties[key], v, where ? `${where}.${key}` : key);
        else if (typeof schema.additionalProperties === "object") visit(schema.additionalProperties, v, `${where}{}`);
      }
    }
  })(rootSchema, doc, "");
  return results;
}

const isTrainJob = (doc) => doc?.kind === crd.spec.names.kind && doc?.apiVersion?.startsWith(`${crd.spec.group}/`);
let documents = 0;
let checksPassed = 0;

// Every example (and boundary case) passes every rule that applies to it.
for (const p of args.mustPass) {
  for (const file of yamlFiles(p)) {
    for (const doc of readDocuments(file).filter(isTrainJob)) {
      documents++;
      const label = `${path.basename(file)} ${doc.metadata?.name}`;
      for (const r of evaluate(doc)) {
        if (r.ok) checksPassed++;
        else failures.push(`${label}: refused by rule ${r.rule.name}${r.error ? ` (error: ${r.error})` : ""}`);
      }
      console.log(`pass   ${label}`);
    }
  }
}

// Every broken TrainJob fails exactly the rule it names, and no other.
const broken = new Set();
for (const file of args.broken) {
  for (const doc of readDocuments(file)) {
    documents++;
    const label = `${path.basename(file)} ${doc.metadata?.name}`;
    const target = doc.metadata?.annotations?.[breaksAnnotation];
    const matching = rules.filter((r) => target && r.name.startsWith(target));
    if (matching.length !== 1) {
      failures.push(`${label}: annotation ${breaksAnnotation}="${target}" names ${matching.length} rules, not 1`);
      continue;
    }
    const [rule] = matching;
    const results = evaluate(doc);
    const own = results.find((r) => r.rule === rule);
    if (!own) {
      failures.push(`${label}: rule ${rule.name} was not evaluated (${rule.where} is absent)`);
    } else if (own.ok) {
      failures.push(`${label}: passes rule ${rule.name}, which it should fail`);
    } else if (own.error) {
      failures.push(`${label}: rule ${rule.name} did not evaluate: ${own.error}`);
    } else {
      checksPassed++;
      broken.add(rule);
      console.log(`refuse ${label}: ${rule.where}: ${rule.message}`);
    }
    for (const r of results.filter((r) => r.rule !== rule)) {
      if (r.ok) checksPassed++;
      else failures.push(`${label}: also refused by rule ${r.rule.name}${r.error ? ` (error: ${r.error})` : ""}`);
    }
  }
}

for (const rule of rules) {
  if (!broken.has(rule)) failures.push(`rule ${rule.name} has no broken TrainJob that it refuses`);
}

console.log(`${rules.length} rules, ${documents} documents, ${checksPassed} checks passed`);
if (failures.length > 0) {
  for (const f of failures) console.log(`FAIL ${f}`);
  console.log(`${failures.length} ${failures.length === 1 ? "check" : "checks"} failed`);
  process.exit(1);
}
