#!/usr/bin/env bash
# examples/orchestrate/run.sh: one request split over four agents, and a
# call that fails over when its agent dies mid-call.
#
#   examples/orchestrate/run.sh               # build, start the mesh, run both parts
#   MCPV2_BIN=./mcpv2 examples/orchestrate/run.sh
#   SLOW_MS=4000 examples/orchestrate/run.sh  # how long database_query takes
#
# On loopback, with nothing but this machine: a bootstrap node and four
# agent nodes whose skills are the seed's demo tools (demotools/, through
# custom skills with a "command" handler, agents/*.json):
#
#   math      calculator, file_reader
#   weather   weather, web_search
#   data      database_query, file_reader     database_query answers after
#   research  database_query, web_search      SLOW_MS (2 s), so that a kill
#                                             lands in the middle of a call
#
# 1. `mcpv2 orchestrate "what is 7 times 6, what is the weather in Tokyo, and
#    how many engineers are in Platform"` runs one subtask on each of three
#    agents (math, weather, and data or research) and aggregates the answer.
# 2. Failover: `mcpv2 orchestrate --json "how many engineers are in
#    Platform"`; the agent whose demotools is running the query is killed
#    (SIGKILL) mid-call, and the subtask must complete on the other one,
#    at its second attempt. checkrun/ reads the JSON lines and says PASS or
#    FAIL; the script exits non-zero on any FAIL.
# 3. The seed's front agent (agents/front.json): the five tools itself, the
#    seed's two resources (resources.json), an edge (--port), anonymous
#    callers granted the tools, the resources and the seed's REST
#    operations (front-policy.json), and text A2A tasks orchestrated. The
#    script calls four tools with the seed's argument names.
#
# Linux only (command skills are), Go to build. Everything lives in a temp
# dir that the exit trap removes, after stopping every process it started.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN_GIVEN=${MCPV2_BIN:-}
# The script passes every setting as a flag: a MCPV2_* variable of the
# caller's shell (a secret, a data dir) must not change what it shows.
while read -r v; do unset "$v"; done < <(compgen -e | grep '^MCPV2_' || true)

SECRET=${SECRET:-orchestrate-demo-secret}
SLOW_MS=${SLOW_MS:-2000}
REQUEST="what is 7 times 6, what is the weather in Tokyo, and how many engineers are in Platform"
FAILOVER_REQUEST="how many engineers are in Platform"

