package v1alpha2

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// SubjectPrefix is the first token of every event subject in JetStream.
const SubjectPrefix = "kyma"

// DefaultLegacyPrefix is the prefix of Kyma's legacy event types.
const DefaultLegacyPrefix = "sap.kyma.custom"

// emptySourceToken stands for a source that cleans to nothing (such as "/",
// a valid CloudEvents source), so its events still have a valid subject.
const emptySourceToken = "_"

var (
	// The characters of the two regexps below (\s is [\t\n\f\r ] in RE2),
	// to skip the regexps when there is nothing to remove.
	sourceCharsToRemove = "\t\n\f\r .>*/\\"
	typeCharsToRemove   = "\t\n\f\r >*/\\"
	// exactTypeForbidden are the characters an exact type cannot hold:
	// they would make its filter subject a wildcard or invalid.
	exactTypeForbidden = "\t\n\f\r *>"

	invalidSourceChars    = regexp.MustCompile(`[\s.>*/\\]`)
	invalidTypeChars      = regexp.MustCompile(`[\s>*/\\]`)
	invalidAppNameChars   = regexp.MustCompile(`\W|_`)
	invalidLegacyTypeChar = regexp.MustCompile(`[^a-zA-Z0-9.]`)
)

// ErrInvalidEventType is wrapped by errors about event types and sources
// that cannot be mapped to a subject.
var ErrInvalidEventType = errors.New("invalid event type")

// Bounds on what becomes part of a subject, in bytes, as written (before
// cleaning). NATS reads a message's subject on its protocol's control
// line, which is at most 4 KiB: a longer one makes the server close the
// connection that sent it, and with it every publish and delivery of the
// process (nats.go treats the close as final). With both bounds an event
// subject, kyma.<source>.<type>, is at most 2,054 bytes, and the subject
// of the JetStream request that creates a consumer filtering on it about
// 2,140: far below the limit, with room for the reply subject and sizes.
// Kyma has no bounds here (and shares the failure); a Subscription's
// types are bounded lower still by its CRD (512).
const (
	// MaxEventTypeLength bounds an event type.
	MaxEventTypeLength = 1024
	// MaxEventSourceLength bounds an event source, and so the source a
	// Subscription names.
	MaxEventSourceLength = 1024
)

// checkLengths refuses a source or type over its bound.
func checkLengths(source, eventType string) error {
	if len(eventType) > MaxEventTypeLength {
		return fmt.Errorf("%w: the type is %d bytes long, at most %d are allowed (NATS subjects)", ErrInvalidEventType, len(eventType), MaxEventTypeLength)
	}
	if len(source) > MaxEventSourceLength {
		return fmt.Errorf("%w: the source is %d bytes long, at most %d are allowed (NATS subjects)", ErrInvalidEventType, len(source), MaxEventSourceLength)
	}
	return nil
}

// CleanSource removes what a JetStream subject token cannot hold from an
// event source: whitespace and the characters . > * / \ (Kyma's rule).
func CleanSource(source string) string {
	if !strings.ContainsAny(source, sourceCharsToRemove) {
		return source // the common case, on every publish and delivery: no regexp
	}
	return invalidSourceChars.ReplaceAllString(source, "")
}

// CleanEventType removes whitespace and the characters > * / \ from an event
// type (Kyma's rule); dots stay, as subject token separators.
func CleanEventType(eventType string) string {
	if !strings.ContainsAny(eventType, typeCharsToRemove) {
		return eventType
	}
	return invalidTypeChars.ReplaceAllString(eventType, "")
}

// EventSubject returns the subject an event with the given source and type
// is stored under: kyma.<clean source>.<clean type>. The error wraps
// ErrInvalidEventType when the type is empty or has an empty segment, or
// the type or source is over its bound (MaxEventTypeLength,
// MaxEventSourceLength).
func EventSubject(source, eventType string) (string, error) {
	if err := checkLengths(source, eventType); err != nil {
		return "", err
	}
	cleanType := CleanEventType(eventType)
	if err := checkSegments(cleanType); err != nil {
		return "", fmt.Errorf("%w %q: %w", ErrInvalidEventType, eventType, err)
	}
	return SubjectPrefix + "." + sourceToken(source) + "." + cleanType, nil
}

