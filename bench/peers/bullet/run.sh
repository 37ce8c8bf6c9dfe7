#!/usr/bin/env bash
# Builds the Bullet peer (once; again only when its sources change) and runs it with the given arguments.
#   bench/peers/bullet/run.sh --records FILE.ndjson --queries FILE.bql [--repeat N] [--format json]
# Build: `mvn -B -q package` (compiles, runs the tests, shades one jar). Offline first, so that after the first
# build (which fills ~/.m2 from Maven Central) it needs no network; online only if something is missing.
# JAVA_OPTS is passed to java.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
jar="$here/target/bullet-peer-0.1.0.jar"

stale=1
if [[ -f "$jar" ]]; then
    if [[ -z "$(find "$here/pom.xml" "$here/src" -newer "$jar" -print -quit)" ]]; then
        stale=0
    fi
fi
if [[ $stale -eq 1 ]]; then
    echo "building the Bullet peer (mvn -B -q package)..." >&2
    if ! (cd "$here" && mvn -B -q -o -Dstyle.color=never package >&2 2>/dev/null); then
        (cd "$here" && mvn -B -q -Dstyle.color=never package >&2)
    fi
fi
# shellcheck disable=SC2086
exec java ${JAVA_OPTS:-} -jar "$jar" "$@"
