package jwks

import (
	"context"
	"net/http"
)

// RevocationHandler serves the signed revocation document that source
// returns (for /.well-known/cardsign-revocations.json), with GET and HEAD
// only. Cache-Control is "no-cache": caches may keep the document but must
// revalidate it on every use, so a revocation reaches clients at once, while
// the ETag (the document's SHA-256, as for the JWKS) keeps revalidation to a
// 304. CORS is open, as for the JWKS. Source errors become 503 with a fixed
// message; the source should log them.
func RevocationHandler(source func(ctx context.Context) ([]byte, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !checkMethod(w, r) {
			return
		}
		body, err := source(r.Context())
		if err != nil {
			unavailable(w, "revocation document")
			return
		}
		serve(w, r, resource{
			body:         body,
			etag:         etagOf(body),
			contentType:  "application/json",
			cacheControl: "no-cache",
		})
	})
}
