# What the guests run from the host's filesystem, built on the host: the
# tests' verbs programs (selftests/progs/*.c, against the host's rdma-core;
# progs/preload/qp_timeout.c as a preloadable library),
# the MPI check program (selftests/progs/mpi/*.c, when mpicc is there) and
# the control tool. Source it; do not run it.
# shellcheck shell=bash

# build_test_bin DIR [mpi]: build everything into DIR, and with "mpi" the
# MPI program too (the cluster's); prints why and returns 1 on a failure.
build_test_bin() {
	local bin=$1 mpi=${2:-} src here repo
	here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	repo=$(cd "$here/.." && pwd)
	mkdir -p "$bin"
	for src in "$here"/progs/*.c; do
		[[ -e $src ]] || continue
		gcc -O2 -Wall -Werror -I"$here/progs" -o "$bin/$(basename "${src%.c}")" "$src" -libverbs ||
			{ echo "cannot build $src"; return 1; }
	done
	# Preloaded into rdma-core's example programs (see the source).
	gcc -O2 -Wall -Werror -shared -fPIC -o "$bin/qp_timeout.so" "$here/progs/preload/qp_timeout.c" -ldl ||
		{ echo "cannot build progs/preload/qp_timeout.c"; return 1; }
	if [[ $mpi == mpi ]] && command -v mpicc >/dev/null; then
		for src in "$here"/progs/mpi/*.c; do
			[[ -e $src ]] || continue
			mpicc -O2 -Wall -Werror -o "$bin/$(basename "${src%.c}")" "$src" ||
				{ echo "cannot build $src"; return 1; }
		done
	fi
	(cd "$repo" && cargo build --locked -q -p sroce --bin sroce) ||
		{ echo "cannot build the sroce tool (cargo build -p sroce)"; return 1; }
	cp "${CARGO_TARGET_DIR:-$repo/target}/debug/sroce" "$bin/sroce" ||
		{ echo "no sroce tool binary"; return 1; }
}
