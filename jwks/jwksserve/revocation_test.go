package jwksserve

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/cardsign/cardsign/jwks"
)

func TestRevocationHandler(t *testing.T) {
	doc := signedRevocations(t)
	fail := false
	h := RevocationHandler(func(context.Context) ([]byte, error) {
		if fail {
			return nil, errors.New("store: database is locked at /data/cardsign.db")
		}
		return doc, nil
	})
	ok := map[string]string{
		"Content-Type":                "application/json",
		"Cache-Control":               "no-cache",
		"ETag":                        jwks.ETagOf(doc),
		"Access-Control-Allow-Origin": "*",
	}
	inm := map[string][]string{"If-None-Match": {jwks.ETagOf(doc)}}
	check(t, "GET", h, http.MethodGet, nil, response{200, ok, string(doc)})
	check(t, "HEAD", h, http.MethodHead, nil, response{200, ok, ""})
	check(t, "If-None-Match", h, http.MethodGet, inm, response{304, map[string]string{"ETag": jwks.ETagOf(doc), "Cache-Control": "no-cache"}, ""})
	check(t, "If-None-Match stale", h, http.MethodGet, map[string][]string{"If-None-Match": {`"x"`}}, response{200, ok, string(doc)})
	check(t, "PUT", h, http.MethodPut, nil, response{405, map[string]string{"Allow": "GET, HEAD"}, "method not allowed\n"})
	fail = true
	check(t, "source error", h, http.MethodGet, nil, response{503, map[string]string{"ETag": ""}, "revocation document temporarily unavailable\n"})
}
