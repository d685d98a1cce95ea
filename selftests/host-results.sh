# The host side's reading of a VM run's results (run.sh, cluster.sh): the
# lines vm-main.sh wrote to RESULTS/results, and the summary line every
# suite ends with. Source it; do not run it.
# shellcheck shell=bash

# count_results DIR: sets passed, failed and skipped from DIR/results.
count_results() {
	passed=0 failed=0 skipped=0
	[[ -f $1/results ]] || return 0
	passed=$(grep -c '^ok ' "$1/results")
	failed=$(grep -c '^FAIL ' "$1/results")
	skipped=$(grep -c '^skip ' "$1/results")
}

# print_summary: the last line, "N passed, N failed[, N skipped]"; returns 0
# iff nothing failed and something passed.
print_summary() {
	if ((skipped > 0)); then
		printf '%d passed, %d failed, %d skipped\n' "$passed" "$failed" "$skipped"
	else
		printf '%d passed, %d failed\n' "$passed" "$failed"
	fi
	((failed == 0 && passed > 0))
}
