#!/usr/bin/env bash
# run-all.sh -- every check elasticd has, in one command (what .ci/run runs).
#
# As root on Debian 12 it first installs whatever the checks need and is
# missing, and builds (or reuses) the Debian 13 root with torch 2.6 that the
# torch 2.x end-to-end tests run their workers in (tests/torch2/torch2-root.sh:
# about 6 minutes and 1.6 GiB the first time, under /var/cache/elasticd).
# Then, without stopping at a failure:
#   a. meson setup build; meson test (every suite: unit, fuzz replay, integration,
#      e2e with torch 1.13 and with torch 2.6, man page)
#   b. an ASan+UBSan build (build-asan): the unit, fuzz and integration suites
#   c. valgrind (memcheck) over the unit suite of build
#   d. a libFuzzer build with clang (build-fuzz): every fuzz target for
#      $FUZZ_SECONDS (default 20) seconds on a copy of its corpus
#   e. clang-format --dry-run --Werror over every tracked *.c / *.h
#   f. the Debian package: packaging/build-deb.sh (dpkg-buildpackage -us -uc -b);
#      as root, install it, run the installed elasticd --version, verify the
#      installed unit with systemd-analyze, then purge it again
# Every meson test result counts (OK and EXPECTEDFAIL pass; SKIP, FAIL,
# TIMEOUT, ERROR and UNEXPECTEDPASS fail: a skipped test is a defect here), plus
# one result per fuzz target and one for the format check; a build that fails
# counts as one failure. The last line is "N passed, M failed"; the exit status
# is 1 when M > 0.
set -u

cd "$(dirname "$0")/.." || exit 1
root=$(pwd)
py=/usr/bin/python3
fuzz_seconds=${FUZZ_SECONDS:-20}

passed=0
failed=0
failures=()

banner() {
	printf '\n==== %s ====\n' "$*"
}

pass() {
	passed=$((passed + 1))
}

fail() {
	failed=$((failed + 1))
	failures+=("$*")
	printf 'run-all.sh: FAILED: %s\n' "$*"
}

# --- packages ---------------------------------------------------------------

# libc6-dev and git: gcc only recommends libc, and the format check lists
# tracked files; groff-base and man-db render the man page test; systemd has
# systemd-analyze (the unit test); debhelper, dpkg-dev and build-essential
# (dpkg-checkbuilddeps requires it) build the .deb; debootstrap builds the
# torch 2.x root; libprotobuf-c-dev, protobuf-c-compiler (protoc-c) and
# libnghttp2-dev build etcd's gRPC messages and transport.
packages=(meson ninja-build pkg-config gcc libc6-dev libevent-dev libjansson-dev libhwloc-dev
	libprotobuf-c-dev protobuf-c-compiler libnghttp2-dev libcmocka-dev python3-torch
	etcd-server curl clang libclang-rt-14-dev clang-format valgrind scdoc hwloc python3
	man-db groff-base git systemd debhelper dpkg-dev build-essential debootstrap)

