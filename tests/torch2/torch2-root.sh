#!/usr/bin/env bash
# torch2-root.sh -- a Debian 13 (trixie) root with python3-torch 2.6, in which
# the torch 2.x end-to-end tests run their workers (tests/torch2/python3 is the
# PYTHON_EXEC that enters it). Debian 12 ships torch 1.13 only.
#
#   torch2-root.sh setup    build the root when it is not there yet (about 6
#                           minutes and 1.6 GiB the first time), then mount
#   torch2-root.sh mount    bind /proc, /sys, /dev, /run and /tmp of this
#                           machine into it, and the source tree at its own path
#   torch2-root.sh umount   undo mount
#   torch2-root.sh path     print the root's directory
#
# The root is $ELASTICD_TORCH2_ROOT, default /var/cache/elasticd/torch2-trixie;
# it is kept between runs and rebuilt when this script's STAMP changes. Needs
# root (debootstrap, chroot, mount).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
source_root=$(cd "$here/../.." && pwd)
root=${ELASTICD_TORCH2_ROOT:-/var/cache/elasticd/torch2-trixie}
mirror=${ELASTICD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# Bump when the build steps below change, so that kept roots are rebuilt.
STAMP="trixie python3-torch python3-numpy, use_libuv patch 3"

log() {
	printf 'torch2-root.sh: %s\n' "$*" >&2
}

# Debian's torch 2.6 is built without libuv, while its Python TCPStore binding
# asks for the libuv backend unless told otherwise (use_libuv=True by default)
# and then refuses ("use_libuv was requested but PyTorch was build without
# libuv support"). Several calls that a torchrun or elasticd job makes never
# pass the choice on, so USE_LIBUV=0 does not reach them:
#  - torch/distributed/rendezvous.py, _create_c10d_store: env:// with
#    TORCHELASTIC_USE_AGENT_STORE=True (every worker of elasticd and torchrun)
#    builds its client TCPStore without use_libuv;
#  - torchrun's own stores: elastic/rendezvous/c10d_rendezvous_backend.py
#    (the c10d rendezvous store), dynamic_rendezvous.py (the shared agent
#    store of --standalone and c10d jobs) and static_tcp_rendezvous.py (the
#    static backend's store), which the parity tests run.
# Upstream wheels have libuv and need none of this. The patch adds
# use_libuv=(USE_LIBUV != "0") to every TCPStore(...) call in those files that
# has no use_libuv; tests/torch2/python3 sets USE_LIBUV=0.
patch_torch() {
	python3 - "$1/usr/lib/python3/dist-packages/torch/distributed" <<-'PYEOF'
		import sys
		dist = sys.argv[1]
		arg = 'use_libuv=__import__("os").environ.get("USE_LIBUV", "1") != "0"'
		files = ["rendezvous.py", "elastic/rendezvous/c10d_rendezvous_backend.py",
		         "elastic/rendezvous/dynamic_rendezvous.py",
		         "elastic/rendezvous/static_tcp_rendezvous.py"]
		for name in files:
		    path = dist + "/" + name
		    src = open(path).read()
		    out, pos, n = [], 0, 0
		    while True:
		        i = src.find("TCPStore(", pos)
		        if i < 0:
		            break
		        j, depth = i + len("TCPStore("), 1
		        while depth:
		            depth += {"(": 1, ")": -1}.get(src[j], 0)
		            j += 1
		        call = src[i:j]
		        if "use_libuv" not in call:
		            body = call[:-1].rstrip()
		            sep = " " if body.endswith(",") else ", "
		            call = body + sep + arg + ")"
		            n += 1
		        out.append(src[pos:i] + call)
		        pos = j
		    out.append(src[pos:])
		    if n == 0 and arg not in src:
		        sys.exit("torch2-root.sh: no TCPStore call to patch in " + path)
		    open(path, "w").write("".join(out))
	PYEOF
}

build() {
	local tmp=$root.tmp
	command -v debootstrap >/dev/null || {
		log "debootstrap is not installed (apt-get install debootstrap)"
		return 1
	}
	log "building $root (debootstrap trixie, python3-torch): several minutes the first time"
	remove_root "$tmp" || return 1
	mkdir -p "$(dirname "$root")"
	debootstrap --variant=minbase trixie "$tmp" "$mirror" >"$tmp.log" 2>&1 || {
		tail -n 20 "$tmp.log" >&2
		log "debootstrap failed (log: $tmp.log)"
		return 1
	}
	cp /etc/resolv.conf "$tmp/etc/resolv.conf"
	mount --bind /proc "$tmp/proc"
	if ! chroot "$tmp" /usr/bin/env DEBIAN_FRONTEND=noninteractive sh -c \
		'apt-get update -q && apt-get install -y -q --no-install-recommends python3-torch python3-numpy' \
		>>"$tmp.log" 2>&1; then
		umount "$tmp/proc"
		tail -n 20 "$tmp.log" >&2
		log "installing python3-torch in the trixie root failed (log: $tmp.log)"
		return 1
	fi
	umount "$tmp/proc"
	chroot "$tmp" apt-get clean
	patch_torch "$tmp"
	echo "$STAMP" >"$tmp/.elasticd-torch2"
	remove_root "$root" || return 1
	mv "$tmp" "$root"
	rm -f "$tmp.log"
}

# mounts_under DIR: the mount points under DIR, deepest first (findmnt -r
# writes a blank in a path as \x20: decoded).
mounts_under() {
	findmnt -rn -o TARGET | while read -r m; do
		m=$(printf '%b' "$m")
		case $m in "$1"/*) printf '%s\n' "$m" ;; esac
	done | sort -r
}

# umount_all DIR: unmount everything mounted under DIR, deepest first; fails
# when anything is still mounted there afterwards.
umount_all() {
	local m
	[ -d "$1" ] || return 0
	mounts_under "$1" | while IFS= read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
	if [ -n "$(mounts_under "$1")" ]; then
		log "still mounted under $1:"
		mounts_under "$1" >&2
		return 1
	fi
}

# remove_root DIR: delete a root, never what is mounted in it (this
# machine's /tmp, /run, /dev or the source tree).
remove_root() {
	umount_all "$1" || {
		log "not removing $1 while something is mounted in it"
		return 1
	}
	rm -rf --one-file-system "$1"
}

do_mount() {
	local d
	# Names resolve as on this machine: torchrun's workers get this host's
	# name (socket.getfqdn()) as MASTER_ADDR and must reach it.
	cp /etc/hosts "$root/etc/hosts"
	cp /etc/resolv.conf "$root/etc/resolv.conf"
	for d in proc sys dev run tmp; do
		mountpoint -q "$root/$d" || mount --rbind "/$d" "$root/$d"
		mount --make-rslave "$root/$d"
	done
	mkdir -p "$root$source_root"
	mountpoint -q "$root$source_root" || mount --bind "$source_root" "$root$source_root"
	# The shared reference folder beside the tree (fixtures some tests read).
	if [ -d "$source_root/../shared" ]; then
		mkdir -p "$root$source_root/../shared"
		mountpoint -q "$root$source_root/../shared" ||
			mount --bind "$source_root/../shared" "$root$source_root/../shared"
	fi
}

case ${1:-} in
setup)
	if [ "$(cat "$root/.elasticd-torch2" 2>/dev/null)" != "$STAMP" ]; then
		build
	else
		log "reusing $root"
	fi
	do_mount
	chroot "$root" python3 -c 'import torch; print("torch2-root.sh: torch", torch.__version__, "in '"$root"'")'
	;;
mount) do_mount ;;
umount) umount_all "$root" ;;
path) echo "$root" ;;
*)
	echo "usage: $0 setup|mount|umount|path" >&2
	exit 2
	;;
esac