// CleanTypes returns the Subscription's types with their cleaned forms, in
// spec order, for status.types. It is never nil.
func (s *Subscription) CleanTypes() []EventType {
	out := make([]EventType, 0, len(s.Spec.Types))
	for _, t := range s.Spec.Types {
		clean := t
		if s.Matching() == TypeMatchingStandard {
			clean = CleanEventType(t)
		}
		out = append(out, EventType{OriginalType: t, CleanType: clean})
	}
	return out
}

// FilterSubjects returns the JetStream subjects the Subscription's consumer
// filters on, de-duplicated, in spec order. Standard matching filters on
// the cleaned source and type (kyma.<clean source>.<clean type>). Exact
// matching follows Kyma, where a type is compared with the stored
// <clean source>.<clean type> form of an event: the filter is kyma.<type>,
// so the type names the source too ("shop.order.created.v1" receives type
// "order.created.v1" from source "shop"). A type with the legacy prefix
// (sap.kyma.custom), which Kyma stores without a source, is also taken from
// any source (kyma.*.<type>). Matches is the exact check behind the filters.
// The error wraps ErrInvalidEventType for a type that maps to no filter,
// or a type or source over its bound.
func (s *Subscription) FilterSubjects() ([]string, error) {
	for _, t := range s.Spec.Types {
		if err := checkLengths(s.Spec.Source, t); err != nil {
			return nil, err
		}
	}
	seen := make(map[string]bool, len(s.Spec.Types))
	out := make([]string, 0, len(s.Spec.Types))
	add := func(subject string) {
		if !seen[subject] {
			seen[subject] = true
			out = append(out, subject)
		}
	}
	for _, t := range s.Spec.Types {
		if s.Matching() != TypeMatchingExact {
			cleanType := CleanEventType(t)
			if err := checkSegments(cleanType); err != nil {
				return nil, fmt.Errorf("%w %q: %w", ErrInvalidEventType, t, err)
			}
			add(SubjectPrefix + "." + sourceToken(s.Spec.Source) + "." + cleanType)
			continue
		}
		// The type is the filter as written. One with / or \ matches
		// nothing, as in Kyma (stored subjects never hold them); whitespace,
		// * and > cannot be part of a filter that means the type itself.
		if strings.ContainsAny(t, exactTypeForbidden) {
			return nil, fmt.Errorf("%w %q: an exact type must not contain whitespace, '*' or '>'", ErrInvalidEventType, t)
		}
		if err := checkSegments(t); err != nil {
			return nil, fmt.Errorf("%w %q: %w", ErrInvalidEventType, t, err)
		}
		add(SubjectPrefix + "." + t)
		if IsLegacyEventType(t) {
			add(SubjectPrefix + ".*." + t)
		}
	}
	return withoutCovered(out), nil
}

// withoutCovered drops the subjects that another subject of the list
// covers (kyma.x.a.b under kyma.*.a.b): JetStream refuses a consumer whose
// filter subjects overlap.
func withoutCovered(subjects []string) []string {
	out := subjects[:0:0]
	for i, s := range subjects {
		covered := false
		for j, w := range subjects {
			if i != j && strings.Contains(w, "*") && !strings.Contains(s, "*") && subjectCovers(w, s) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, s)
		}
	}
	return out
}

// subjectCovers reports whether the filter w (with * wildcards) matches the
// literal subject s.
func subjectCovers(w, s string) bool {
	wt, st := strings.Split(w, "."), strings.Split(s, ".")
	if len(wt) != len(st) {
		return false
	}
	for i := range wt {
		if wt[i] != "*" && wt[i] != st[i] {
			return false
		}
	}
	return true
}

