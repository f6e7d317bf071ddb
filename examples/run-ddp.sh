#!/bin/sh
# run-ddp.sh -- build elasticd and run a real 2-worker PyTorch DDP job with it.
#
# As root on a fresh Debian 12 machine: installs the build dependencies and
# Debian's python3-torch when they are missing, builds elasticd into build/,
# then runs examples/ddp.py on 2 CPU workers (gloo) under
#   elasticd --standalone --nproc-per-node 2
# and exits with elasticd's exit status (0: every worker succeeded).
# Works from any directory.
set -eu

cd "$(dirname "$0")/.."

# libc6-dev: gcc only recommends it, and recommends are not installed below.
# scdoc builds the man pages (build/man/), man-db reads them (man -l).
# protobuf-c and nghttp2 build etcd's gRPC messages and transport.
packages="meson ninja-build pkg-config gcc libc6-dev libevent-dev libjansson-dev libhwloc-dev
libprotobuf-c-dev protobuf-c-compiler libnghttp2-dev libcmocka-dev scdoc man-db python3-torch"

missing=""
for p in $packages; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
if [ -n "$missing" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "run-ddp.sh: missing packages:$missing; run as root (sudo) to install them" >&2
		exit 1
	fi
	echo "run-ddp.sh: installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update
	# shellcheck disable=SC2086
	apt-get install -y --no-install-recommends $missing
fi

[ -f build/build.ninja ] || meson setup build
ninja -C build

echo "run-ddp.sh: PYTHON_EXEC=/usr/bin/python3 build/src/elasticd --standalone --nproc-per-node 2 examples/ddp.py"
status=0
PYTHON_EXEC=/usr/bin/python3 build/src/elasticd --standalone --nproc-per-node 2 examples/ddp.py || status=$?
echo "run-ddp.sh: elasticd exited with status $status"
exit "$status"
