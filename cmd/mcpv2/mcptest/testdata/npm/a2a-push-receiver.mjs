// A push-notification webhook of an A2A client, on @a2a-js/sdk 1.3.0
// (pinned by package-lock.json) and jose (the SDK's own dependency): the
// mcptest package runs it against a real mcpv2 node and reads its "ok:"
// lines; any failure exits non-zero with the reason.
//
//   A2A_BASE_URL=http://127.0.0.1:PORT A2A_TOKEN=<credential> A2A_MODE=v1|v03 node a2a-push-receiver.mjs
//
// It serves a webhook on 127.0.0.1 (the node must allow loopback:
// --outbound-allow 127.0.0.0/8), finds in the node's v1.0 card that it
// sends push notifications and where its JWKS is (the capability extension
// urn:mcpv2:a2a:push:v1), and sends, with the SDK's client, a message whose
// configuration names the webhook (v1: taskPushNotificationConfig; v03:
// the SDK's v0.3 compatibility layer, pushNotificationConfig). Every
// notification must carry a JWT that verifies against the node's JWKS
// (jose: EdDSA, issuer, audience the webhook's URL, fresh, with the body's
// SHA-256) and the client's token; v1 bodies are read with the SDK's own
// StreamResponse.fromJSON, v0.3 bodies are the task. It prints the states
// the webhook heard, in order, then runs the four config operations
// through the SDK's client on the task.
import { createServer } from 'node:http';
import { createHash } from 'node:crypto';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { Role, StreamResponse, taskStateToJSON } from '@a2a-js/sdk';
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { V1PushNotificationSerializer } from '@a2a-js/sdk/server';
import { isDeepStrictEqual } from 'node:util';

const base = process.env.A2A_BASE_URL;
const token = process.env.A2A_TOKEN ?? '';
const mode = process.env.A2A_MODE ?? 'v1';
const legacy = mode !== 'v1';

function ok(what) { console.log(`ok: ${what}`); }
function fail(what) { console.error(`FAIL: ${what}`); process.exit(1); }
function check(cond, what) { if (!cond) fail(what); }
setTimeout(() => fail('timed out'), 60_000).unref();

// 1. The card says push notifications, and where the key is.
const card = await (await fetch(new URL('.well-known/agent-card.json', base + '/'), { headers: { 'A2A-Version': '1.0' } })).json();
check(card.capabilities?.pushNotifications === true, `card capabilities ${JSON.stringify(card.capabilities)}`);
const ext = (card.capabilities.extensions ?? []).find((e) => e.uri === 'urn:mcpv2:a2a:push:v1');
check(ext?.params?.jwksUrl && ext?.params?.issuer, `no push extension in ${JSON.stringify(card.capabilities)}`);
const jwks = createRemoteJWKSet(new URL(ext.params.jwksUrl));
ok(`card: pushNotifications, JWKS at ${new URL(ext.params.jwksUrl).pathname}`);

