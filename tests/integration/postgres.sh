#!/bin/bash
# PostgreSQL 15 under libhugezero-preload.so and under glibc (issue 25): as
# an unprivileged user, initdb in a temporary directory, a server on a unix
# socket there (no TCP) with the preload in its environment, so the
# postmaster and every backend run under it, and psql under it too. The
# queries use large memory: a 1 GB work_mem sort, hash aggregate and hash
# join, a CREATE TABLE AS, and an index build with 1 GB
# maintenance_work_mem, then read everything back. initdb's exit status and
# output and the query output must match glibc's byte for byte, the server
# log and the programs' stderr must hold no FATAL, PANIC or hugezero line
# (but the one a backend still ending after psql left logs when the fast
# shutdown ends it: seen once in the glibc run on a loaded machine),
# and hugezero must have served large requests in PostgreSQL's processes
# (its JSON stats, one file per process). Each step has a timeout, and the
# server is killed if pg_ctl cannot stop it: a program that hangs fails the
# test (the preload of 056ab97 hung initdb and pg_ctl at start-up).
#
# usage: postgres.sh PRELOAD_SO
set -uo pipefail
bin=/usr/lib/postgresql/15/bin
if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: needs root (initdb refuses root, so the test switches to an unprivileged user)"
	exit 77
fi
for p in initdb pg_ctl postgres psql; do
	if [ ! -x "$bin/$p" ]; then
		echo "SKIP: $bin/$p not installed (apt-get install postgresql-15)"
		exit 77
	fi
done
if ! command -v setpriv >/dev/null; then
	echo "SKIP: no setpriv (apt-get install util-linux)"
	exit 77
fi
user=postgres
id -u "$user" >/dev/null 2>&1 || user=nobody
uid=$(id -u "$user")
gid=$(id -g "$user")
preload_src=$(realpath "$1")
work=$(mktemp -d /tmp/pg-preload.XXXXXX)
port=54329

