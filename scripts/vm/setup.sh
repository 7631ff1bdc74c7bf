#!/usr/bin/env bash
# Prepare everything the ublk-raid test VM needs (idempotent; silent when all
# is already in place, one line per step when it has work to do; prints the
# captured output of a step only if that step fails).
#
#   scripts/vm/setup.sh [--print-paths]
#
#  - apt: adds bookworm-backports (deb822 file) if no source lists it yet,
#    runs apt-get update only when needed, installs the host tools
#  - kernel: `apt-get download`s the Debian backports kernel package and
#    extracts it (dpkg-deb -x) into the cache; it is never installed on the host
#  - initramfs: busybox + scripts/vm/init.sh + the modules of
#    scripts/vm/modules.list (with dependencies, decompressed), rebuilt when
#    any input changes (file name keyed on a hash of the inputs)
#
# --print-paths prints KERNEL=<vmlinuz> and INITRD=<cpio.gz> (used by run.sh).
#
# Environment:
#   UBLK_RAID_VM_CACHE       cache dir (default /var/cache/ublk-raid-vm)
#   UBLK_RAID_VM_KERNEL_PKG  kernel package (default
#                            linux-image-6.12.95+deb12-amd64-unsigned)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${UBLK_RAID_VM_CACHE:-/var/cache/ublk-raid-vm}
KPKG_DEFAULT=linux-image-6.12.95+deb12-amd64-unsigned
KPKG=${UBLK_RAID_VM_KERNEL_PKG:-$KPKG_DEFAULT}
PACKAGES=(qemu-system-x86 busybox-static fio mdadm e2fsprogs dmsetup kmod lvm2
	xz-utils cpio util-linux)
APT_OPTS=(-q -y -o DPkg::Lock::Timeout=1200 -o APT::Get::Assume-Yes=true)
export DEBIAN_FRONTEND=noninteractive

print_paths=0
case "${1:-}" in
--print-paths) print_paths=1 ;;
"") ;;
-h | --help)
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
	exit 0
	;;
*)
	echo "setup.sh: unknown argument: $1" >&2
	exit 2
	;;
esac

note() { echo "vm-setup: $*" >&2; }
die() {
	echo "vm-setup: ERROR: $*" >&2
	exit 1
}

# run_quiet DESC CMD...: run CMD with its output captured; show it on failure.
run_quiet() {
	local desc=$1 out rc=0
	shift
	out=$(mktemp)
	"$@" >"$out" 2>&1 || rc=$?
	if [ "$rc" -ne 0 ]; then
		echo "vm-setup: ERROR: $desc failed (exit $rc): $*" >&2
		cat "$out" >&2
		rm -f "$out"
		exit 1
	fi
	rm -f "$out"
}

need_root() {
	[ "$(id -u)" -eq 0 ] || die "$1 needs root (run as root, or do it once by hand)"
}

# ---------------------------------------------------------------- apt ------

APT_UPDATED=0
apt_update() {
	[ "$APT_UPDATED" -eq 1 ] && return 0
	need_root "apt-get update"
	note "apt-get update"
	local i
	for i in 1 2 3; do
		# The lists lock is not covered by DPkg::Lock::Timeout everywhere:
		# retry a few times in case another apt is running.
		if apt-get "${APT_OPTS[@]}" update >/tmp/ublk-raid-vm-apt-update.log 2>&1; then
			APT_UPDATED=1
			rm -f /tmp/ublk-raid-vm-apt-update.log
			return 0
		fi
		sleep $((i * 10))
	done
	cat /tmp/ublk-raid-vm-apt-update.log >&2
	die "apt-get update failed"
}

