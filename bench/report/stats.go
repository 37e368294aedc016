package main

import (
	"cmp"
	"slices"

	"github.com/kfn-dev/kfn/bench/result"
)

// spread is the median of several repetitions with their minimum and maximum.
type spread struct {
	median, min, max float64
	n                int
}

// newSpread summarises xs; the zero spread (n == 0) stands for no data.
func newSpread(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{median: m, min: s[0], max: s[len(s)-1], n: len(s)}
}

// key identifies a figure across repetitions: its name and, for a point of
// a scaling curve, its x.
type key struct {
	name string
	x    float64
}

// aggregate is one figure over all repetitions.
type aggregate struct {
	key
	unit, xLabel, anchorName, note string
	value, anchor, ratio           spread
}

// summarise groups figures by key and summarises each group, in the order
// of the first appearance of each name and then by x.
func summarise(figs []result.Figure) []*aggregate {
	type acc struct {
		first                 result.Figure
		order                 int
		values, anchors, rats []float64
	}
	groups := map[key]*acc{}
	firstSeen := map[string]int{}
	for _, f := range figs {
		if _, ok := firstSeen[f.Name]; !ok {
			firstSeen[f.Name] = len(firstSeen)
		}
		k := key{f.Name, f.X}
		a := groups[k]
		if a == nil {
			a = &acc{first: f, order: firstSeen[f.Name]}
			groups[k] = a
		}
		a.values = append(a.values, f.Value)
		if f.Anchor != nil {
			a.anchors = append(a.anchors, f.Anchor.Value)
			if r := f.RatioOrComputed(); r != 0 {
				a.rats = append(a.rats, r)
			}
		}
	}
	out := make([]*aggregate, 0, len(groups))
	for k, a := range groups {
		g := &aggregate{key: k, unit: a.first.Unit, xLabel: a.first.XLabel, note: a.first.Note,
			value: newSpread(a.values), anchor: newSpread(a.anchors), ratio: newSpread(a.rats)}
		if a.first.Anchor != nil {
			g.anchorName = a.first.Anchor.Name
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b *aggregate) int {
		return cmp.Or(cmp.Compare(firstSeen[a.name], firstSeen[b.name]), cmp.Compare(a.x, b.x))
	})
	return out
}

// isCurve reports whether a is a point of a scaling curve.
func (a *aggregate) isCurve() bool { return a.xLabel != "" }

// verdict is "met", "MISSED" or "" (no target, or no data) for a figure.
func verdict(t target, a *aggregate) string {
	if t.met == nil || a == nil || a.value.n == 0 {
		return ""
	}
	if t.met(a.value.median, a.ratio.median) {
		return "met"
	}
	return "MISSED"
}