# stop_server DIR: the postmaster of DIR and its children, by pid, if
# pg_ctl could not stop them (a server hung at start-up or shutdown).
# Backends leave the postmaster's session (setsid), so its pids are taken
# while it is stopped and cannot fork.
stop_server() {
	local pidfile=$1/data/postmaster.pid pm kids
	[ -f "$pidfile" ] || return 0
	pm=$(head -1 "$pidfile")
	[ -n "$pm" ] && kill -0 "$pm" 2>/dev/null || return 0
	timeout -k 5 20 setpriv --reuid="$uid" --regid="$gid" --clear-groups \
		"$bin/pg_ctl" -D "$1/data" -m immediate -t 15 -w stop >/dev/null 2>&1
	kill -0 "$pm" 2>/dev/null || return 0
	kill -STOP "$pm"
	kids=$(pgrep -P "$pm")
	# shellcheck disable=SC2086
	kill -KILL "$pm" $kids 2>/dev/null
}
cleanup() {
	stop_server "$work/glibc"
	stop_server "$work/preload"
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

chmod 755 "$work"
# A copy the unprivileged user can read whatever the build directory's
# permissions, with the library it loads from its own directory ($ORIGIN).
mkdir "$work/lib"
preload=$work/lib/$(basename "$preload_src")
cp "$preload_src" "$preload"
[ -e "$(dirname "$preload_src")/libhugezero.so.0" ] &&
	cp -L "$(dirname "$preload_src")/libhugezero.so.0" "$work/lib/"
chmod -R a+rX "$work/lib"

# as_user DIR SECONDS [VAR=VALUE...] CMD...: CMD as the user, in a clean
# environment (meson's MALLOC_PERTURB_ would fill glibc's memory only),
# within SECONDS.
as_user() {
	local dir=$1 seconds=$2
	shift 2
	timeout -k 5 "$seconds" setpriv --reuid="$uid" --regid="$gid" --clear-groups \
		env -i PATH=/usr/bin:/bin HOME="$dir" LC_ALL=C TZ=UTC PGTZ=UTC "$@" </dev/null
}

queries() {
	cat <<'EOF'
SET work_mem = '1GB';
SET maintenance_work_mem = '1GB';
SET enable_sort = off;
SELECT count(*), sum(x), md5(string_agg(x::text, ',' ORDER BY x))
  FROM (SELECT (i * 7919) % 1000003 AS x FROM generate_series(1::bigint, @ROWS@) i) s;
SELECT count(*), sum(n), max(n), md5(string_agg(k::text || ':' || n::text, ',' ORDER BY k))
  FROM (SELECT (i * 7919) % 500009 AS k, count(*) AS n
          FROM generate_series(1::bigint, @ROWS@) i GROUP BY 1) g;
CREATE TABLE t AS
  SELECT i AS id, (i * 7919) % 1000003 AS x, md5(i::text) AS h
    FROM generate_series(1::bigint, @ROWS@) i;
CREATE INDEX t_h ON t (h);
CREATE INDEX t_x ON t (x, id);
SELECT count(*), sum(a.x) FROM t a JOIN t b ON b.id = a.x;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT count(*), md5(string_agg(h, ',' ORDER BY h)) FROM t WHERE h < '4';
SELECT id, x, h FROM t WHERE x BETWEEN 500000 AND 500010 ORDER BY x, id;
SELECT pg_size_pretty(pg_relation_size('t_h') / 1000000 * 1000000);
DROP TABLE t;
EOF
}
rows=${HZ_PG_ROWS:-1000000}

# run MODE [VAR=VALUE...]: initdb, start, queries and stop in $work/MODE,
# each with VAR=VALUE in its environment. Leaves initdb's exit status and
# output (its directory written DIR), psql's status and output, and the
# server log there.
run() {
	local mode=$1 dir=$work/$1
	shift
	mkdir -p "$dir/stats"
	chown -R "$uid:$gid" "$dir"
	local t0=$SECONDS st
	as_user "$dir" 60 "$@" "$bin/initdb" -D "$dir/data" -U postgres --no-sync \
		-A trust -E UTF8 --locale=C >"$dir/initdb.log" 2>&1
	st=$?
	echo "$st" >"$dir/initdb.status"
	sed "s|$dir|DIR|g" "$dir/initdb.log" >"$dir/initdb.out"
	if [ "$st" -ne 0 ]; then
		echo "$mode: initdb failed (status $st$([ $st -eq 124 ] && echo ', timed out'))"
		tail -5 "$dir/initdb.log" | sed "s/^/  $mode initdb| /"
		return 1
	fi
	local t1=$SECONDS
	as_user "$dir" 45 "$@" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 30 \
		-o "-k $dir -p $port -c listen_addresses='' -c autovacuum=off -c fsync=off" \
		start >"$dir/pg_ctl.log" 2>&1
	st=$?
	if [ "$st" -ne 0 ]; then
		echo "$mode: the server did not start (pg_ctl status $st$([ $st -eq 124 ] && echo ', timed out'))"
		tail -5 "$dir/log" 2>/dev/null | sed "s/^/  $mode log| /"
		return 1
	fi
	queries | sed "s/@ROWS@/$rows/g" >"$dir/queries.sql"
	as_user "$dir" 120 "$@" "$bin/psql" -h "$dir" -p "$port" -U postgres -X -A -t \
		-v ON_ERROR_STOP=1 -f "$dir/queries.sql" postgres >"$dir/out" 2>"$dir/psql.err"
	st=$?
	echo "$st" >"$dir/status"
	local t2=$SECONDS
	as_user "$dir" 45 "$@" "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop \
		>>"$dir/pg_ctl.log" 2>&1 || { echo "FAIL $mode: pg_ctl stop failed"; failed=1; }
	echo "$mode: initdb $((t1 - t0)) s, start and queries $((t2 - t1)) s, psql status $st"
	[ "$st" -eq 0 ] || sed "s/^/  $mode psql| /" "$dir/psql.err" | head -5
}

failed=0
run glibc
run preload LD_PRELOAD="$preload" HUGEZERO_STATS_FILE="$work/preload/stats/%p.json"

g_init=$(cat "$work/glibc/initdb.status" 2>/dev/null)
h_init=$(cat "$work/preload/initdb.status" 2>/dev/null)
if [ "$g_init" != "$h_init" ]; then
	echo "FAIL initdb: status ${g_init:-none} under glibc, ${h_init:-none} under hugezero"
	failed=1
elif ! cmp -s "$work/glibc/initdb.out" "$work/preload/initdb.out"; then
	echo "FAIL initdb's output differs under hugezero"
	diff "$work/glibc/initdb.out" "$work/preload/initdb.out" | head -10
	failed=1
else
	echo "ok   initdb: status $h_init and the same output under both"
fi
if [ ! -f "$work/glibc/status" ] || [ "$(cat "$work/glibc/status")" != 0 ]; then
	echo "FAIL the queries did not complete under glibc: the test itself is broken here"
	failed=1
elif [ ! -f "$work/preload/status" ] || [ "$(cat "$work/preload/status")" != 0 ]; then
	echo "FAIL the queries did not complete under hugezero"
	failed=1
elif ! cmp -s "$work/glibc/out" "$work/preload/out"; then
	echo "FAIL query output differs under hugezero"
	diff "$work/glibc/out" "$work/preload/out" | head -10
	failed=1
else
	echo "ok   query output identical ($(wc -l <"$work/preload/out") lines), its results begin:"
	grep -v -E '^(SET|SELECT [0-9]+|CREATE INDEX|DROP TABLE)$' "$work/preload/out" |
		head -4 | sed 's/^/  | /'
fi
for mode in glibc preload; do
	[ -f "$work/$mode/initdb.log" ] || continue
	if cat "$work/$mode"/{initdb.log,log,psql.err} 2>/dev/null |
		grep -v 'FATAL:  terminating connection due to administrator command' |
		grep -E 'FATAL|PANIC|hugezero: ' >"$work/$mode/bad"; then
		echo "FAIL the $mode run's server log or stderr:"
		head -5 "$work/$mode/bad" | sed 's/^/  | /'
		failed=1
	fi
done
if [ -f "$work/preload/status" ]; then
	stats=("$work"/preload/stats/*.json)
	served=$(cat "${stats[@]}" 2>/dev/null | grep -o '"large_requests": [0-9]*' |
		awk '{ n += $2 } END { print n + 0 }')
	if [ "$served" -eq 0 ]; then
		echo "FAIL hugezero served no large request in PostgreSQL's processes"
		failed=1
	else
		echo "ok   hugezero served $served large requests in ${#stats[@]} processes"
	fi
fi
[ "$failed" -eq 0 ]
