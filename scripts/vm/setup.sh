#!/usr/bin/env bash
# Prepare everything the ublk-raid test VM needs (idempotent; silent when all
# is already in place, one line per step when it has work to do; prints the
# captured output of a step only if that step fails).
#
#   scripts/vm/setup.sh [--print-paths]
#
#  - apt: runs apt-get update only when needed, installs the host tools
#  - kernel: `apt-get download`s the Debian backports kernel packages through
#    a private apt configuration in the cache (its own sources list and package
#    lists: the host's apt sources are not touched) and extracts them
#    (dpkg-deb -x) into the cache; they are never installed on the host.
#    Usr-merged packages (7.x) are laid out as lib/modules/KVER and
#    boot/vmlinuz-KVER, as the older ones are.
#  - initramfs: busybox + scripts/vm/init.sh + the modules of
#    scripts/vm/modules.list (with dependencies, decompressed), rebuilt when
#    any input changes (file name keyed on a hash of the inputs)
#
# --print-paths prints KERNEL=<vmlinuz> and INITRD=<cpio.gz> (used by run.sh).
#
# Environment:
#   UBLK_RAID_VM_CACHE       cache dir (default /var/cache/ublk-raid-vm)
#   UBLK_RAID_VM_KERNEL      which kernel: 6.12 (default; bookworm-backports,
#                            Debian 12's) or 7.3 (trixie-backports)
#   UBLK_RAID_VM_KERNEL_PKG  the kernel's packages, space-separated, when the
#                            suite has moved on (defaults: 6.12
#                            linux-image-6.12.95+deb12-amd64-unsigned; 7.3
#                            linux-binary-7.3.4+deb13-amd64 (the image),
#                            linux-modules-7.3.4+deb13-amd64 and
#                            linux-base-7.3.4+deb13-amd64 (modules.builtin,
#                            config))
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${UBLK_RAID_VM_CACHE:-/var/cache/ublk-raid-vm}
KSEL=${UBLK_RAID_VM_KERNEL:-6.12}
case "$KSEL" in
6.12)
	KSUITE=bookworm-backports
	KPKG_DEFAULT=linux-image-6.12.95+deb12-amd64-unsigned
	KSEARCH='^linux-image-6.12.*+deb12-amd64-unsigned'
	;;
7.3)
	KSUITE=trixie-backports
	KPKG_DEFAULT="linux-binary-7.3.4+deb13-amd64 linux-modules-7.3.4+deb13-amd64 linux-base-7.3.4+deb13-amd64"
	KSEARCH='^linux-(binary|modules|base)-7.3.*+deb13-amd64$'
	;;
*)
	echo "setup.sh: UBLK_RAID_VM_KERNEL=$KSEL: want 6.12 or 7.3" >&2
	exit 2
	;;
esac
KPKG=${UBLK_RAID_VM_KERNEL_PKG:-$KPKG_DEFAULT}
read -r -a KPKGS <<<"$KPKG"
KNAME=${KPKGS[0]} # the cache directory's name
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
# kapt ARGS...: apt-get/apt-cache with the private configuration that sees
# only $KSUITE (its sources list and package lists live in the cache).
KAPT_DIR=
kapt() {
	local tool=$1
	shift
	"$tool" -q -o Dir::Etc::sourcelist="$KAPT_DIR/sources.list" -o Dir::Etc::sourceparts=- \
		-o Dir::State::Lists="$KAPT_DIR/lists" -o Dir::Cache="$KAPT_DIR/cache" \
		-o APT::Get::List-Cleanup=0 -o DPkg::Lock::Timeout=1200 "$@"
}
kapt_has() {
	local out
	out=$(kapt apt-cache policy "$1" 2>/dev/null) || return 1
	[[ $out == *"Candidate: "[!\(]* ]]
}
ensure_kernel() {
	local dir="$CACHE/kernel/$KNAME"
	if [ ! -e "$dir/.done" ]; then
		need_root "downloading the VM kernel"
		KAPT_DIR="$CACHE/apt/$KSUITE"
		mkdir -p "$KAPT_DIR/lists/partial" "$KAPT_DIR/cache/archives/partial"
		echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $KSUITE main" \
			>"$KAPT_DIR/sources.list"
		local p updated=0
		for p in "${KPKGS[@]}"; do
			kapt_has "$p" && continue
			if [ $updated = 0 ]; then
				note "apt-get update ($KSUITE, private lists in $KAPT_DIR)"
				run_quiet "apt-get update ($KSUITE)" kapt apt-get update
				updated=1
			fi
			kapt_has "$p" ||
				die "$KSUITE has no package $p (the suite moves on: set UBLK_RAID_VM_KERNEL_PKG to the current ones, see: apt-get -o Dir::Etc::sourcelist=$KAPT_DIR/sources.list -o Dir::Etc::sourceparts=- -o Dir::State::Lists=$KAPT_DIR/lists ... ; apt-cache search --names-only '$KSEARCH')"
		done
		note "downloading and extracting ${KPKGS[*]}"
		rm -rf "$CACHE"/kernel-dl.* # leftovers of an interrupted download
		local tmp
		tmp=$(mktemp -d "$CACHE/kernel-dl.XXXXXX")
		chmod 755 "$tmp" # apt-get download drops privileges to _apt
		(cd "$tmp" && run_quiet "apt-get download ${KPKGS[*]}" kapt apt-get download "${KPKGS[@]}")
		mkdir -p "$tmp/root"
		local deb
		for deb in "$tmp"/*.deb; do
			run_quiet "dpkg-deb -x $deb" dpkg-deb -x "$deb" "$tmp/root"
		done
		rm -f "$tmp"/*.deb
		# Usr-merged packages: modules (and the image) under usr/lib/modules.
		local kv r="$tmp/root"
		if [ ! -d "$r/lib/modules" ] && [ -d "$r/usr/lib/modules" ]; then
			mkdir -p "$r/lib"
			mv "$r/usr/lib/modules" "$r/lib/modules"
		fi
		kv=$(ls "$r/lib/modules" 2>/dev/null) || true
		[ -n "$kv" ] && [ "$(wc -w <<<"$kv")" = 1 ] || die "${KPKGS[*]}: expected one lib/modules/KVER, found: ${kv:-none}"
		if [ ! -f "$r/boot/vmlinuz-$kv" ] && [ -f "$r/lib/modules/$kv/vmlinuz" ]; then
			mkdir -p "$r/boot"
			mv "$r/lib/modules/$kv/vmlinuz" "$r/boot/vmlinuz-$kv"
		fi
		[ -f "$r/boot/vmlinuz-$kv" ] || die "${KPKGS[*]}: no kernel image (boot/vmlinuz-$kv)"
		[ -f "$r/lib/modules/$kv/modules.builtin" ] || die "${KPKGS[*]}: no modules (lib/modules/$kv/modules.builtin)"
		rm -rf "$dir"
		mkdir -p "$(dirname "$dir")"
		mv "$r" "$dir"
		rm -rf "$tmp"
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
