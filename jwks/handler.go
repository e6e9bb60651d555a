package jwks

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// Handler serves the JWKS that source returns, for /.well-known/jwks.json.
// source is called once per request; caching Documents between transitions
// is the caller's choice (Render is cheap, but it reads the store).
//
// GET and HEAD only (anything else: 405 with Allow). The response has
// Content-Type application/jwk-set+json, the Document's ETag, Cache-Control
// "public, max-age=N" with N the whole seconds of MaxAge (rounded down, so
// never past the next transition), and Access-Control-Allow-Origin *. An
// If-None-Match naming the ETag (or "*") gets 304 without a body. When source
// fails the answer is 503 with a short fixed message: its error never
// reaches the client, so the source should log it.
func Handler(source func(ctx context.Context) (Document, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !checkMethod(w, r) {
			return
		}
		doc, err := source(r.Context())
		if err != nil {
			unavailable(w, "JWKS")
			return
		}
		etag := doc.ETag
		if etag == "" {
			etag = etagOf(doc.Body)
		}
		serve(w, r, resource{
			body:         doc.Body,
			etag:         etag,
			contentType:  MediaType,
			cacheControl: "public, max-age=" + strconv.FormatInt(int64(max(doc.MaxAge, 0)/time.Second), 10),
		})
	})
}