[ "$(uname -s)" = Linux ] || { echo "run.sh: command skills run on Linux only" >&2; exit 1; }
for tool in go pgrep timeout; do
	if [ "$tool" = go ] && [ -n "$BIN_GIVEN" ]; then continue; fi
	command -v "$tool" >/dev/null || { echo "run.sh: $tool is not installed" >&2; exit 1; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/mcpv2-orchestrate.XXXXXX")
declare -A PID # node name → PID
BG=()          # other background processes (the failover run)
cleanup() {
	local p
	for p in "${BG[@]}" "${PID[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${BG[@]}" "${PID[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$WORK/bin"
echo "== building mcpv2, demotools and checkrun (in $WORK/bin)"
if [ -n "$BIN_GIVEN" ]; then
	cp "$BIN_GIVEN" "$WORK/bin/mcpv2"
else
	(cd "$ROOT" && go build -o "$WORK/bin/mcpv2" ./cmd/mcpv2)
fi
(cd "$ROOT" && go build -o "$WORK/bin/demotools" ./examples/orchestrate/demotools &&
	go build -o "$WORK/bin/checkrun" ./examples/orchestrate/checkrun)
BIN=$WORK/bin/mcpv2

# start NAME [VAR=VALUE…] -- NODE_FLAGS…: a node in the background; its
# banner in $WORK/NAME.out, its log in $WORK/NAME.log. The skills files
# name their program "demotools", found on the node's PATH.
start() {
	local name=$1 envs=()
	shift
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	# env execs the node in place: $! is the node's PID.
	env PATH="$WORK/bin:$PATH" "${envs[@]}" "$BIN" node --data-dir "$WORK/$name" \
		--listen /ip4/127.0.0.1/tcp/0 --no-mdns --name "$name" "$@" \
		>"$WORK/$name.out" 2>"$WORK/$name.log" &
	PID[$name]=$!
	for _ in $(seq 300); do
		grep -q '^MCPV2_DATA_DIR=' "$WORK/$name.out" 2>/dev/null && return 0
		kill -0 "${PID[$name]}" 2>/dev/null || break
		sleep 0.1
	done
	echo "run.sh: node $name did not start:" >&2
	cat "$WORK/$name.log" >&2
	exit 1
}
banner() { sed -n "s/^$2=//p" "$WORK/$1.out" | head -1; }

echo "== bootstrap node (DHT server, no skills)"
start boot --
BOOT=$(banner boot MCPV2_P2P_ADDRESS)
echo "   $BOOT"

# client ARGS…: a client command with its own identity, joined through boot.
client() { "$BIN" "$@" --data-dir "$WORK/client" --bootstrap "$BOOT" --secret "$SECRET"; }

echo "== four agents (--skills examples/orchestrate/agents/NAME.json)"
declare -A PEER
for name in math weather data research; do
	slow=0
	case $name in data | research) slow=$SLOW_MS ;; esac
	start "$name" DEMOTOOLS_FILES="$HERE/files" DEMOTOOLS_SLEEP_MS="$slow" -- \
		--skills "$HERE/agents/$name.json" --bootstrap "$BOOT" --secret "$SECRET"
	PEER[$name]=$(banner "$name" MCPV2_PEER_ID)
	printf '   %-9s %s  %s\n' "$name" "${PEER[$name]}" \
		"$(sed -n 's/.*"name": "\([a-z_]*\)".*/\1/p' "$HERE/agents/$name.json" | paste -sd, -)"
done

echo "== waiting until the DHT lists every agent under each of its skills"
declare -A OFFERS=(
	[calculator]="math" [weather]="weather" [database_query]="data research"
	[web_search]="weather research" [file_reader]="math data"
)
for skill in calculator weather database_query web_search file_reader; do
	for try in $(seq 60); do
		found=$(client find "$skill" --json 2>/dev/null || true)
		missing=""
		for a in ${OFFERS[$skill]}; do
			grep -q "${PEER[$a]}" <<<"$found" || missing="$missing $a"
		done
		[ -z "$missing" ] && break
		if [ "$try" = 60 ]; then
			echo "run.sh: find $skill still misses:$missing" >&2
			exit 1
		fi
		sleep 0.5
	done
	printf '   %-15s %s\n' "$skill" "${OFFERS[$skill]}"
done

echo
echo "== mcpv2 find database_query"
client find database_query
echo
echo "== mcpv2 call <math> calculator '{\"operation\":\"multiply\",\"a\":7,\"b\":6}'"
client call "${PEER[math]}" calculator '{"operation":"multiply","a":7,"b":6}'
echo "== mcpv2 call <math> calculator '{\"operation\":\"divide\",\"a\":7,\"b\":0}'   (a tool's error)"
client call "${PEER[math]}" calculator '{"operation":"divide","a":7,"b":0}' 2>&1 || true

FAILED=0
echo
echo "== mcpv2 orchestrate \"$REQUEST\""
if client orchestrate "$REQUEST"; then
	echo "PASS  mcpv2 orchestrate exited 0"
else
	echo "FAIL  mcpv2 orchestrate exited non-zero"
	FAILED=1
fi
echo
echo "== the same with --json, checked: three subtasks on three different agents"
client orchestrate "$REQUEST" --json >"$WORK/run.jsonl" 2>"$WORK/run.err" || true
"$WORK/bin/checkrun" --agents 3 --expect 42 --expect Tokyo \
	--result 'calculator:"result":42' --result 'weather:"city":"Tokyo"' --result 'database_query:"count":4' \
	<"$WORK/run.jsonl" || {
	FAILED=1
	sed 's/^/   stderr: /' "$WORK/run.err" | tail -20
}

echo
echo "== failover: mcpv2 orchestrate --json \"$FAILOVER_REQUEST\""
echo "   (database_query takes ${SLOW_MS} ms on data and on research; the one running it is killed)"
timeout 120 "$BIN" orchestrate "$FAILOVER_REQUEST" --json \
	--data-dir "$WORK/client" --bootstrap "$BOOT" --secret "$SECRET" \
	>"$WORK/failover.jsonl" 2>"$WORK/failover.err" &
ORCH=$!
BG+=("$ORCH")
# The agent being called is the one whose node has a demotools child.
killed=""
for _ in $(seq 600); do
	for a in data research; do
		if pgrep -P "${PID[$a]}" >/dev/null; then
			killed=$a
			break 2
		fi
	done
	kill -0 "$ORCH" 2>/dev/null || break
	sleep 0.05
done
if [ -z "$killed" ]; then
	echo "FAIL  no agent ran database_query while the orchestration ran"
	wait "$ORCH" || true
	sed 's/^/   /' "$WORK/failover.jsonl" "$WORK/failover.err"
	exit 1
fi
survivor=research
[ "$killed" = research ] && survivor=data
echo "   $killed (${PEER[$killed]}) is running the query: kill -9 ${PID[$killed]}"
kill -9 "${PID[$killed]}"
wait "${PID[$killed]}" 2>/dev/null || true
unset "PID[$killed]"
orch_status=0
wait "$ORCH" || orch_status=$?
echo "   mcpv2 orchestrate exited $orch_status; its events:"
grep '"type":"event"' "$WORK/failover.jsonl" | sed 's/^/   /' || true
"$WORK/bin/checkrun" --skill database_query --killed "${PEER[$killed]}" --survivor "${PEER[$survivor]}" \
	<"$WORK/failover.jsonl" || {
	FAILED=1
	sed 's/^/   stderr: /' "$WORK/failover.err" | tail -20
}
if [ "$orch_status" = 0 ]; then
	echo "PASS  mcpv2 orchestrate exited 0 after the failover"
else
	echo "FAIL  mcpv2 orchestrate exited $orch_status after the failover"
	FAILED=1
fi

echo
echo "== the seed's front agent: its five tools and two resources itself, an edge, anonymous callers granted"
start front DEMOTOOLS_FILES="$HERE/files" DEMOTOOLS_SLEEP_MS=0 -- \
	--skills "$HERE/agents/front.json" --resources "$HERE/resources.json" --policy "$HERE/front-policy.json" \
	--a2a-text orchestrate --port 0 --public-ip 127.0.0.1 --bootstrap "$BOOT" --secret "$SECRET"
FRONT=http://127.0.0.1:$(banner front MCPV2_BOUND_PORT)
echo "   $FRONT  (the seed's curls: $FRONT/api/v1/…)"
# Anonymous calls with the seed's argument names, as its curls send them.
front_call() {
	local want=$1
	shift
	local out
	if out=$("$BIN" call "$FRONT" "$@" --data-dir "$WORK/anon" 2>&1) && grep -q -- "$want" <<<"$out"; then
		echo "PASS  $1 $2"
	else
		echo "FAIL  $1 $2: $out"
		FAILED=1
	fi
}
front_call '"result":42' calculator '{"operation":"multiply","a":7,"b":6}'
front_call '"city":"Tokyo"' weather '{"city":"Tokyo"}'
front_call '"count":6' database_query '{"query_type":"filter","filter_field":"department","filter_value":"Platform"}'
front_call '"results"' web_search '{"query":"Model Context Protocol","num_results":5}'

echo
if [ "$FAILED" = 0 ]; then
	echo "== all checks passed"
else
	echo "== some checks FAILED" >&2
fi
exit "$FAILED"
