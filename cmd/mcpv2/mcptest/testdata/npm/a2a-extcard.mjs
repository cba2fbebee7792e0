// The extended agent card of an mcpv2 node as @a2a-js/sdk 1.3.0 gets it:
// the SDK's client.getAgentCard(), which asks for the extended card
// (GetExtendedAgentCard; v0.3: agent/getAuthenticatedExtendedCard) when
// the public card says there is one. The mcptest package runs it against a
// real node and reads its "ok:" lines; any failure exits non-zero.
//
//   A2A_BASE_URL=http://127.0.0.1:PORT A2A_PEER_ID=12D3KooW… A2A_MODE=v1|v03 \
//   A2A_TOKENS=name=key,name=key node a2a-extcard.mjs
//
// For each credential of A2A_TOKENS, and for none ("anonymous"), it prints
// "ok: NAME: skill,skill,…" (the card's skill ids, sorted). In v1 mode each
// card's signature is checked, through getAgentCard's verifier hook, with
// the SDK's verifier and the key of the PeerID (the v0.3 form's signature covers its own JSON, which the SDK
// does not keep).
import { AgentCard, verifyAgentCardSignature } from '@a2a-js/sdk';
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';

const base = process.env.A2A_BASE_URL;
const peerID = process.env.A2A_PEER_ID;
const legacy = (process.env.A2A_MODE ?? 'v1') !== 'v1';
const tokens = (process.env.A2A_TOKENS ?? '').split(',').filter(Boolean).map((s) => s.split('='));

function fail(what) { console.error(`FAIL: ${what}`); process.exit(1); }
function check(cond, what) { if (!cond) fail(what); }

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
const verify = verifyAgentCardSignature(async (kid) => { check(kid === peerID, `kid ${kid} is not the PeerID`); return keyFromPeerID(kid); });

for (const [name, token] of [['anonymous', ''], ...tokens]) {
  const methods = [];
  const fetchImpl = async (input, init = {}) => {
    const headers = new Headers(init.headers);
    if (token) headers.set('Authorization', `Bearer ${token}`);
    if (String(input).includes('/.well-known/') && legacy) headers.set('A2A-Version', '0.3');
    if (typeof init.body === 'string') methods.push(JSON.parse(init.body).method);
    return fetch(input, { ...init, headers });
  };
  const resolver = new DefaultAgentCardResolver({ fetchImpl, legacyCompat: { enabled: legacy } });
  const publicCard = await resolver.resolve(base + '/');
  check(publicCard.capabilities?.extendedAgentCard === true, `${name}: the public card does not say it has an extended card`);
  const factory = new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: legacy } })], cardResolver: resolver, preferredTransports: ['JSONRPC'] });
  const client = await factory.createFromAgentCard(publicCard);
  // getAgentCard hands its verifier the card in the SDK's own object form
  // (a security scheme as {scheme: {$case, value}}), which the SDK's
  // verifier reads as JSON and so cannot canonicalize (1.3.0): the card
  // goes to it as JSON (AgentCard.toJSON), as it came on the wire.
  const card = await client.getAgentCard(undefined, legacy ? undefined : (c) => verify(AgentCard.toJSON(c)));
  const want = legacy ? 'agent/getAuthenticatedExtendedCard' : 'GetExtendedAgentCard';
  check(methods.includes(want), `${name}: the SDK did not call ${want}: ${methods}`);
  const ids = card.skills.map((s) => s.id).sort();
  console.log(`ok: ${name}: ${ids.join(',')}${legacy ? '' : ' (signature verified)'}`);
}
