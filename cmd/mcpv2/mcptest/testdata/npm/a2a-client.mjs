// An A2A client of an mcpv2 node, on @a2a-js/sdk 1.3.0 (pinned by
// package-lock.json): the mcptest package runs it against a real node and
// reads its "ok:" lines; any failure exits non-zero with the reason.
//
//   A2A_BASE_URL=http://127.0.0.1:PORT A2A_TOKEN=<credential, or empty> A2A_PEER_ID=12D3KooW… \
//   A2A_MODE=v1|v03|noheader [A2A_TRANSPORT=jsonrpc|rest|grpc] [A2A_DENIED=skill] [A2A_PROBE=1] \
//   node a2a-client.mjs
//
// A2A_TOKEN is what a user gives the client: empty, only the base URL (no
// Authorization header at all; the node serves it as an anonymous caller,
// who owns no task to list), or an API key (mcpv2 key add) sent as
// Authorization: Bearer by the fetch the SDK is given. A2A_DENIED names a
// skill the credential is not granted: its message must be rejected with
// -32009. A2A_PROBE only checks that the credential is refused on its first
// call (a revoked or expired key), and prints the HTTP status it got.
//
// v1: the SDK's own A2A 1.0. v03: its v0.3 compatibility layer (the card
// fetched in v0.3 form, message/send…). noheader: v0.3 with no A2A-Version
// header at all, which the node must answer as 0.3. In every mode the
// node's v1.0 card is verified with the SDK's verifier, the key taken from
// the PeerID alone.
//
// A2A_TRANSPORT picks the binding the client speaks (default jsonrpc):
// the SDK's own transport factory for it, and only that one, so a card
// that does not name the binding fails the run instead of falling back to
// another. jsonrpc is JsonRpcTransportFactory (interface "JSONRPC"), rest
// RestTransportFactory ("HTTP+JSON"), grpc GrpcTransportFactory
// ('@a2a-js/sdk/client/grpc', "GRPC"); in the v0.3 modes each factory's
// legacyCompat picks the SDK's v0.3 transport (LegacyJsonRpcTransport,
// LegacyRestTransport, LegacyGrpcTransport) for the card's v0.3 interface.
// What the run checks is the same over every binding; only how it
// connects differs. Over HTTP (jsonrpc, rest) the credential and
// Last-Event-ID are headers the fetch adds; over gRPC they are call
// metadata (authorization: Bearer …, last-event-id) that a client
// interceptor adds to the call's service parameters, which the SDK's gRPC
// transports send as metadata. Through an edge the card says where the
// peer is: /peers/{PeerID} in its HTTP interfaces' URLs, and for gRPC the
// interface's tenant (v1.0 requests carry it; v0.3 has no tenant field, so
// the v1.0 card's gRPC tenant goes out as a2a-tenant metadata).
import { Role, TaskState, verifyAgentCardSignature } from '@a2a-js/sdk';
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory, RestTransportFactory } from '@a2a-js/sdk/client';
import { TaskNotCancelableError, TaskNotFoundError, A2A_ERROR_CODE } from '@a2a-js/sdk/errors';

const base = process.env.A2A_BASE_URL;
const token = process.env.A2A_TOKEN;
const peerID = process.env.A2A_PEER_ID;
const mode = process.env.A2A_MODE ?? 'v1';
const legacy = mode !== 'v1';
const denied = process.env.A2A_DENIED ?? '';
const probe = Boolean(process.env.A2A_PROBE);
const transport = process.env.A2A_TRANSPORT || 'jsonrpc';
const binding = { jsonrpc: 'JSONRPC', rest: 'HTTP+JSON', grpc: 'GRPC' }[transport];

function ok(what) { console.log(`ok: ${what}`); }
function fail(what) { console.error(`FAIL: ${what}`); process.exit(1); }
function check(cond, what) { if (!cond) fail(what); }
check(binding, `A2A_TRANSPORT=${transport}: not jsonrpc, rest or grpc`);

