#!/usr/bin/env bash
# Runs the event bridge benchmark (kfn beside the bare pipeline, same run).
# Flags are passed on, for example: bench/eventbridge/run.sh -duration 10s
set -euo pipefail
cd "$(dirname "$0")/../.."
exec go run ./bench/eventbridge "$@"
