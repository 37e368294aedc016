package v1alpha2

import "testing"

// FuzzCleanFastPath checks that skipping the regexps when no character needs
// removing never changes a result.
func FuzzCleanFastPath(f *testing.F) {
	for _, s := range []string{"shop", "/my.shop", "a b\tc", "x\vy", "a\u00a0b", "order.created.v1", `a\b*c>d`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := CleanSource(s), invalidSourceChars.ReplaceAllString(s, ""); got != want {
			t.Fatalf("CleanSource(%q) = %q, want %q", s, got, want)
		}
		if got, want := CleanEventType(s), invalidTypeChars.ReplaceAllString(s, ""); got != want {
			t.Fatalf("CleanEventType(%q) = %q, want %q", s, got, want)
		}
	})
}
