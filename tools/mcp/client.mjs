// A real TypeScript MCP client for the gateway's tests: it spawns the
// command given as arguments (the gateway) over stdio, makes the tool calls
// read as JSON from standard input ({"calls": [{"name", "arguments",
// "_meta"}]}), in order, and prints one JSON line per result.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
let input = "";
for await (const chunk of process.stdin) input += chunk;
const plan = JSON.parse(input);

const transport = new StdioClientTransport({ command, args, stderr: "inherit" });
const client = new Client({ name: "idemkit-ts-test-client", version: "1.0.0" });
await client.connect(transport);
try {
  for (const call of plan.calls) {
    const result = await client.callTool({ name: call.name, arguments: call.arguments, _meta: call._meta });
    process.stdout.write(JSON.stringify(result) + "\n");
  }
} finally {
  await client.close();
}
