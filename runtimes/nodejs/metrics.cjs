'use strict';
// Function metrics in the Prometheus text format: calls, failures and a
// histogram of handler durations in seconds.

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180];

let calls = 0;
let failures = 0;
let sum = 0;
const counts = new Array(BUCKETS.length + 1).fill(0);

function call() {
  calls++;
}

function failure() {
  failures++;
}

function observe(seconds) {
  sum += seconds;
  let i = 0;
  while (i < BUCKETS.length && seconds > BUCKETS[i]) i++;
  counts[i]++;
}

function render() {
  const lines = [
    '# HELP function_calls_total Number of calls to the user function.',
    '# TYPE function_calls_total counter',
    `function_calls_total ${calls}`,
    '# HELP function_failures_total Number of user function calls that threw, rejected or timed out.',
    '# TYPE function_failures_total counter',
    `function_failures_total ${failures}`,
    '# HELP function_duration_seconds Duration of user function calls in seconds.',
    '# TYPE function_duration_seconds histogram',
  ];
  let cumulative = 0;
  for (let i = 0; i < BUCKETS.length; i++) {
    cumulative += counts[i];
    lines.push(`function_duration_seconds_bucket{le="${BUCKETS[i]}"} ${cumulative}`);
  }
  cumulative += counts[BUCKETS.length];
  lines.push(`function_duration_seconds_bucket{le="+Inf"} ${cumulative}`);
  lines.push(`function_duration_seconds_sum ${sum}`);
  lines.push(`function_duration_seconds_count ${cumulative}`);
  return lines.join('\n') + '\n';
}

module.exports = { call, failure, observe, render };
