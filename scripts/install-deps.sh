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
