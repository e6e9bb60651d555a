package jwksserve

import (
	"bytes"
	"context"
	"net/http"
	"sync/atomic"
)

// RevocationCacheControl is the revocation document's Cache-Control: caches
// may keep the document but must revalidate it on every use, so a
// revocation reaches clients at once, while the ETag keeps revalidation to
// a 304.
const RevocationCacheControl = "no-cache"

// RevocationContentType is the revocation document's Content-Type.
const RevocationContentType = "application/json"

// NewRevocationStatic prepares a signed revocation document for serving
// (RevocationHandler's headers).
func NewRevocationStatic(doc []byte) *Static {
	return NewStatic(doc, "", RevocationContentType, RevocationCacheControl)
}

// RevocationHandler serves the signed revocation document that source
// returns (for /.well-known/cardsign-revocations.json), with GET and HEAD
// only. Cache-Control is "no-cache": caches may keep the document but must
// revalidate it on every use, so a revocation reaches clients at once, while
// the ETag (the document's SHA-256, as for the JWKS) keeps revalidation to a
// 304. CORS is open, as for the JWKS. Source errors become 503 with a fixed
// message; the source should log them.
//
// The headers of the last document served are kept and reused while source
// returns the same bytes, so the document is hashed once per change.
func RevocationHandler(source func(ctx context.Context) ([]byte, error)) http.Handler {
	var last atomic.Pointer[Static]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := fromSource(w, r, source, "revocation document")
		if !ok {
			return
		}
		s := last.Load()
		if s == nil || !bytes.Equal(s.body, body) {
			s = NewRevocationStatic(bytes.Clone(body)) // source may reuse its slice
			last.Store(s)
		}
		s.serve(w, r)
	})
}
