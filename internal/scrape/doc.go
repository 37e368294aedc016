// Package scrape is the /metrics handler of kfn's programs: it serves every
// series a registry could gather, even when one collector fails or two
// report the same series, and logs what it left out. One faulty collector
// then costs its own series, never the whole scrape (Prometheus' default
// answers 500 and drops all of them).
package scrape
