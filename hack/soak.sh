#!/usr/bin/env bash
# make soak: runs the e2e packages most exposed to races (gangs, queues, elastic jobs, job flows,
# upstream PodGroups) SOAK_RUNS times in a row (default 10), each run on fresh control planes, and
# writes what every run gave to SOAK_REPORT (default docs/soak.md): a flaky test is a bug, and
# this is how one is found before CI finds it. Logs of failed runs stay in bin/soak/.
#
# Exits non-zero if any run failed.
set -uo pipefail
cd "$(dirname "$0")/.."

runs=${SOAK_RUNS:-10}
read -r -a packages <<<"${SOAK_PACKAGES:-./test/e2e/gang ./test/e2e/queue ./test/e2e/elastic ./test/e2e/flow ./test/e2e/upstream ./test/e2e/preemption}"
report=${SOAK_REPORT:-docs/soak.md}
logs=bin/soak/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$logs"

commit=$(git describe --always --dirty 2>/dev/null || echo unknown)
started=$(date -u +%Y-%m-%dT%H:%MZ)
rows=()
failures=0
# write_report writes what the runs so far gave, after each run, so that a soak cut short still
# says how far it got.
write_report() {
	{
		echo "# Soak"
		echo
		echo "\`make soak\` runs the e2e packages most exposed to races ${runs} times in a row, each run on"
		echo "fresh local control planes, on one machine (2 cores). A flaky test is a bug: any failure here"
		echo "is investigated, never retried away. Logs of failed runs are kept in \`$logs\`."
		echo
		echo "Commit \`$commit\`, started $started: **$failures of $done_runs runs failed** ($done_runs of $runs done)."
		echo
		header="| run | commit |"
		rule="| --- | --- |"
		for pkg in "${packages[@]}"; do
			header+=" ${pkg#./test/e2e/} |"
			rule+=" --- |"
		done
		echo "$header time |"
		echo "$rule --- |"
		printf '%s\n' "${rows[@]}"
	} >"$report"
}

for i in $(seq 1 "$runs"); do
	log="$logs/run-$i.log"
	at=$(git describe --always --dirty 2>/dev/null || echo unknown)
	begin=$(date +%s)
	CGO_ENABLED=0 go test -count=1 -timeout 40m "${packages[@]}" >"$log" 2>&1
	status=$?
	secs=$(($(date +%s) - begin))
	cells=()
	for pkg in "${packages[@]}"; do
		name=github.com/tephra-dev/tephra/${pkg#./}
		# go test prints a package's failed tests, then its "ok" or "FAIL" line.
		result=$(awk -v pkg="$name" '
			/^--- FAIL: / { failed = failed " " $3 }
			($1 == "ok" || $1 == "FAIL") && $2 == pkg { print ($1 == "ok" ? "ok" : "FAIL" failed); found = 1; exit }
			($1 == "ok" || $1 == "FAIL") && $2 ~ /^github.com\// { failed = "" }
			END { if (!found) print "did not finish" }' "$log")
		cells+=("$result")
	done
	if [ "$status" -ne 0 ]; then
		failures=$((failures + 1))
	else
		rm -f "$log"
	fi
	row="| $i | \`$at\` | $(IFS='|'; echo "${cells[*]}" | sed 's/|/ | /g') | ${secs} s |"
	rows+=("$row")
	echo "soak run $i of $runs: exit $status in ${secs} s"
	done_runs=$i
	write_report
done

echo "wrote $report: $failures of $runs runs failed"
[ "$failures" -eq 0 ]