// Headers on every request: the credential (if any) as a bearer token; in
// v0.3 modes the card is asked for in v0.3 form, and noheader drops
// A2A-Version from calls.
// lastEventID, when set, goes out once as Last-Event-ID (a resubscription).
let lastEventID = '';
const seen = [];
const statuses = []; // the HTTP status of each response
const fetchImpl = async (input, init = {}) => {
  const headers = new Headers(init.headers);
  if (token) headers.set('Authorization', `Bearer ${token}`);
  const isCard = String(input).includes('/.well-known/');
  if (isCard && legacy) headers.set('A2A-Version', '0.3');
  if (!isCard && mode === 'noheader') headers.delete('A2A-Version');
  if (!isCard && lastEventID) { headers.set('Last-Event-ID', lastEventID); lastEventID = ''; }
  seen.push(headers.get('A2A-Version') ?? '(none)');
  const r = await fetch(input, { ...init, headers });
  statuses.push(r.status);
  return r;
};

// The Ed25519 key of a PeerID (12D3KooW…): base58btc of an identity
// multihash of the protobuf public key; the last 32 bytes are the key.
function keyFromPeerID(id) {
  const alphabet = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
  let n = 0n;
  for (const ch of id) { const v = alphabet.indexOf(ch); if (v < 0) throw new Error('not base58'); n = n * 58n + BigInt(v); }
  const bytes = [];
  while (n > 0n) { bytes.unshift(Number(n % 256n)); n /= 256n; }
  for (const ch of id) { if (ch !== '1') break; bytes.unshift(0); }
  const b = Buffer.from(bytes);
  check(b.length === 38 && b[0] === 0x00 && b[2] === 0x08 && b[3] === 0x01, `PeerID ${id} holds no Ed25519 key`);
  return { kty: 'OKP', crv: 'Ed25519', x: b.subarray(6).toString('base64url') };
}

const text = (t) => ({ content: { $case: 'text', value: t }, filename: '', mediaType: '', metadata: undefined });
const data = (d) => ({ content: { $case: 'data', value: d }, filename: '', mediaType: 'application/json', metadata: undefined });
const message = (parts, taskId = '') => ({ messageId: crypto.randomUUID(), role: Role.ROLE_USER, parts, taskId, contextId: '', metadata: undefined, extensions: [], referenceTaskIds: [] });
const stateOf = (t) => t?.status?.state;
const TERMINAL = new Set([TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_REJECTED]);
// The JSON-RPC code of an error: JSON-RPC carries it; REST and gRPC carry
// the same error as a reason (google.rpc.ErrorInfo) that the SDK turns into
// the same error class, whose code is the one JSON-RPC would have sent.
const codeOf = (e) => e?.envelopeCode ?? e?.cause?.envelopeCode ??
  (e instanceof TaskNotCancelableError ? A2A_ERROR_CODE.TASK_NOT_CANCELABLE : e instanceof TaskNotFoundError ? A2A_ERROR_CODE.TASK_NOT_FOUND : e?.code);

// 1. The card, and its signature by the node's key.
const cardResp = await fetch(new URL('.well-known/agent-card.json', base + '/'), { headers: { 'A2A-Version': '1.0' } });
check(cardResp.ok, `the v1.0 card: HTTP ${cardResp.status} ${await cardResp.clone().text()}`);
const v1card = await cardResp.json();
await verifyAgentCardSignature(async (kid) => { check(kid === peerID, `kid ${kid} is not the PeerID`); return keyFromPeerID(kid); })(v1card);
ok('v1.0 card signature verified with the key of the PeerID');
const forged = { ...v1card, name: v1card.name + ' (forged)' };
let refused = false;
try { await verifyAgentCardSignature(async (kid) => keyFromPeerID(kid))(forged); } catch { refused = true; }
check(refused, 'a forged card verified');
ok('a forged card is refused');

// gRPC has no headers and no fetch: what the fetch adds over HTTP goes on
// each call as metadata, through the SDK's client interceptor (the
// service parameters it leaves in the call's options are what the gRPC
// transports send as metadata). v0.3 gRPC has no tenant field: the v1.0
// card's gRPC tenant (the peer behind an edge) goes as a2a-tenant.
const legacyTenant = (v1card.supportedInterfaces ?? []).find((i) => i.protocolBinding?.toUpperCase() === 'GRPC' && i.tenant)?.tenant ?? '';
const grpcMetadata = {
  async before(args) {
    const sp = args.options.serviceParameters;
    if (token) sp.authorization = `Bearer ${token}`;
    if (legacy && legacyTenant) sp['a2a-tenant'] = legacyTenant;
    if (mode === 'noheader') delete sp['A2A-Version'];
    if (lastEventID) { sp['last-event-id'] = lastEventID; lastEventID = ''; }
    seen.push(sp['A2A-Version'] ?? '(none)');
  },
  async after() {},
};

