// An MCP client on @modelcontextprotocol/ext-tasks 0.2.2 and the MCP
// TypeScript SDK's Client (@modelcontextprotocol/client 2.3.1, both from
// the lock file), as an application uses them: it calls a slow tool as a
// task, hands the task off (keeps its reference) and drops its connection
// while the task runs, then connects again, with a new client and session,
// and resumes the task by its reference to get the result. Another caller
// (MCP_OTHER_TOKEN) must not find the task.
//
// Environment: MCP_URL (the node's /mcp), MCP_TOKEN (an API key),
// MCP_OTHER_TOKEN, MCP_TOOL (the slow tool). Prints "ok: …" lines; exits
// non-zero on the first failure.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";

const url = new URL(process.env.MCP_URL);
const tool = process.env.MCP_TOOL || "nap";
const endpointId = "mcpv2-node";

async function connect(token) {
  const client = new Client({ name: "ext-tasks-check", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  const session = createTaskSessionFromClient(client, { endpointId, onError: (e) => console.log("background: " + e) });
  return { client, transport, session };
}

function fail(msg) {
  console.log("FAIL: " + msg);
  process.exit(1);
}

// 1. Start the call as a task.
const first = await connect(process.env.MCP_TOKEN);
console.log("ok: capabilities " + JSON.stringify(first.session.capabilities));
const execution = await first.session.callTool(tool, {}, { task: { preference: "require" } });
if (execution.kind !== "task") fail("the call did not run as a task: " + execution.kind);
const taskId = execution.handle.taskId;
console.log("ok: task started " + taskId);
const listed = await first.session.listTasks();
if (!listed.tasks.some((t) => t.taskId === taskId)) fail("tasks/list lacks the task: " + JSON.stringify(listed));
console.log("ok: tasks/list has it");

// 2. Hand it off (keep the reference) and drop the connection while it runs.
let reference;
await execution.handoff((ref) => {
  reference = ref;
});
await first.transport.close();
console.log("ok: dropped the connection, reference " + JSON.stringify(reference));

// 3. Another caller does not find it.
const other = await connect(process.env.MCP_OTHER_TOKEN);
try {
  const e = await other.session.resumeTask(reference);
  const { outcome } = await e.settle();
  fail("another caller got the task: " + JSON.stringify(outcome));
} catch (err) {
  console.log("ok: another caller: " + (err && err.message));
}
await other.transport.close();

// 4. Reconnect as the first caller, with a new client, and get the result.
const second = await connect(process.env.MCP_TOKEN);
const resumed = await second.session.resumeTask(reference);
const seen = [];
const { outcome } = await resumed.settle({
  onEvent: (ev) => {
    if (ev.type === "task") seen.push(ev.task.status);
  },
});
const result = resultFromTaskOutcome(outcome);
console.log("ok: statuses " + seen.join(","));
console.log("ok: result " + JSON.stringify(result.structuredContent ?? result.content));
await second.session.close();
await second.transport.close();
