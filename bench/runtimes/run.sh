#!/bin/sh
# Benchmarks the kfn Node.js and Python function hosts against plain
# node:http and ThreadingHTTPServer hello worlds in one run and prints the
# table with ratios. Flags are passed on (see -help), for example:
#   bench/runtimes/run.sh -duration 5s -rounds 3 -json /tmp/runtimes.json
set -eu
cd "$(dirname "$0")/../.."
exec go run ./bench/runtimes "$@"
