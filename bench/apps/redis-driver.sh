#!/usr/bin/env bash
# bench/apps/redis.sh's run: start redis-server on a free 127.0.0.1 port
# with APP_ENV (the allocator's environment), load, benchmark, digest, shut
# down. Every client call is bounded in time, and the server is killed if
# it outlives the script.
#   redis-driver.sh RESP-FILE KEYS GETS      (in the run's work directory)
set -euo pipefail
resp=$1 keys=$2 gets=$3
cli() { timeout 120 redis-cli -h 127.0.0.1 -p "$port" "$@"; }
# A port that looks free may still be taken by the time the server binds
# it (another run's client, a socket in TIME_WAIT): a server that exits
# before it answers is started again on the next port.
server=""
trap '[ -z "$server" ] || kill "$server" 2>/dev/null || true' EXIT
first=$((20000 + $$ % 20000))
for port in $(seq "$first" $((first + 40))); do
	(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue
	# shellcheck disable=SC2086 # APP_ENV is a list of NAME=VALUE words
	env ${APP_ENV:-} redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$PWD" --logfile "$PWD/redis.log" --enable-debug-command local \
		--protected-mode yes >/dev/null &
	server=$!
	for _ in $(seq 200); do
		[ "$(cli ping 2>/dev/null)" = PONG ] && break 2
		kill -0 "$server" 2>/dev/null || break
		sleep 0.05
	done
	kill "$server" 2>/dev/null || true
	wait "$server" 2>/dev/null || true
	server=""
done
[ -n "$server" ] || { echo "redis-driver: no port a server could listen on" >&2; exit 1; }
cli --pipe <"$resp" >pipe.txt
timeout 120 redis-benchmark -h 127.0.0.1 -p "$port" -c 8 -P 16 -n "$gets" -r "$keys" \
	-t get -q >bench.txt
# The keyspace, the digest of every key and value, and the large values'
# lengths: identical under every allocator.
{
	cli dbsize
	cli debug digest
	cli strlen key:000000019999
} >digest.txt
cli info memory | grep -E '^(used_memory|mem_allocator):' >memory.txt || true
cli shutdown nosave >/dev/null 2>&1 || true
wait "$server" || true
trap - EXIT
grep -q 'errors: 0' pipe.txt || { echo "redis-driver: the mass insert failed:" >&2; cat pipe.txt >&2; exit 1; }
