package apiroute

import (
	"time"
)

// created is when the oldest test APIRule was created.
var created = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// apirule returns an APIRule created age minutes after created, serving
// strings.
func apirule(namespace, name string, age int, hosts []string, rules ...Rule[string]) APIRule[string] {
	return APIRule[string]{
		Key:     Key{Namespace: namespace, Name: name},
		Created: created.Add(time.Duration(age) * time.Minute),
		Hosts:   hosts,
		Rules:   rules,
	}
}

// served marks a as served when last built.
func served(a APIRule[string]) APIRule[string] {
	a.Served = true
	return a
}

// rule returns a rule whose target is target.
func rule(path, target string, methods ...string) Rule[string] {
	return Rule[string]{Path: path, Methods: methods, Target: target}
}

// rules returns n rules "/r<i>" serving GET.
func rules(n int) []Rule[string] {
	rs := make([]Rule[string], n)
	for i := range rs {
		rs[i] = rule("/r"+string(rune('a'+i%26))+"/{**}", "r", "GET")
	}
	return rs
}

// hosts returns n hosts "<prefix><i>.example.com".
func hosts(prefix string, n int) []string {
	hs := make([]string, n)
	for i := range hs {
		hs[i] = prefix + string(rune('a'+i%26)) + string(rune('a'+i/26)) + ".example.com"
	}
	return hs
}

// testOptions are the options of most tests.
var testOptions = Options{DefaultDomain: "local.kfn.dev"}