install_missing() {
	local missing=() p
	for p in "${packages[@]}"; do
		if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
			missing+=("$p")
		fi
	done
	if [ ${#missing[@]} -eq 0 ]; then
		echo "run-all.sh: every package is installed"
		return 0
	fi
	if [ "$(id -u)" -ne 0 ]; then
		echo "run-all.sh: missing packages: ${missing[*]} (run as root to install them)" >&2
		return 1
	fi
	echo "run-all.sh: installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get update &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}

banner "packages"
if ! command -v dpkg-query >/dev/null; then
	echo "run-all.sh: not a Debian system; assuming the tools are installed"
elif ! install_missing; then
	fail "installing packages"
fi

# --- the torch 2.x root -------------------------------------------------------

banner "torch 2.x root: tests/torch2/torch2-root.sh setup"
torch2_mounted=0
if [ "$(id -u)" -ne 0 ]; then
	fail "torch 2.x root: needs root (chroot, mount); the e2e *_torch2 tests will fail"
elif tests/torch2/torch2-root.sh setup; then
	torch2_mounted=1
else
	fail "torch 2.x root: tests/torch2/torch2-root.sh setup failed; the e2e *_torch2 tests will fail"
fi

# --- helpers ----------------------------------------------------------------

# meson_setup DIR [OPTION...]: configure DIR, or reconfigure it with the options.
meson_setup() {
	local dir=$1
	shift
	if [ -f "$dir/meson-private/coredata.dat" ]; then
		meson setup --reconfigure "$dir" "$@"
	else
		meson setup "$dir" "$@"
	fi
}

# count_tests NAME LOGDIR: add up the results in LOGDIR/runall*.json (the log
# of the meson test run just made); sets last_failed. Returns 1 when there is
# no result at all (that itself counts as one failure).
last_failed=0
count_tests() {
	local name=$1 logdir=$2 line n_pass n_fail rest
	local logs=("$logdir"/runall*.json)
	last_failed=0
	if [ ! -f "${logs[0]}" ]; then
		fail "$name: no test log (the build or meson test failed before running tests)"
		return 1
	fi
	line=$("$py" - "${logs[@]}" <<-'EOF'
		import json, sys
		good = {"OK", "EXPECTEDFAIL"}
		n_pass = n_fail = 0
		bad = []
		for path in sys.argv[1:]:
		    with open(path, encoding="utf-8", errors="replace") as f:
		        for raw in f:
		            raw = raw.strip()
		            if not raw:
		                continue
		            try:
		                t = json.loads(raw)
		            except ValueError:
		                n_fail += 1
		                bad.append("(unreadable test log line)")
		                continue
		            if t.get("result") in good:
		                n_pass += 1
		            else:
		                n_fail += 1
		                bad.append("%s %s" % (t.get("name", "?"), t.get("result", "?")))
		print(n_pass, n_fail, "; ".join(bad))
	EOF
	)
	read -r n_pass n_fail rest <<<"$line"
	case "${n_pass:-x}${n_fail:-x}" in
	*[!0-9]*)
		fail "$name: cannot read the test log"
		return 1
		;;
	esac
	passed=$((passed + n_pass))
	failed=$((failed + n_fail))
	last_failed=$n_fail
	echo "run-all.sh: $name: $n_pass passed, $n_fail failed"
	if [ "$n_fail" -gt 0 ]; then
		failures+=("$name: $rest")
	fi
	if [ $((n_pass + n_fail)) -eq 0 ]; then
		fail "$name: no test ran"
		return 1
	fi
	return 0
}

# run_meson_test NAME BUILDDIR [MESON TEST ARGS...]
run_meson_test() {
	local name=$1 dir=$2 rc
	shift 2
	rm -f "$dir"/meson-logs/runall*.json
	meson test -C "$dir" --print-errorlogs --logbase runall "$@"
	rc=$?
	# meson test failing while every counted result passed is still a failure.
	if count_tests "$name" "$dir/meson-logs" && [ "$last_failed" -eq 0 ] && [ "$rc" -ne 0 ]; then
		fail "$name: meson test exited with status $rc"
	fi
}

# --- a. default build, every suite ------------------------------------------

banner "a. meson setup build && meson test -C build"
if meson_setup build && ninja -C build; then
	run_meson_test "build" build
else
	fail "build: meson setup or ninja failed"
fi

# --- b. ASan + UBSan ---------------------------------------------------------

banner "b. ASan+UBSan: build-asan, suites unit fuzz integration"
if meson_setup build-asan -Db_sanitize=address,undefined -Db_lundef=false &&
	ninja -C build-asan; then
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		run_meson_test "build-asan" build-asan --suite unit --suite fuzz --suite integration
else
	fail "build-asan: meson setup or ninja failed"
fi

# --- c. valgrind -------------------------------------------------------------

banner "c. valgrind: build, suite unit"
if [ -f build/build.ninja ] && ninja -C build; then
	run_meson_test "valgrind" build --suite unit --timeout-multiplier 4 \
		--wrapper 'valgrind --error-exitcode=3 --leak-check=full --errors-for-leak-kinds=definite'
else
	fail "valgrind: build does not build"
fi

# --- d. libFuzzer ------------------------------------------------------------

banner "d. libFuzzer: build-fuzz, ${fuzz_seconds} s per target"
# A build-fuzz configured with another compiler cannot take -fsanitize=fuzzer.
if [ -f build-fuzz/meson-info/intro-compilers.json ] &&
	! grep -q '"id": "clang"' build-fuzz/meson-info/intro-compilers.json; then
	echo "run-all.sh: build-fuzz was not configured with clang; recreating it"
	rm -rf build-fuzz
fi
if CC=clang meson_setup build-fuzz -Dfuzzing=true -Db_sanitize=address,undefined \
	-Db_lundef=false && ninja -C build-fuzz; then
	targets=()
	for f in build-fuzz/tests/fuzz_*; do
		[ -f "$f" ] && [ -x "$f" ] && targets+=("$f")
	done
	if [ ${#targets[@]} -eq 0 ]; then
		fail "fuzz: no fuzz target was built"
	fi
	mkdir -p build-fuzz/artifacts
	for f in "${targets[@]}"; do
		t=$(basename "$f")
		corpus=$(mktemp -d "${TMPDIR:-/tmp}/elasticd-$t.XXXXXX")
		if [ -d "tests/fuzz/corpus/${t#fuzz_}" ]; then
			cp -R "tests/fuzz/corpus/${t#fuzz_}/." "$corpus/"
		fi
		echo "run-all.sh: $f -max_total_time=$fuzz_seconds (corpus copy $corpus)"
		if ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
			UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
			"$f" -max_total_time="$fuzz_seconds" -timeout=10 -verbosity=0 -print_final_stats=1 \
			-artifact_prefix="build-fuzz/artifacts/$t-" "$corpus"; then
			pass
			echo "run-all.sh: $t: passed"
		else
			fail "$t (crash input under build-fuzz/artifacts/)"
		fi
		rm -rf "$corpus"
	done
else
	fail "build-fuzz: meson setup or ninja failed"
fi

# --- e. clang-format ---------------------------------------------------------

banner "e. clang-format --dry-run --Werror"
sources=()
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	while IFS= read -r f; do
		[ -f "$f" ] && sources+=("$f")
	done < <(git ls-files -- '*.c' '*.h')
else
	while IFS= read -r f; do
		sources+=("$f")
	done < <(find src tests -name '*.c' -o -name '*.h' | sort)
fi
if [ ${#sources[@]} -eq 0 ]; then
	fail "clang-format: no source file found"
elif clang-format --dry-run --Werror "${sources[@]}"; then
	pass
	echo "run-all.sh: clang-format: ${#sources[@]} files formatted"
else
	fail "clang-format (fix with: clang-format -i FILE)"
fi

# --- f. Debian package --------------------------------------------------------

banner "f. Debian package: packaging/build-deb.sh"
deb_out=$root/build-deb
rm -rf "$deb_out"
if packaging/build-deb.sh "$deb_out" >"${TMPDIR:-/tmp}/elasticd-build-deb.log" 2>&1; then
	pass
	echo "run-all.sh: .deb built: $(ls "$deb_out"/elasticd_*.deb)"
else
	tail -n 40 "${TMPDIR:-/tmp}/elasticd-build-deb.log"
	fail "Debian package: packaging/build-deb.sh (log: ${TMPDIR:-/tmp}/elasticd-build-deb.log)"
fi
deb=$(ls "$deb_out"/elasticd_*_*.deb 2>/dev/null | head -n 1)
if [ -n "$deb" ] && [ "$(id -u)" -eq 0 ] && ! dpkg-query -W elasticd >/dev/null 2>&1; then
	# Install it for real, check it, and leave the machine as it was.
	if dpkg -i "$deb" && /usr/bin/elasticd --version | grep -q '^elasticd ' &&
		out=$(systemd-analyze verify elasticd@ci.service 2>&1) && [ -z "$out" ]; then
		pass
		echo "run-all.sh: .deb installs; /usr/bin/elasticd --version and systemd-analyze verify pass"
	else
		printf '%s\n' "${out:-}"
		fail "Debian package: install, elasticd --version or systemd-analyze verify"
	fi
	dpkg --purge elasticd >/dev/null || fail "Debian package: dpkg --purge elasticd"
elif [ -n "$deb" ]; then
	# Not root (or elasticd already installed here): run the packaged binary in place.
	x=$(mktemp -d "${TMPDIR:-/tmp}/elasticd-deb-x.XXXXXX")
	if dpkg-deb -x "$deb" "$x" && "$x/usr/bin/elasticd" --version | grep -q '^elasticd '; then
		pass
		echo "run-all.sh: the packaged elasticd --version runs (not installed here)"
	else
		fail "Debian package: the packaged elasticd --version"
	fi
	rm -rf "$x"
fi

# --- summary -----------------------------------------------------------------

if [ "$torch2_mounted" -eq 1 ]; then
	tests/torch2/torch2-root.sh umount
fi

banner "summary"
for f in "${failures[@]}"; do
	printf 'failed: %s\n' "$f"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
