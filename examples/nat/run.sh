#!/usr/bin/env bash
# examples/nat/run.sh: two mcpv2 agents behind two NAT routers find and call
# each other; the only public peer is a relay node, their bootstrap.
#
#   sudo examples/nat/run.sh                 # endpoint-independent NAT, TCP
#   sudo TRANSPORT=quic examples/nat/run.sh  # the same over QUIC
#   sudo SYMMETRIC=1 examples/nat/run.sh     # symmetric NAT: the relay carries the calls
#
# It builds the topology of the NAT lab test (cmd/mcpv2/natlab/natlab_test.go,
# docs/natlab.md) in network namespaces, with the same commands:
#
#   relay 11.77.0.10/16 ─┐
#   natA wan 11.77.0.21 ─┼─ inet (a bridge: the "internet", 11.77.0.0/16)
#   natB wan 11.77.0.22 ─┘
#   natA lan 10.78.1.1/24 ── peerA 10.78.1.2: alice (skill greet, tag demo)
#   natB lan 10.78.2.1/24 ── peerB 10.78.2.2: bob   (skill chess, tag games)
#
# Needs root, iproute2 and nftables (apt-get install -y iproute2 nftables),
# and Go to build mcpv2 (or MCPV2_BIN=/path/to/mcpv2). Everything stays in
# the namespaces, and the exit trap removes them, whatever happens.
set -euo pipefail

TRANSPORT=${TRANSPORT:-tcp}
SYMMETRIC=${SYMMETRIC:-0}
case $TRANSPORT in
tcp) KIND=/tcp/ ;;
quic) KIND=/quic-v1 ;;
*) echo "TRANSPORT must be tcp or quic" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (network namespaces, nftables)" >&2; exit 1; }
for tool in ip nft; do
	command -v $tool >/dev/null || { echo "run.sh: $tool is not installed (apt-get install -y iproute2 nftables)" >&2; exit 1; }
done

P=m2ex-$$ # namespace prefix: unique per run
ROLES=(inet relay natA natB peerA peerB)
WORK=$(mktemp -d /tmp/mcpv2-nat-example.XXXXXX)
PIDS=()
ns() { echo "$P-$1"; }
nsx() { local n; n=$(ns "$1"); shift; ip netns exec "$n" "$@"; }

cleanup() {
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
	for r in "${ROLES[@]}"; do
		# anything still running in a namespace of ours (a client cut short)
		for pid in $(ip netns pids "$(ns "$r")" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
		ip netns del "$(ns "$r")" 2>/dev/null || true
	done
	rm -rf "$WORK"
}
trap cleanup EXIT

if [ -n "${MCPV2_BIN:-}" ]; then
	BIN=$MCPV2_BIN
else
	echo "== building mcpv2"
	BIN=$WORK/mcpv2
	(cd "$(dirname "$0")/../.." && go build -o "$BIN" ./cmd/mcpv2)
fi

echo "== the lab: namespaces $P-*, $([ "$SYMMETRIC" = 1 ] && echo "symmetric NAT (masquerade random)" || echo "endpoint-independent NAT (masquerade)")"
for r in "${ROLES[@]}"; do
	ip netns add "$(ns "$r")"
	ip -n "$(ns "$r")" link set dev lo up
done
# The internet: a bridge, one veth pair per public host.
ip -n "$(ns inet)" link add br0 type bridge
ip -n "$(ns inet)" link set dev br0 up
plug() { # plug ROLE DEV PORT ADDR
	ip link add "$2" netns "$(ns "$1")" type veth peer name "$3" netns "$(ns inet)"
	ip -n "$(ns inet)" link set dev "$3" master br0 up
	ip -n "$(ns "$1")" addr add "$4/16" dev "$2"
	ip -n "$(ns "$1")" link set dev "$2" up
}
plug relay eth0 to-relay 11.77.0.10
plug natA wan to-natA 11.77.0.21
plug natB wan to-natB 11.77.0.22
MASQ=masquerade
[ "$SYMMETRIC" = 1 ] && MASQ="masquerade random"
router() { # router ROUTER PEER GATEWAY PEER_ADDR
	ip link add lan netns "$(ns "$1")" type veth peer name eth0 netns "$(ns "$2")"
	ip -n "$(ns "$1")" addr add "$3/24" dev lan
	ip -n "$(ns "$1")" link set dev lan up
	ip -n "$(ns "$2")" addr add "$4/24" dev eth0
	ip -n "$(ns "$2")" link set dev eth0 up
	ip -n "$(ns "$2")" route add default via "$3"
	echo 1 | nsx "$1" tee /proc/sys/net/ipv4/ip_forward >/dev/null
	# Masquerade lan → wan; drop anything new from the wan, to the router
	# (else TCP gets a RST and QUIC loses its port) and through it.
	nsx "$1" nft -f - <<EOF
table ip natlab {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		oifname "wan" $MASQ
	}
	chain input {
		type filter hook input priority filter; policy accept;
		iifname "wan" ct state new drop
	}
	chain forward {
		type filter hook forward priority filter; policy drop;
		ct state established,related accept
		iifname "lan" oifname "wan" accept
	}
}
EOF
}
router natA peerA 10.78.1.1 10.78.1.2
router natB peerB 10.78.2.1 10.78.2.2

