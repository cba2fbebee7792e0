// An MCP client on @modelcontextprotocol/ext-tasks 0.2.2 and the MCP
// TypeScript SDK's Client (@modelcontextprotocol/client 2.3.1, both from
// the lock file), as an application uses them: it calls a slow tool as a
// task, hands the task off (keeps its reference) and drops its connection
// while it runs, then connects again, with a new client and session,
// and resumes the task by its reference to get the result. Another caller
// (MCP_OTHER_TOKEN) must not find the task. The status notifications the
// server sends for the task while the client waits are counted.
//
// MCP_ERA picks the form of the extension:
//   - legacy (the default): the Client's default 2025-11-25 handshake and
//     the experimental tasks of that revision (capabilities.tasks,
//     params.task, tasks/result, notifications/tasks/status on the
//     session);
//   - modern: the Client pinned to 2026-07-28 (versionNegotiation), and
//     the extension io.modelcontextprotocol/tasks, which ext-tasks speaks
//     only through the two adapter options it documents for it
//     ("Adapters and schemas"): rawDispatch, the host's own request path
//     (here one HTTP POST per request, as the 2026-07-28 streamable HTTP
//     has it: the SDK Client's codecs refuse a task where a tool result
//     belongs), and v2RequestFraming, the values the Client was built with,
//     which ext-tasks stamps into each task request's _meta. Status
//     notifications (notifications/tasks) come on a subscriptions/listen
//     stream the host opens with the Client's listen({taskIds}).
//
// Environment: MCP_URL (the node's /mcp), MCP_TOKEN (an API key),
// MCP_OTHER_TOKEN, MCP_TOOL (the slow tool), MCP_ERA. Prints "ok: …" lines;
// exits non-zero on the first failure.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";

const url = new URL(process.env.MCP_URL);
const tool = process.env.MCP_TOOL || "nap";
const endpointId = "mcpv2-node";
const modern = process.env.MCP_ERA === "modern";
const protocolVersion = "2026-07-28";
const tasksExtension = "io.modelcontextprotocol/tasks";
const clientInfo = { name: "ext-tasks-check", version: "1.0.0" };
const clientCapabilities = modern ? { extensions: { [tasksExtension]: {} } } : {};
const statusMethod = modern ? "notifications/tasks" : "notifications/tasks/status";

// rawDispatch sends one framed JSON-RPC request as its own POST (the
// 2026-07-28 streamable HTTP: no session; the version and method in
// headers) and reads its response, JSON or an SSE stream, whose
// notifications go to onNotification.
function rawDispatcher(token, onNotification) {
  let next = 0;
  return async (request, options = {}) => {
    const id = `raw-${++next}`;
    const body = { ...request, jsonrpc: "2.0", id };
    const headers = {
      Authorization: `Bearer ${token}`,
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "Mcp-Protocol-Version": protocolVersion,
      "Mcp-Method": body.method,
      ...(options.context?.headers ?? {}),
    };
    if (body.method === "tools/call") headers["Mcp-Name"] = body.params.name;
    const res = await fetch(url, { method: "POST", headers, body: JSON.stringify(body), signal: options.signal });
    const type = res.headers.get("content-type") || "";
    // A JSON-RPC error may come with an HTTP error status (4xx): its body
    // is still the response.
    if (!res.ok && !type.startsWith("application/json")) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
    const messages = [];
    if (type.startsWith("text/event-stream")) {
      for (const block of (await res.text()).split(/\n\n/)) {
        const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
        if (data) messages.push(JSON.parse(data));
      }
    } else {
      messages.push(await res.json());
    }
    for (const m of messages) {
      if (m.id === id) return m.error ? { kind: "error", error: m.error } : { kind: "result", result: m.result };
      if (m.method) onNotification(m);
    }
    throw new Error(`no response to ${body.method} ${id}`);
  };
}

let notified = 0; // status notifications seen
const notifiedMessages = [];
async function connect(token) {
  const client = new Client(clientInfo, {
    capabilities: clientCapabilities,
    ...(modern ? { versionNegotiation: { mode: { pin: protocolVersion } } } : {}),
  });
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  // Count the status notifications (ext-tasks keeps the handler it finds
  // and calls it first).
  client.fallbackNotificationHandler = async (n) => {
    if (n.method === statusMethod) {
      notified++;
      if (n.params?.statusMessage) notifiedMessages.push(n.params.statusMessage);
    }
  };
  const framing = modern
    ? {
        rawDispatch: rawDispatcher(token, (n) => client.fallbackNotificationHandler?.(n)),
        v2RequestFraming: { protocolVersion, clientInfo, clientCapabilities },
      }
    : {};
  const session = createTaskSessionFromClient(client, { endpointId, onError: (e) => console.log("background: " + e), ...framing });
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
if (!modern) {
  // tasks/list is of the 2025-11-25 form only (the extension has none).
  const listed = await first.session.listTasks();
  if (!listed.tasks.some((t) => t.taskId === taskId)) fail("tasks/list lacks the task: " + JSON.stringify(listed));
  console.log("ok: tasks/list has it");
}

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
  console.log("ok: another caller: " + (err && err.message) + (err?.cause ? " (" + (err.cause.message ?? err.cause) + ")" : ""));
}
await other.transport.close();

// 4. Reconnect as the first caller, with a new client, and get the result.
const second = await connect(process.env.MCP_TOKEN);
let listening;
if (modern) {
  listening = await second.client.listen({ taskIds: [taskId] });
  console.log("ok: listening " + JSON.stringify(listening.honoredFilter));
}
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
console.log(`ok: status notifications ${notified} ${JSON.stringify(notifiedMessages)}`);
await listening?.close();
await second.session.close();
await second.transport.close();