has_candidate() {
	local out
	out=$(apt-cache policy "$1" 2>/dev/null) || return 1
	[[ $out == *"Candidate: "[!\(]* ]]
}

ensure_backports_source() {
	if grep -rqs --include='*.list' --include='*.sources' bookworm-backports \
		/etc/apt/sources.list /etc/apt/sources.list.d/; then
		return 0
	fi
	need_root "adding the bookworm-backports apt source"
	note "adding /etc/apt/sources.list.d/bookworm-backports.sources"
	cat >/etc/apt/sources.list.d/bookworm-backports.sources <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
	APT_UPDATED=0
	apt_update
}

ensure_packages() {
	local missing=() p
	for p in "${PACKAGES[@]}"; do
		[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] ||
			missing+=("$p")
	done
	[ "${#missing[@]}" -eq 0 ] && return 0
	need_root "installing ${missing[*]}"
	for p in "${missing[@]}"; do
		has_candidate "$p" || apt_update
	done
	note "installing ${missing[*]}"
	run_quiet "apt-get install" apt-get "${APT_OPTS[@]}" install --no-install-recommends "${missing[@]}"
}

# ------------------------------------------------------------- kernel ------

KROOT=
KVER=
ensure_kernel() {
	local dir="$CACHE/kernel/$KPKG"
	if [ ! -e "$dir/.done" ]; then
		need_root "downloading the VM kernel"
		if ! has_candidate "$KPKG"; then
			apt_update
			has_candidate "$KPKG" ||
				die "apt has no package $KPKG (bookworm-backports moves on: set UBLK_RAID_VM_KERNEL_PKG to the current linux-image-6.12.*+deb12-amd64-unsigned, see 'apt-cache search --names-only ^linux-image-6.12')"
		fi
		note "downloading and extracting $KPKG"
		rm -rf "$CACHE"/kernel-dl.* # leftovers of an interrupted download
		local tmp
		tmp=$(mktemp -d "$CACHE/kernel-dl.XXXXXX")
		chmod 755 "$tmp"   # apt-get download drops privileges to _apt
		(cd "$tmp" && run_quiet "apt-get download $KPKG" apt-get -q -o DPkg::Lock::Timeout=1200 download "$KPKG")
		mkdir -p "$tmp/root"
		run_quiet "dpkg-deb -x" dpkg-deb -x "$tmp"/*.deb "$tmp/root"
		rm -f "$tmp"/*.deb
		rm -rf "$dir"
		mkdir -p "$(dirname "$dir")"
		mv "$tmp/root" "$dir"
		rmdir "$tmp"
		local kv
		kv=$(ls "$dir/lib/modules")
		run_quiet "depmod" depmod -b "$dir" "$kv"
		touch "$dir/.done"
	fi
	KROOT=$dir
	KVER=$(ls "$KROOT/lib/modules")
	[ -n "$KVER" ] && [ -f "$KROOT/boot/vmlinuz-$KVER" ] || die "broken kernel cache in $KROOT (delete it)"
}

# ---------------------------------------------------------- initramfs ------

INITRD=
ensure_initramfs() {
	local hash
	hash=$({
		echo "kver=$KVER pkg=$KPKG"
		cat "$HERE/init.sh" "$HERE/modules.list" "$HERE/setup.sh"
		sha256sum </bin/busybox
	} | sha256sum | cut -c1-16)
	INITRD="$CACHE/initramfs-$hash.cpio.gz"
	[ -s "$INITRD" ] && return 0
	[ -w "$CACHE" ] || die "cannot write $CACHE (need root?)"
	note "building $(basename "$INITRD")"

	local st
	st=$(mktemp -d "$CACHE/initramfs-stage.XXXXXX")
	# shellcheck disable=SC2064
	trap "rm -rf '$st'" EXIT
	mkdir -p "$st"/{bin,dev,etc,proc,sys,newroot,ctl,tmp,run,usr,lib/modules/"$KVER"}
	ln -s bin "$st/sbin"
	ln -s ../bin "$st/usr/bin"
	ln -s ../bin "$st/usr/sbin"
	cp /bin/busybox "$st/bin/busybox"
	local a
	for a in $(/bin/busybox --list); do
		[ "$a" = busybox ] || ln -s busybox "$st/bin/$a"
	done
	install -m 0755 "$HERE/init.sh" "$st/init"
	if [ "$(id -u)" -eq 0 ]; then
		mknod -m 600 "$st/dev/console" c 5 1
		mknod -m 666 "$st/dev/null" c 1 3
	fi

	# Resolve modules (+deps, in load order), copy them decompressed.
	local mdir="$KROOT/lib/modules/$KVER" name mode line path rel
	local -A seen=()
	local load=()
	while read -r name mode _; do
		case "$name" in '' | '#'*) continue ;; esac
		mode=${mode:-load}
		case "$mode" in load | avail) ;; *) die "modules.list: bad mode '$mode' for $name" ;; esac
		local deps
		deps=$(modprobe -C /dev/null -d "$KROOT" -S "$KVER" --show-depends "$name" 2>&1) ||
			die "modules.list: cannot resolve $name: $deps"
		while read -r line; do
			case "$line" in
			builtin\ *) continue ;;
			insmod\ *) ;;
			*) die "modules.list: unexpected modprobe output for $name: $line" ;;
			esac
			path=$(echo "$line" | awk '{print $2}')
			rel=${path#"$mdir"/}
			rel=${rel%.xz}
			rel=${rel%.zst}
			rel=${rel%.gz}
			if [ -z "${seen[$rel]:-}" ]; then
				seen[$rel]=copied
				mkdir -p "$(dirname "$st/lib/modules/$KVER/$rel")"
				case "$path" in
				*.ko.xz) xz -dc "$path" >"$st/lib/modules/$KVER/$rel" ;;
				*.ko.zst) zstd -qdc "$path" >"$st/lib/modules/$KVER/$rel" ;;
				*.ko.gz) gzip -dc "$path" >"$st/lib/modules/$KVER/$rel" ;;
				*) cp "$path" "$st/lib/modules/$KVER/$rel" ;;
				esac
			fi
			if [ "$mode" = load ] && [ "${seen[$rel]}" != loaded ]; then
				seen[$rel]=loaded
				load+=("$rel")
			fi
		done <<<"$deps"
	done <"$HERE/modules.list"
	cp "$mdir/modules.builtin" "$mdir/modules.builtin.modinfo" "$st/lib/modules/$KVER/"
	run_quiet "depmod (initramfs)" depmod -b "$st" "$KVER"

	# Load plan: modules grouped in levels; a module's level is above those of
	# everything modprobe would load before it (its own --show-depends chain,
	# softdeps included), so init can insmod each level in parallel.
	local -A level=() pred=()
	local m n chain changed=1 max=0
	for m in "${load[@]}"; do
		chain=$(modprobe -C /dev/null -d "$st" -S "$KVER" --show-depends "$(basename "$m" .ko)" 2>/dev/null |
			awk '$1 == "insmod" {print $2}') || true
		pred[$m]=
		for n in $chain; do
			n=${n#"$st/lib/modules/$KVER"/}
			[ "$n" = "$m" ] && break
			pred[$m]+=" $n"
		done
		level[$m]=0
	done
	while [ "$changed" -eq 1 ]; do
		changed=0
		for m in "${load[@]}"; do
			for n in ${pred[$m]}; do
				if [ "${level[$n]:-0}" -ge "${level[$m]}" ]; then
					level[$m]=$((${level[$n]:-0} + 1))
					changed=1
					[ "${level[$m]}" -le 64 ] || die "module dependency loop at $m"
				fi
			done
		done
	done
	for m in "${load[@]}"; do
		[ "${level[$m]}" -le "$max" ] || max=${level[$m]}
	done
	local l
	for ((l = 0; l <= max; l++)); do
		line=
		for m in "${load[@]}"; do
			[ "${level[$m]}" -eq "$l" ] && line+=" $m"
		done
		echo "${line# }"
	done >"$st/etc/modules.load"

	local tmp="$INITRD.tmp.$$"
	(cd "$st" && find . -mindepth 1 -print0 | LC_ALL=C sort -z |
		cpio --null -o -H newc --owner=0:0 --quiet | gzip -1 >"$tmp")
	mv -f "$tmp" "$INITRD"
	rm -rf "$st"
	trap - EXIT
	# keep the 5 newest initramfs images
	# shellcheck disable=SC2012
	ls -1t "$CACHE"/initramfs-*.cpio.gz 2>/dev/null | tail -n +6 | xargs -r rm -f
}

# --------------------------------------------------------------- main ------

main() {
	ensure_packages # no apt at all when everything is installed

	if [ ! -d "$CACHE" ]; then
		mkdir -p "$CACHE" 2>/dev/null || die "cannot create $CACHE (need root, or set UBLK_RAID_VM_CACHE)"
	fi
	# Serialize concurrent setups sharing one cache (a read-only cache that
	# is already complete works without the lock).
	if { exec 9>>"$CACHE/.lock"; } 2>/dev/null; then
		flock 9
	fi

	if [ ! -e "$CACHE/kernel/$KPKG/.done" ]; then
		ensure_backports_source
	fi
	ensure_kernel
	ensure_initramfs
	flock -u 9 2>/dev/null || true

	if [ "$print_paths" -eq 1 ]; then
		echo "KERNEL=$KROOT/boot/vmlinuz-$KVER"
		echo "INITRD=$INITRD"
		echo "KVER=$KVER"
	fi
}

main
