#!/usr/bin/env bash
# `make fuzz SECONDS=N`: coverage-guided fuzzing on stable Rust. Builds the afl targets of fuzz/
# with cargo-afl, runs each for N seconds (default 60) with afl++'s afl-fuzz from its committed
# seeds (fuzz/corpus/<target>/) into fuzz/out/<target>/ (not kept in git), then prints per
# target what it ran and found, and exits non-zero when a target found a crash.
#
# afl-fuzz is the one cargo-afl builds with its runtime (`cargo afl fuzz`), not a system afl++:
# a fuzzer must speak its runtime's fork-server protocol, and Debian bookworm's afl++ 4.04c
# cannot start targets built with cargo-afl 0.18's runtime (afl++ 4.40c).
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Installs what it needs when it is missing: cargo-afl (cargo install; it needs a C compiler
# and make), and cargo-afl's afl++ for this compiler (cargo afl config --build). A crash's input
# lands in fuzz/out/<target>/default/crashes/: once fixed, copy it to fuzz/regressions/<target>/,
# where the normal test run replays it (see fuzz/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(parse bullet_json decode kafka_wire history_reader framing config protocols)
case "$secs" in
    '' | *[!0-9]*) echo "fuzz: SECONDS must be a whole number, not '$secs'" >&2; exit 2 ;;
esac

if ! cargo afl --version >/dev/null 2>&1; then
    echo "== installing cargo-afl (cargo install)"
    cargo install cargo-afl --locked
fi
# cargo-afl's afl++ (afl-fuzz and the instrumentation runtime), built once per compiler version
if ! out=$(cargo afl config --build 2>&1) && ! grep -q "already built" <<<"$out"; then
    echo "$out" >&2
    exit 1
fi

echo "== building the targets (cargo afl build --release)"
(cd fuzz && cargo afl build --release --locked)

# A container: no CPU frequency governor to check, crashes not piped to a core file, no UI,
# and no CPU to bind to (the cores are shared).
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 AFL_NO_AFFINITY=1

stat_of() { # stat_of FILE NAME... : the first of the named fuzzer_stats fields present
    local file=$1 name value
    shift
    for name in "$@"; do
        value=$(awk -F' *: *' -v k="$name" '$1 == k { print $2; exit }' "$file" 2>/dev/null)
        if [ -n "$value" ]; then
            echo "$value"
            return
        fi
    done
    echo "?"
}

summary=()
crashed=0
for t in "${targets[@]}"; do
    [ -d "fuzz/corpus/$t" ] || { echo "fuzz: no target $t (no fuzz/corpus/$t/)" >&2; exit 2; }
    out="fuzz/out/$t"
    rm -rf "$out"
    mkdir -p "$out"
    echo "== fuzzing $t for ${secs}s (log: $out/afl-fuzz.log)"
    status=0
    cargo afl fuzz -V "$secs" -t 2000 -i "fuzz/corpus/$t" -o "$out" -- "fuzz/target/release/$t" \
        >"$out/afl-fuzz.log" 2>&1 || status=$?
    stats="$out/default/fuzzer_stats"
    if [ ! -f "$stats" ]; then
        tail -n 30 "$out/afl-fuzz.log" >&2
        echo "fuzz: afl-fuzz did not run $t (exit $status)" >&2
        exit 1
    fi
    crashes=$(stat_of "$stats" saved_crashes unique_crashes)
    hangs=$(stat_of "$stats" saved_hangs unique_hangs)
    summary+=("$(printf '%-15s %8s %12s %8s %8s %6s' "$t" \
        "$(stat_of "$stats" run_time)" "$(stat_of "$stats" execs_done)" \
        "$(stat_of "$stats" corpus_count paths_total)" "$crashes" "$hangs")")
    if [ "$crashes" != "0" ]; then
        crashed=1
        echo "fuzz: $t crashed; inputs:" >&2
        ls "$out"/default/crashes/id:* >&2 || true
    fi
done

echo
printf '%-15s %8s %12s %8s %8s %6s\n' target seconds execs corpus crashes hangs
printf '%s\n' "${summary[@]}"
if [ "$crashed" -ne 0 ]; then
    echo "fuzz: crashes found (replay one: fuzz/target/release/<target> < <input>)" >&2
    exit 1
fi
