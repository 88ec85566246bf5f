# shellcheck shell=bash disable=SC2034,SC2154 # variables shared with bench/run-apps
# SQLite in memory: a table of N rows built by a recursive query, two
# indexes over it (the sorter's large buffers), then range queries. The
# page cache is a few hundred thousand 4 KiB pages from malloc.
about="sqlite3 :memory:, N rows, two CREATE INDEX, queries"
needs=(sqlite3)
app_setup() {
	rows=$(pick 150000 1000000)
	param="$((rows / 1000))k-rows"
	sql=$inputs/sqlite-$rows.sql
	[ -f "$sql" ] && return 0
	cat >"$sql.tmp" <<SQL
PRAGMA cache_size = -1000000;
PRAGMA temp_store = MEMORY;
CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER, b TEXT, c REAL);
WITH RECURSIVE s(i, x) AS (
	SELECT 1, 12345
	UNION ALL
	SELECT i + 1, (x * 1103515245 + 12345) % 2147483648 FROM s WHERE i < $rows)
INSERT INTO t SELECT i, x % 1000003, printf('%08x-%d', x, i % 977), (x % 10007) / 7.0 FROM s;
CREATE INDEX ta ON t(a);
CREATE INDEX tb ON t(b, c);
SELECT count(*), sum(a), sum(c) FROM t WHERE a BETWEEN 1000 AND 200000;
SELECT b, count(*) FROM t WHERE b > '7' GROUP BY substr(b, 1, 2) ORDER BY 2 DESC LIMIT 5;
SELECT id, a FROM t ORDER BY b LIMIT 3 OFFSET $((rows / 2));
DELETE FROM t WHERE id % 3 = 0;
SELECT count(*), max(a) FROM t;
SQL
	mv "$sql.tmp" "$sql"
}
app_cmd() { cmd=(sqlite3 -batch :memory: ".read $sql"); }
app_check() { cat stdout; }