// IsLegacyEventType reports whether an event type starts with Kyma's legacy
// prefix, sap.kyma.custom. Kyma stores such events without their source.
func IsLegacyEventType(eventType string) bool {
	return strings.HasPrefix(eventType, DefaultLegacyPrefix+".")
}

// ExactKey returns the form of an event that an exact type is compared
// with, as Kyma stores it: the type itself for a legacy type, else
// <clean source>.<clean type>.
func ExactKey(source, eventType string) string {
	if IsLegacyEventType(eventType) {
		return eventType
	}
	return sourceToken(source) + "." + CleanEventType(eventType)
}

// Matches reports whether an event with the given source and type is one
// the Subscription asked for. Subjects already select events; Matches is
// the exact check behind them (cleaning can map two types to one subject).
// Standard matching compares cleaned sources and types; exact matching
// compares each type with ExactKey(source, eventType).
func (s *Subscription) Matches(source, eventType string) bool {
	if s.Matching() == TypeMatchingExact {
		key := ExactKey(source, eventType)
		for _, t := range s.Spec.Types {
			if t == key {
				return true
			}
		}
		return false
	}
	if sourceToken(source) != sourceToken(s.Spec.Source) {
		return false
	}
	clean := CleanEventType(eventType)
	for _, t := range s.Spec.Types {
		if CleanEventType(t) == clean {
			return true
		}
	}
	return false
}

// CleanApplicationName removes non-word characters and underscores from a
// Kyma application name (Kyma's rule for legacy event types).
func CleanApplicationName(app string) string {
	return invalidAppNameChars.ReplaceAllString(app, "")
}

// LegacyEventType builds the cleaned legacy event type of an event published
// by application app through Kyma's /{app}/v1/events API:
// <prefix>.<clean app>.<event>.<version>, with every character other than
// letters, digits and dots removed. An empty prefix is left out.
func LegacyEventType(prefix, app, event, version string) string {
	parts := []string{CleanApplicationName(app), event, version}
	if strings.TrimSpace(prefix) != "" {
		parts = append([]string{prefix}, parts...)
	}
	return invalidLegacyTypeChar.ReplaceAllString(strings.Join(parts, "."), "")
}

// ParseLegacyEventType splits a full legacy event type,
// <prefix>.<app>.<businessObject...>.<operation>.<version>, into the
// application as written, the event (the business-object segments joined
// into one, a dot, the operation) and the version, so that the application
// can be replaced (by an Application's application-type label, as Kyma's
// publisher does) before LegacyEventType cleans the whole. The error wraps
// ErrInvalidEventType when the prefix is missing or fewer than four
// non-empty segments follow it.
func ParseLegacyEventType(prefix, eventType string) (app, event, version string, err error) {
	rest := eventType
	if prefix != "" {
		if !strings.HasPrefix(eventType, prefix+".") {
			return "", "", "", fmt.Errorf("%w %q: does not start with the prefix %q", ErrInvalidEventType, eventType, prefix)
		}
		rest = strings.TrimPrefix(eventType, prefix+".")
	}
	parts := strings.Split(rest, ".")
	if len(parts) < 4 {
		return "", "", "", fmt.Errorf("%w %q: want <app>.<business object>.<operation>.<version> after the prefix", ErrInvalidEventType, eventType)
	}
	for _, p := range parts {
		if p == "" {
			return "", "", "", fmt.Errorf("%w %q: empty segment", ErrInvalidEventType, eventType)
		}
	}
	n := len(parts)
	return parts[0], strings.Join(parts[1:n-2], "") + "." + parts[n-2], parts[n-1], nil
}

func sourceToken(source string) string {
	if t := CleanSource(source); t != "" {
		return t
	}
	return emptySourceToken
}

func checkSegments(cleanType string) error {
	if cleanType == "" {
		return errors.New("empty after cleaning")
	}
	if strings.HasPrefix(cleanType, ".") || strings.HasSuffix(cleanType, ".") || strings.Contains(cleanType, "..") {
		return errors.New("empty segment")
	}
	return nil
}
