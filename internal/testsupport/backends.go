package testsupport

import (
	"strings"
	"testing"
)

// CheckErr checks a table case's err against want, a text the error must
// contain, or "" when the call must succeed. It reports whether the call
// succeeded as wanted, that is whether the case's result is worth checking
// further: a case that wants an error ends with it.
func CheckErr(t testing.TB, name string, err error, want string) bool {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: %v", name, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: error %v, want one containing %q", name, err, want)
	}
	return want == "" && err == nil
}