async function transportFactory() {
  const legacyCompat = { enabled: legacy };
  switch (transport) {
    case 'rest': return new RestTransportFactory({ fetchImpl, legacyCompat });
    case 'grpc': {
      const { GrpcTransportFactory } = await import('@a2a-js/sdk/client/grpc');
      return new GrpcTransportFactory({ legacyCompat });
    }
    default: return new JsonRpcTransportFactory({ fetchImpl, legacyCompat });
  }
}

let tenant = ''; // the tenant the client's calls carry (gRPC through an edge)
async function newClient() {
  const resolver = new DefaultAgentCardResolver({ fetchImpl, legacyCompat: { enabled: legacy } });
  const card = await resolver.resolve(base + '/');
  const ifaces = card.supportedInterfaces ?? [];
  const multiaddrs = ifaces.filter((i) => i.url.startsWith('/')).length; // the mesh binding's, not shown
  check(ifaces.some((i) => i.protocolBinding?.toUpperCase() === binding),
    `the ${legacy ? 'v0.3' : 'v1.0'} card of ${base} names no ${binding} interface; it names: ${ifaces.filter((i) => !i.url.startsWith('/')).map((i) => `${i.protocolBinding} ${i.protocolVersion} ${i.url}${i.tenant ? ` tenant ${i.tenant}` : ''}`).join('; ')} (and ${multiaddrs} libp2p)`);
  const factory = new ClientFactory({
    transports: [await transportFactory()], cardResolver: resolver, preferredTransports: [binding],
    clientConfig: transport === 'grpc' ? { interceptors: [grpcMetadata] } : undefined,
  });
  const c = await factory.createFromAgentCard(card);
  tenant = c.transport.defaultTenant ?? (transport === 'grpc' && legacy ? legacyTenant : '');
  const want = legacy ? '0.3' : '1.0';
  check(c.transport.protocolName.toUpperCase() === binding && c.protocolVersion.startsWith(want), `the client speaks ${c.transport.protocolName} ${c.protocolVersion}, not ${binding} ${want}`);
  return [card, c];
}

// A2A_PROBE: the credential must be refused on its first call.
if (probe) {
  let err;
  try {
    const [, c] = await newClient();
    const r = await c.sendMessage({ message: message([data({ skill: 'ping' })]) });
    fail(`a call with this credential was served: ${JSON.stringify(r)}`);
  } catch (e) { err = e; }
  const status = transport === 'grpc' ? `gRPC status ${err?.status ?? err?.cause?.code}` : `HTTP ${statuses.at(-1)}`;
  ok(`refused: ${status}, ${err?.constructor?.name} ${codeOf(err)}: ${err?.message}`);
  process.exit(0);
}

const [card, client] = await newClient();
ok(`client for ${card.name} (${mode}) over ${client.transport.protocolName} ${client.protocolVersion}${tenant ? ` tenant ${tenant}` : ''}`);

// 2. A data part runs a skill; text goes to ask.
let res = await client.sendMessage({ message: message([data({ skill: 'ping', arguments: { payload: 'a2a' } })]) });
check(!('messageId' in res) && stateOf(res) === TaskState.TASK_STATE_COMPLETED, `ping task state ${stateOf(res)}`);
check(JSON.stringify(res.artifacts).includes('"pong":true'), `ping artifact ${JSON.stringify(res.artifacts)}`);
const pingTask = res.id;
ok('sendMessage with a data part: ping completed');
res = await client.sendMessage({ message: message([text('What is mcpv2?')]) });
check(stateOf(res) === TaskState.TASK_STATE_COMPLETED && JSON.stringify(res.artifacts).includes('local responder'), `ask ${JSON.stringify(res)}`);
ok('sendMessage with text: ask answered');
if (denied) {
  // A skill the credential is not granted: the SDK gets the task back
  // rejected, the node's -32009 in its status message.
  res = await client.sendMessage({ message: message([data({ skill: denied, arguments: { filename: 'denied.txt', content: 'x' } })]) });
  const why = JSON.stringify(res?.status?.message ?? res);
  check(stateOf(res) === TaskState.TASK_STATE_REJECTED && why.includes('-32009'), `${denied}, not granted: ${JSON.stringify(res)}`);
  ok(`a skill not granted (${denied}): rejected, -32009`);
}

