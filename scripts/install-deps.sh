#!/usr/bin/env bash
# Installs the host packages the tests need on Debian 12 (idempotent, quiet):
# gcc and the 6.12 kernel headers (bookworm-backports linux-libc-dev) for the
# UAPI layout test; the VM's own needs are installed by scripts/vm/setup.sh.
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
	echo "install-deps: run as root (apt-get)" >&2
	exit 1
fi
if ! grep -rqs --include='*.list' --include='*.sources' bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d; then
	cat >/etc/apt/sources.list.d/bookworm-backports.sources <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
want_hdr() { grep -q UBLK_U_CMD_GET_FEATURES /usr/include/linux/ublk_cmd.h 2>/dev/null && grep -q BLOCK_URING_CMD_DISCARD /usr/include/linux/blkdev.h 2>/dev/null; }
if ! command -v gcc >/dev/null || ! want_hdr; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq gcc libc6-dev >/dev/null
	apt-get install -y -qq -t bookworm-backports linux-libc-dev >/dev/null
fi
# The Linux 7.3 UAPI headers (trixie-backports linux-libc-dev), for the
# UAPI test's 7.3 half (ublk.Headers73Dir): downloaded through a private apt
# configuration and extracted into the cache, never installed over the
# host's headers.
H73=/var/cache/ublk-raid/linux-libc-dev-7.3
if [ ! -e "$H73/.done" ]; then
	A=/var/cache/ublk-raid/apt/trixie-backports
	mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/dl"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie-backports main" >"$A/sources.list"
	kapt() {
		"$@" -q -o Dir::Etc::sourcelist="$A/sources.list" -o Dir::Etc::sourceparts=- \
			-o Dir::State::Lists="$A/lists" -o Dir::Cache="$A/cache" -o APT::Get::List-Cleanup=0
	}
	kapt apt-get update >/dev/null
	chmod 777 "$A/dl" # apt-get download drops privileges to _apt
	rm -f "$A"/dl/*.deb
	(cd "$A/dl" && kapt apt-get download "linux-libc-dev/trixie-backports" >/dev/null)
	rm -rf "$H73"
	mkdir -p "$H73"
	dpkg-deb -x "$A"/dl/linux-libc-dev_*.deb "$H73"
	rm -f "$A"/dl/*.deb
	grep -q UBLK_F_NO_AUTO_PART_SCAN "$H73/usr/include/linux/ublk_cmd.h" ||
		{ echo "install-deps: trixie-backports' linux-libc-dev is not the 7.3 one" >&2; exit 1; }
	touch "$H73/.done"
fi