// 2. The webhook: verify, parse, record.
const clientToken = `client-token-${crypto.randomUUID()}`;
const heard = []; // [{kind, state, taskId}]
const jtis = new Set();
let hookURL = '';
let done; const ended = new Promise((r) => { done = r; });
const TERMINAL = ['completed', 'failed', 'canceled', 'rejected', 'COMPLETED', 'FAILED', 'CANCELED', 'REJECTED'];
const server = createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const body = Buffer.concat(chunks);
  try {
    check(req.method === 'POST', `a ${req.method} to the webhook`);
    check(req.headers['x-a2a-notification-token'] === clientToken, `token header ${req.headers['x-a2a-notification-token']}`);
    const auth = req.headers.authorization ?? '';
    check(auth.startsWith('Bearer '), `Authorization ${auth}`);
    const { payload, protectedHeader } = await jwtVerify(auth.slice(7), jwks, {
      issuer: ext.params.issuer, audience: hookURL, algorithms: ['EdDSA'], maxTokenAge: '5m', requiredClaims: ['jti', 'iat', 'exp'],
    });
    check(protectedHeader.kid === ext.params.issuer, `kid ${protectedHeader.kid}`);
    check(payload.request_body_sha256 === createHash('sha256').update(body).digest('hex'), 'the body is not the one the JWT signs');
    check(!jtis.has(payload.jti), `jti ${payload.jti} twice`);
    jtis.add(payload.jti);
    const json = JSON.parse(body.toString('utf8'));
    let kind, state, taskId;
    if (!legacy) {
      check(req.headers['content-type'] === 'application/a2a+json', `content type ${req.headers['content-type']}`);
      const sr = StreamResponse.fromJSON(json);
      // What the SDK's own sender (DefaultPushNotificationSender, its v1.0
      // serializer) would POST for this event: the same JSON and type.
      const own = new V1PushNotificationSerializer().serialize(sr);
      check(own.contentType === req.headers['content-type'], `the SDK's sender would send ${own.contentType}`);
      check(isDeepStrictEqual(JSON.parse(own.body), json), `the SDK's sender would send ${own.body}, not ${body}`);
      kind = sr.payload?.$case;
      const v = sr.payload?.value;
      state = kind === 'task' || kind === 'statusUpdate' ? taskStateToJSON(v.status.state) : '';
      taskId = kind === 'task' ? v.id : v?.taskId;
    } else {
      check(json.kind === 'task', `a v0.3 notification that is not a task: ${body}`);
      kind = 'task'; state = json.status?.state; taskId = json.id;
    }
    check(payload.taskId === taskId, `taskId claim ${payload.taskId}, body ${taskId}`);
    heard.push({ kind, state, taskId });
    res.writeHead(200).end();
    if (TERMINAL.some((s) => state.endsWith(s))) done();
  } catch (e) {
    res.writeHead(401).end();
    fail(`notification ${body}: ${e?.message ?? e}`);
  }
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
hookURL = `http://127.0.0.1:${server.address().port}/hook`;

// 3. The SDK's client sends a message whose configuration names the webhook.
const fetchImpl = async (input, init = {}) => {
  const headers = new Headers(init.headers);
  if (token) headers.set('Authorization', `Bearer ${token}`);
  if (String(input).includes('/.well-known/') && legacy) headers.set('A2A-Version', '0.3');
  return fetch(input, { ...init, headers });
};
const resolver = new DefaultAgentCardResolver({ fetchImpl, legacyCompat: { enabled: legacy } });
const resolved = await resolver.resolve(base + '/');
const factory = new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: legacy } })], cardResolver: resolver, preferredTransports: ['JSONRPC'] });
const client = await factory.createFromAgentCard(resolved);
const data = (d) => ({ content: { $case: 'data', value: d }, filename: '', mediaType: 'application/json', metadata: undefined });
const message = (parts) => ({ messageId: crypto.randomUUID(), role: Role.ROLE_USER, parts, taskId: '', contextId: '', metadata: undefined, extensions: [], referenceTaskIds: [] });
const pushConfig = (id) => ({ tenant: '', id, taskId: '', url: hookURL, token: clientToken, authentication: undefined });
const task = await client.sendMessage({
  message: message([data({ skill: 'ping', arguments: { payload: 'push' } })]),
  configuration: { acceptedOutputModes: [], taskPushNotificationConfig: pushConfig(''), historyLength: undefined, returnImmediately: false },
});
check(task?.id, `sendMessage: ${JSON.stringify(task)}`);
await ended;
check(heard.every((h) => h.taskId === task.id), `notifications of another task: ${JSON.stringify(heard)}`);
// The state changes: v0.3 sends the whole task with each event (an
// artifact's too), so a state may come twice in a row.
const states = heard.filter((h) => h.state).map((h) => h.state.replace(/^TASK_STATE_/, '').toLowerCase())
  .filter((s, i, all) => i === 0 || all[i - 1] !== s);
ok(`every notification's JWT verified against the JWKS (${heard.length})`);
ok(`push states: ${states.join(',')}`);
ok(`push kinds: ${heard.map((h) => h.kind).join(',')}`);

// 4. The four config operations through the SDK's client.
const created = await client.createTaskPushNotificationConfig({ ...pushConfig('second'), taskId: task.id });
check(created.id === 'second' && created.url === hookURL, `create: ${JSON.stringify(created)}`);
const got = await client.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'second' });
check(got.url === hookURL && got.token === clientToken, `get: ${JSON.stringify(got)}`);
const list = await client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' });
check(list.configs.length === 2 && list.configs.some((c) => c.id === 'second'), `list: ${JSON.stringify(list)}`);
await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'second' });
const after = await client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' });
check(after.configs.length === 1, `list after delete: ${JSON.stringify(after)}`);
ok('config operations: create, get, list, delete');
server.close();
process.exit(0);