# start ROLE NAME ARGS...: a node in the background; its banner in $WORK/NAME.out.
start() {
	local role=$1 name=$2
	shift 2
	# Not through a function: $! must be ip's PID, and ip execs the node in place.
	ip netns exec "$(ns "$role")" "$BIN" node --data-dir "$WORK/$name" "$@" >"$WORK/$name.out" 2>"$WORK/$name.log" &
	PIDS+=($!)
	for _ in $(seq 100); do
		grep -q '^MCPV2_DATA_DIR=' "$WORK/$name.out" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "$name did not start:" >&2
	cat "$WORK/$name.log" >&2
	exit 1
}
banner() { sed -n "s/^$2=//p" "$WORK/$1.out"; }

echo "== relay node (11.77.0.10): circuit relay, AutoNAT server, DHT server, and an HTTP edge on :8080"
start relay relay --relay-service \
	--listen /ip4/11.77.0.10/tcp/4001 --listen /ip4/11.77.0.10/udp/4001/quic-v1 \
	--port 8080 --public-ip 11.77.0.10 --secret lab-secret
RELAY=$(banner relay MCPV2_P2P_ADDRESS | grep -F -- "$KIND" | head -1)
echo "   $RELAY"

cat >"$WORK/bob.json" <<'EOF'
{"skills":[{"name":"chess","description":"Answers a chess move","tags":["games"],
 "input_schema":{"type":"object","properties":{"move":{"type":"string"}},"required":["move"]},
 "handler":{"type":"template","template":"I answer {{.move}} with e5"}}]}
EOF
cat >"$WORK/alice.json" <<'EOF'
{"skills":[{"name":"greet","description":"Greets someone","tags":["demo"],
 "input_schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]},
 "handler":{"type":"template","template":"Hello, {{.name}}, from alice"}}]}
EOF
# Both agents as a user starts one: only the bootstrap peer (behind NAT,
# they see that at once and reserve a relay slot), and a shared --secret
# that grants each other every skill.
AGENT=(--bootstrap "$RELAY" --secret lab-secret)
echo "== bob in peerB (10.78.2.2, behind natB), alice in peerA (10.78.1.2, behind natA)"
start peerB bob --name bob --skills "$WORK/bob.json" "${AGENT[@]}"
start peerA alice --name alice --skills "$WORK/alice.json" "${AGENT[@]}"
BOB=$(banner bob MCPV2_PEER_ID)
ALICE=$(banner alice MCPV2_PEER_ID)
echo "   bob   $BOB"
echo "   alice $ALICE"

# client ROLE NAME ARGS...: a client command in ROLE's namespace, with its own identity.
client() {
	local role=$1 name=$2
	shift 2
	nsx "$role" "$BIN" "$@" --data-dir "$WORK/$name" --bootstrap "$RELAY" --secret lab-secret
}

echo "== waiting until the agents are found with a relay address"
for _ in $(seq 60); do
	if client peerA alice-cli find games --json 2>/dev/null | grep -q p2p-circuit &&
		client peerB bob-cli find demo --json 2>/dev/null | grep -q p2p-circuit; then
		break
	fi
	sleep 0.5
done
echo
echo "== from peerA: mcpv2 find games"
client peerA alice-cli find games
echo
echo "== from peerA: mcpv2 call <bob> chess '{\"move\":\"e4\"}'"
client peerA alice-cli call "$BOB" chess '{"move":"e4"}'
echo
echo "== from peerA: mcpv2 send (16 MiB) <bob>"
head -c $((16 << 20)) /dev/urandom >"$WORK/payload.bin"
client peerA alice-cli send "$WORK/payload.bin" "$BOB" --name payload.bin --quiet
want=$(sha256sum "$WORK/payload.bin" | cut -d' ' -f1)
got=$(sha256sum "$WORK/bob/files/payload.bin" | cut -d' ' -f1)
echo "   sha256 sent $want"
echo "   sha256 at bob $got $([ "$want" = "$got" ] && echo "(match)" || echo "(MISMATCH)")"
echo
echo "== from peerB: mcpv2 find demo, then call <alice> greet"
client peerB bob-cli find demo
client peerB bob-cli call "$ALICE" greet '{"name":"bob"}'
echo
echo "== an A2A client on the internet (curl, in the relay's namespace) uses bob, behind NAT, through the relay's edge"
TOKEN=$(banner relay MCPV2_DEMO_SESSION_ADDRESS | sed 's/.*sessionId=//')
EDGE=http://11.77.0.10:8080/peers/$BOB
echo "   GET $EDGE/.well-known/agent-card.json (bob's card, signed by bob, naming the edge's URL)"
nsx relay curl -s -H 'A2A-Version: 1.0' "$EDGE/.well-known/agent-card.json" | head -c 240
echo "…"
echo "   POST $EDGE/a2a SendMessage {skill: chess, arguments: {move: d4}}"
A2A=$(nsx relay curl -s -X POST "$EDGE/a2a" -H "Authorization: Bearer $TOKEN" -H 'A2A-Version: 1.0' \
	-d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"data":{"skill":"chess","arguments":{"move":"d4"}}}]}}}')
echo "$A2A" | head -c 400
echo "…"
echo "$A2A" | grep -q TASK_STATE_COMPLETED || { echo "the A2A task did not complete" >&2; exit 1; }
echo
echo "== how each call reached its agent (the agents' audit logs: remote address)"
for a in bob alice; do
	grep -h '"method":"\(tools/call\|blob\)"' "$WORK/$a/audit.jsonl" |
		sed -n 's/.*"method":"\([^"]*\)".*"remote":"\([^"]*\)".*/   '"$a"' \1 from \2/p'
done
echo "   (/p2p-circuit: through the relay; otherwise a hole-punched direct connection)"
[ "$want" = "$got" ]
