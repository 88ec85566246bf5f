# shellcheck shell=bash disable=SC2034,SC2154 # variables shared with bench/run-apps
# git repack -adf of a generated history: every object's delta found again
# in a window of 100 (large arrays of object entries, delta indexes, zlib
# streams). One pack thread, so the pack is the same bytes every run.
about="git repack -adf --window=100 (one thread) of a generated repository"
needs=(git)
app_setup() {
	local files commits
	files=$(pick 200 1000)
	commits=$(pick 150 500)
	param="$commits-commits"
	about+=", $files files"
	repo=$inputs/git-$files-$commits.git
	[ -f "$repo/done" ] && return 0
	rm -rf "$repo"
	git init -q --bare "$repo"
	"$gen" fastimport "$files" "$commits" | git -C "$repo" fast-import --quiet
	touch "$repo/done"
}
app_before() { cp -a "$repo" repo.git; }
app_cmd() {
	cmd=(git -C repo.git -c pack.threads=1 -c gc.auto=0 repack -adf -q --window=100 --depth=50)
}
app_check() { cat repo.git/objects/pack/*.pack | sha256sum; }
