// A real TypeScript MCP client for the gateway's tests. It spawns the
// command given as arguments (the gateway) over stdio, or connects to the
// streamable-HTTP URL given as "--url URL", with the environment's
// variables plus the plan's "env", then runs the steps of the plan read as
// JSON from standard input, in order, printing one JSON line per call:
//
//	{"env": {...}, "steps": [
//	  {"name": "tool", "arguments": {...}, "_meta": {...}, "progress": true},
//	  {"parallel": [{"name": ...}, ...]},
//	  {"list": "tools" | "prompts" | "resources" | "resourceTemplates"},
//	  {"complete": {"ref": {...}, "argument": {...}}}
//	]}
//
// With "--url", the plan's "headers" go with every request, and its
// "oauth" ({"clientId", "clientSecret", "scope"}) makes the SDK's
// client-credentials provider authenticate (RFC 9728 discovery from the
// server's 401, the issuer's token endpoint). A connection that fails
// prints {"connectError": {"code", "message"}} and nothing else.
//
// A step {"notifications": [methods]} waits until every method named has
// come and prints the methods of every notification that came.
// A call's "idempotencyKey" goes into its params (MCP SEP-3182); a step
// {"capabilities": true} prints the server's capabilities as sent.
// A call's "cancelWhen" ({"file", "contains"}) aborts it (the SDK sends
// notifications/cancelled) once the file contains the text; a step
// {"touch": path} creates a file, {"waitFor": {"file", "contains"}} waits
// for a file's text. With "reportErrors", a last line {"errors": [...]}
// lists what the SDK reported through onerror (a response to a request it
// no longer awaits, for one).
//
// A call prints its result, or {"error": {"code", "message"}} when the
// client throws (an outputSchema violation, a JSON-RPC error), with
// "progress": the notifications it got when it asked for them. A list
// or a completion prints the server's raw result, or {"error": ...}. The
// client answers sampling requests
// with the text "forty-two".
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ClientCredentialsProvider } from "@modelcontextprotocol/sdk/client/auth-extensions.js";
import { CreateMessageRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { existsSync, readFileSync, writeFileSync } from "node:fs";

let [command, ...args] = process.argv.slice(2);
let input = "";
for await (const chunk of process.stdin) input += chunk;
const plan = JSON.parse(input);

const transport = command === "--url"
  ? new StreamableHTTPClientTransport(new URL(args[0]), {
      requestInit: { headers: plan.headers ?? {} },
      authProvider: plan.oauth ? new ClientCredentialsProvider(plan.oauth) : undefined,
    })
  : new StdioClientTransport({ command, args, env: { ...process.env, ...(plan.env ?? {}) }, stderr: "inherit" });
const client = new Client({ name: "oncely-ts-test-client", version: "1.0.0" }, { capabilities: { sampling: {} } });
client.setRequestHandler(CreateMessageRequestSchema, async () => ({
  role: "assistant", model: "test-model", content: { type: "text", text: "forty-two" },
}));
// The initialize result as it came on the wire (the SDK's types drop the
// capabilities they do not know).
let initResult;
{
  let handler;
  Object.defineProperty(transport, "onmessage", {
    configurable: true,
    get: () => handler,
    set: (fn) => {
      handler = fn && ((msg, extra) => {
        if (initResult === undefined && msg.result?.capabilities) initResult = msg.result;
        fn(msg, extra);
      });
    },
  });
}
// The notifications the client got, in order, by method.
const notifications = [];
client.fallbackNotificationHandler = async (n) => { notifications.push(n.method); };
const errors = [];
client.onerror = (e) => errors.push(String(e?.message ?? e));

// waitFor polls a file until it contains a text, for at most two minutes.
async function waitFor({ file, contains }) {
  const deadline = Date.now() + 120000;
  while (!(existsSync(file) && readFileSync(file, "utf8").includes(contains))) {
    if (Date.now() > deadline) throw new Error(`${file} never contained ${contains}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

try {
  await client.connect(transport);
} catch (e) {
  process.stdout.write(JSON.stringify({ connectError: { code: e.code, message: e.message } }) + "\n");
  process.exit(0);
}
// The last result as it came on the wire, before the SDK parsed it.
let lastResult;
const onmessage = transport.onmessage;
transport.onmessage = (msg, extra) => {
  if ("result" in msg) lastResult = msg.result;
  onmessage?.(msg, extra);
};

async function call(step) {
  const progress = [];
  const options = step.progress ? { onprogress: (p) => progress.push(p) } : {};
  if (step.cancelWhen) {
    const controller = new AbortController();
    options.signal = controller.signal;
    waitFor(step.cancelWhen).then(() => controller.abort("the test cancels it"));
  }
  let out;
  try {
    const params = { name: step.name, arguments: step.arguments };
    if (step._meta) params._meta = step._meta;
    if (step.idempotencyKey !== undefined) params.idempotencyKey = step.idempotencyKey;
    out = await client.callTool(params, undefined, options);
  } catch (e) {
    out = { error: { code: e.code, message: e.message } };
  }
  if (step.progress) out.progress = progress;
  return out;
}

try {
  for (const step of plan.steps) {
    if (step.notifications) {
      // Wait (two minutes at most) until every method named has come.
      const deadline = Date.now() + 120000;
      while (!step.notifications.every((m) => notifications.includes(m)) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 10));
      }
      process.stdout.write(JSON.stringify({ notifications: [...new Set(notifications)].sort() }) + "\n");
    } else if (step.capabilities) {
      process.stdout.write(JSON.stringify(initResult.capabilities) + "\n");
    } else if (step.touch) {
      writeFileSync(step.touch, "");
    } else if (step.waitFor) {
      await waitFor(step.waitFor);
    } else if (step.parallel) {
      for (const r of await Promise.all(step.parallel.map(call))) process.stdout.write(JSON.stringify(r) + "\n");
    } else if (step.list || step.complete) {
      const list = { tools: "listTools", prompts: "listPrompts", resources: "listResources", resourceTemplates: "listResourceTemplates" }[step.list];
      let out;
      try {
        await (step.complete ? client.complete(step.complete) : client[list]());
        out = lastResult;
      } catch (e) {
        out = { error: { code: e.code, message: e.message } };
      }
      process.stdout.write(JSON.stringify(out) + "\n");
    } else {
      process.stdout.write(JSON.stringify(await call(step)) + "\n");
    }
  }
  if (plan.reportErrors) process.stdout.write(JSON.stringify({ errors }) + "\n");
} finally {
  await client.close();
}
