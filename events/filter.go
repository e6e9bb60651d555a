package events

import (
	"fmt"
	"strings"

	"github.com/cardsign/cardsign/glob"
)

// Filter selects events by type: a list of type patterns ("*" matches any
// run of characters, "?" one), any of which may match. An empty filter
// takes every event.
type Filter struct{ patterns []string }

// NewFilter checks patterns: each must match at least one event type
// (Types, or the monitor's), so a misspelt type is an error rather than
// a sink that never hears anything.
func NewFilter(patterns []string) (Filter, error) {
	known := append(Types(), TypeLogCheckpoint, TypeMonitorMatch, TypeMonitorAlarm)
	for i, p := range patterns {
		if !glob.Valid(p) {
			return Filter{}, fmt.Errorf("types[%d]: %q is not a type pattern (want e.g. dev.cardsign.key.* or dev.cardsign.card.signed)", i, p)
		}
		matched := false
		for _, t := range known {
			if glob.Match(p, t) {
				matched = true
				break
			}
		}
		if !matched {
			return Filter{}, fmt.Errorf("types[%d]: %q matches no event type; the types are %s", i, p, strings.Join(known, ", "))
		}
	}
	return Filter{patterns: append([]string(nil), patterns...)}, nil
}

// Match reports whether the filter takes events of type t.
func (f Filter) Match(t string) bool {
	if len(f.patterns) == 0 {
		return true
	}
	for _, p := range f.patterns {
		if glob.Match(p, t) {
			return true
		}
	}
	return false
}
