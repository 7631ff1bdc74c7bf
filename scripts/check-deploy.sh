#!/usr/bin/env bash
# Checks the files under deploy/ with the real tools:
#   - systemd-analyze verify on the unit (when systemd-analyze exists);
#   - promtool check rules, test rules (alerts_test.yml), check config, and
#     check metrics on the golden exposition (metrics/testdata/metrics.golden);
#   - the host-side Go checks of the dashboard, rules and unit (go test).
# promtool comes from PATH, or else is taken from Debian's prometheus package,
# fetched with `apt-get download` and unpacked under a private temporary
# directory: nothing is installed and no Prometheus server starts. A check
# whose tool cannot be had (no apt, no network) is skipped with a message; it
# does not fail the run. Quiet on success; exits non-zero if a check fails.
# Prints "deploy checks: N passed, M skipped" (and "F failed" on failure).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin

tmp=$(mktemp -d /tmp/check-deploy.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0 skipped=0 failed=0

# check NAME CMD...: runs CMD quietly; it passes if it exits 0, else its
# output is shown.
check() {
	local name=$1
	shift
	if "$@" >"$tmp/out" 2>&1; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "FAIL $name"
		sed 's/^/    /' "$tmp/out"
	fi
}
skip() {
	skipped=$((skipped + 1))
	echo "skip: $1: $2" >&2
}

# systemd-analyze verify reports many problems (unknown keys, bad
# dependencies) as warnings with exit status 0: any output is a failure.
verify_unit() {
	local dir=$tmp/unit out
	mkdir -p "$dir"
	# ExecStart must name an existing executable for verify to pass; the
	# daemon is not installed here, so verify a copy that runs /bin/true.
	sed 's|^ExecStart=/usr/local/sbin/ublk-raid |ExecStart=/bin/true |' \
		deploy/systemd/ublk-raid.service >"$dir/ublk-raid.service"
	grep -q '^ExecStart=/bin/true serve$' "$dir/ublk-raid.service" || {
		echo "ExecStart is not /usr/local/sbin/ublk-raid serve"
		return 1
	}
	out=$(systemd-analyze verify --man=no "$dir/ublk-raid.service" 2>&1) || {
		echo "$out"
		return 1
	}
	[ -z "$out" ] || {
		echo "$out"
		return 1
	}
}

# find_promtool sets $promtool, or $why and returns 1.
promtool=""
why=""
find_promtool() {
	if promtool=$(command -v promtool); then
		return 0
	fi
	if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
		why="promtool not on PATH and no apt-get/dpkg-deb to fetch it"
		return 1
	fi
	local dl=$tmp/deb
	# Offline, give up in seconds rather than minutes.
	local aptopts=(-o Acquire::Retries=0 -o Acquire::http::Timeout=10 -o Acquire::https::Timeout=10)
	mkdir -p "$dl"
	fetch() { (cd "$dl" && apt-get download -qq "${aptopts[@]}" prometheus) >>"$tmp/apt.log" 2>&1; }
	if ! fetch; then
		# Stale or missing package lists: refresh them if we may.
		if [ "$(id -u)" = 0 ] && apt-get update -qq "${aptopts[@]}" >>"$tmp/apt.log" 2>&1 && fetch; then
			:
		else
			why="cannot fetch Debian's prometheus package for promtool ($(tail -n1 "$tmp/apt.log"))"
			return 1
		fi
	fi
	if ! dpkg-deb --fsys-tarfile "$dl"/prometheus_*.deb |
		tar -x -C "$dl" ./usr/bin/promtool 2>>"$tmp/apt.log"; then
		why="cannot unpack promtool from the prometheus package"
		return 1
	fi
	promtool=$dl/usr/bin/promtool
	"$promtool" --version >/dev/null 2>&1 || {
		why="the unpacked promtool does not run"
		return 1
	}
}

# The names and help of the exposition, as promtool's linter sees them.
promtool_check_metrics() {
	"$promtool" check metrics <metrics/testdata/metrics.golden
}

if command -v systemd-analyze >/dev/null; then
	check "systemd-analyze verify deploy/systemd/ublk-raid.service" verify_unit
else
	skip "systemd unit" "systemd-analyze not installed"
fi

if find_promtool; then
	check "promtool check rules" "$promtool" check rules deploy/prometheus/alerts.yml
	check "promtool test rules" "$promtool" test rules deploy/prometheus/alerts_test.yml
	check "promtool check config" "$promtool" check config deploy/prometheus/scrape.yml
	check "promtool check metrics" promtool_check_metrics
else
	for c in "check rules" "test rules" "check config" "check metrics"; do
		skip "promtool $c" "$why"
	done
fi

if command -v go >/dev/null; then
	check "go test (dashboard, rules and unit names)" go test -count=1 -run '^TestDeploy' ./metrics
else
	skip "go test -run TestDeploy ./metrics" "go not installed"
fi

if [ "$failed" -gt 0 ]; then
	echo "deploy checks: $passed passed, $failed failed, $skipped skipped"
	exit 1
fi
echo "deploy checks: $passed passed, $skipped skipped"
