#!/usr/bin/env bash
# The Iceberg readers needle's interop tests run (crates/history/tests/iceberg.rs,
# crates/cli/tests/cli_iceberg.rs): pyiceberg and pyspark from PyPI, and Apache Iceberg's Spark
# runtime jar from Maven Central into .cache/iceberg-spark (Spark 4.1 with Iceberg 1.12; Java
# 17, on the machine, runs it), and Apache Iceberg's REST catalog test server with what it runs
# on into .cache/iceberg-rest (rest-catalog/pom.xml; the REST catalog tests start it with
# `java -cp '.cache/iceberg-rest/*' org.apache.iceberg.rest.RESTCatalogServer`). Idempotent.
#
#   scripts/interop/install.sh
#
# ICEBERG_SPARK_DIR puts the jar elsewhere than .cache/iceberg-spark, ICEBERG_REST_DIR the
# REST catalog's jars elsewhere than .cache/iceberg-rest.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
jars=${ICEBERG_SPARK_DIR:-$root/.cache/iceberg-spark}
rest=${ICEBERG_REST_DIR:-$root/.cache/iceberg-rest}

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

if [ ! -f "$rest/.complete" ]; then
  command -v mvn >/dev/null || die "Maven (mvn) is needed to fetch Iceberg's REST catalog server"
  mkdir -p "$rest"
  echo "fetching Iceberg's REST catalog test server from Maven Central into $rest" >&2
  mvn -B -q -f "$here/rest-catalog/pom.xml" dependency:copy-dependencies -DoutputDirectory="$rest" >&2
  touch "$rest/.complete"
fi
ls "$rest"/iceberg-open-api-*-test-fixtures.jar >/dev/null 2>&1 || die "no Iceberg REST catalog server in $rest"
echo "pyiceberg $(python3 -c 'import pyiceberg; print(pyiceberg.__version__)'), pyspark $(python3 -c 'import pyspark; print(pyspark.__version__)'), $(basename "$jars"/iceberg-spark-runtime-*.jar), $(basename "$rest"/iceberg-open-api-*-test-fixtures.jar)"
