package cli

import "testing"

// TestBoldHonoursNoColor checks https://no-color.org: any non-empty
// NO_COLOR turns the status table's bold off.
func TestBoldHonoursNoColor(t *testing.T) {
	tests := map[string]struct {
		noColor string
		want    string
	}{
		"unset": {noColor: "", want: "\x1b[1mkfn\x1b[0m"},
		"set":   {noColor: "1", want: "kfn"},
		"any":   {noColor: "false", want: "kfn"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv("NO_COLOR", tc.noColor)
			if got := bold("kfn"); got != tc.want {
				t.Errorf("bold with NO_COLOR=%q = %q, want %q", tc.noColor, got, tc.want)
			}
		})
	}
}