// 3. A streamed task to its terminal state.
const events = [];
for await (const ev of client.sendMessageStream({ message: message([data({ skill: 'ping' })]) })) events.push(ev);
const lastEv = events.at(-1);
const lastState = lastEv?.payload?.value?.status?.state ?? stateOf(lastEv?.payload?.value);
check(events[0]?.payload?.$case === 'task' && lastState === TaskState.TASK_STATE_COMPLETED, `stream ${JSON.stringify(events)}`);
ok(`a streamed task: ${events.map((e) => e.payload.$case).join(',')}`);

// 4. getTask, listTasks (v1.0 has it), cancel of a finished task, an unknown task.
const got = await client.getTask({ id: pingTask });
check(got.id === pingTask && stateOf(got) === TaskState.TASK_STATE_COMPLETED, `getTask ${JSON.stringify(got)}`);
ok('getTask');
if (!legacy) {
  const l = await client.listTasks({ tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 10, pageToken: '' });
  if (token) {
    check(l.tasks.length >= 3 && l.tasks.some((t) => t.id === pingTask), `listTasks ${JSON.stringify(l)}`);
    ok(`listTasks: ${l.tasks.length} of ${l.totalSize}`);
  } else {
    // A caller without a credential owns nothing to list (the identity rule).
    check(l.tasks.length === 0 && !l.totalSize, `listTasks without a credential ${JSON.stringify(l)}`);
    ok('listTasks without a credential: empty');
  }
}
let code;
try { await client.cancelTask({ id: pingTask }); } catch (e) { code = codeOf(e); }
check(code === -32002, `cancel of a finished task: ${code}`);
ok('cancelTask of a finished task: -32002');
code = undefined;
try { await client.getTask({ id: 'no-such-task' }); } catch (e) { code = codeOf(e); }
check(code === -32001, `an unknown task: ${code}`);
ok('getTask of an unknown task: -32001');

// 5. Resubscribe to a running task after dropping its stream: the stream
// is dropped after its first event (the task), the task goes on (working)
// while nobody listens, and the resubscription, naming the last event seen
// (Last-Event-ID), gets that missed event and then the rest, live.
const ac = new AbortController();
const first = [];
try {
  for await (const ev of client.sendMessageStream({ message: message([data({ skill: 'nap' })]) }, { signal: ac.signal })) {
    first.push(ev);
    ac.abort();
  }
} catch { /* aborted */ }
// (What the transport had read before the abort took effect is dropped:
// the client went away after it had handled the task.)
check(first[0]?.payload?.$case === 'task', `the first stream gave ${first.map((e) => e.payload.$case)}`);
const napTask = first[0].payload.value.id;
await new Promise((r) => setTimeout(r, 300)); // the working event goes out meanwhile
const seen1 = Number(first[0].payload.value?.metadata?.['mcpv2/seq'] ?? 1);
lastEventID = String(seen1);
const rest = [];
for await (const ev of client.resubscribeTask({ id: napTask })) rest.push(ev);
const kinds = rest.map((e) => e.payload.$case);
const missed = rest[0]?.payload?.value?.status?.state;
const final = rest.at(-1)?.payload?.value?.status?.state;
check(missed === TaskState.TASK_STATE_WORKING, `the missed event: ${JSON.stringify(rest[0])}`);
check(kinds.includes('artifactUpdate') && final === TaskState.TASK_STATE_COMPLETED, `resubscribed ${kinds} final ${final}`);
ok(`resubscribe after a dropped stream: ${kinds.join(',')} (the working event missed while away, then the rest)`);

const versions = [...new Set(seen)].join(',');
if (mode === 'noheader') check(!seen.slice(3).some((v) => v !== '(none)'), `calls sent A2A-Version: ${versions}`);
ok(`A2A-Version headers sent: ${versions}`);
process.exit(0); // a gRPC channel would keep the process alive
