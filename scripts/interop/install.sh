#!/usr/bin/env bash
# The Iceberg readers needle's interop tests run (crates/history/tests/iceberg.rs,
# crates/cli/tests/cli_iceberg.rs): pyiceberg and pyspark from PyPI, and Apache Iceberg's Spark
# runtime jar from Maven Central into .cache/iceberg-spark (Spark 4.1 with Iceberg 1.12; Java
# 17, on the machine, runs it). Idempotent.
#
#   scripts/interop/install.sh
#
# ICEBERG_SPARK_DIR puts the jar elsewhere than .cache/iceberg-spark.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
jars=${ICEBERG_SPARK_DIR:-$root/.cache/iceberg-spark}

die() { echo "install.sh: $*" >&2; exit 1; }

python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
  "pyiceberg[pyarrow,sql-sqlite]==0.12.0" "pyspark==4.1.4"

if [ ! -f "$jars/.complete" ]; then
  command -v mvn >/dev/null || die "Maven (mvn) is needed to fetch Iceberg's Spark runtime"
  mkdir -p "$jars"
  echo "fetching Iceberg's Spark runtime from Maven Central into $jars" >&2
  mvn -B -q -f "$here/pom.xml" dependency:copy-dependencies -DoutputDirectory="$jars" >&2
  touch "$jars/.complete"
fi
ls "$jars"/iceberg-spark-runtime-*.jar >/dev/null 2>&1 || die "no Iceberg Spark runtime in $jars"
echo "pyiceberg $(python3 -c 'import pyiceberg; print(pyiceberg.__version__)'), pyspark $(python3 -c 'import pyspark; print(pyspark.__version__)'), $(basename "$jars"/iceberg-spark-runtime-*.jar)"
