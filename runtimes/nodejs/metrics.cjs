'use strict';
// Function metrics in the Prometheus text format: calls, failures, and the
// handler durations twice: kfn's histogram in seconds, and Kyma's
// function_duration_miliseconds (sic) in milliseconds with the default
// boundaries of the OpenTelemetry SDK Kyma's Node.js runtime exports it
// with, so that dashboards written for Kyma read kfn's pods unchanged.

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180];
const KYMA_BUCKETS_MS = [0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000];

class Histogram {
  constructor(name, help, bounds) {
    this.name = name;
    this.help = help;
    this.bounds = bounds;
    this.counts = new Array(bounds.length + 1).fill(0);
    this.sum = 0;
  }

  observe(v) {
    this.sum += v;
    const b = this.bounds;
    let i = 0;
    while (i < b.length && v > b[i]) i++;
    this.counts[i]++;
  }

  render(lines) {
    lines.push(`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`);
    let cumulative = 0;
    for (let i = 0; i < this.bounds.length; i++) {
      cumulative += this.counts[i];
      lines.push(`${this.name}_bucket{le="${this.bounds[i]}"} ${cumulative}`);
    }
    cumulative += this.counts[this.bounds.length];
    lines.push(`${this.name}_bucket{le="+Inf"} ${cumulative}`);
    lines.push(`${this.name}_sum ${this.sum}`);
    lines.push(`${this.name}_count ${cumulative}`);
  }
}

let calls = 0;
let failures = 0;
const seconds = new Histogram('function_duration_seconds', 'Duration of user function calls in seconds.', BUCKETS);
const millis = new Histogram('function_duration_miliseconds', 'Duration of user function calls in milliseconds (Kyma\'s name and unit).', KYMA_BUCKETS_MS);

function call() {
  calls++;
}

function failure() {
  failures++;
}

function observe(s) {
  seconds.observe(s);
  millis.observe(s * 1000);
}

function render() {
  const lines = [
    '# HELP function_calls_total Number of calls to the user function.',
    '# TYPE function_calls_total counter',
    `function_calls_total ${calls}`,
    '# HELP function_failures_total Number of user function calls that threw, rejected or timed out.',
    '# TYPE function_failures_total counter',
    `function_failures_total ${failures}`,
  ];
  seconds.render(lines);
  millis.render(lines);
  return lines.join('\n') + '\n';
}

module.exports = { call, failure, observe, render };
