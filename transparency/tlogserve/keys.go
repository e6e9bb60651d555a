package tlogserve

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// KeysHandler serves the transparency log's verifier keys (vkeys, as
// transparency.Signer.VerifierKeys lists them), one per line, as cardsign
// verify --log-key and cardsign log monitor read them. Like the JWKS it is
// public and cached for maxAge (jwks.max_age): a new log key is listed
// beside the old one (both sign) for at least that long before the old one
// goes.
func KeysHandler(vkeys []string, maxAge time.Duration) http.Handler {
	body := []byte(strings.Join(vkeys, "\n") + "\n")
	age := int(maxAge.Seconds())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "public, max-age="+strconv.Itoa(max(age, 0)))
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(body)
	})
}
