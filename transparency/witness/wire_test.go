package witness

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/cardsign/cardsign/transparency"
)

const checkpoint = "cardsign.example/log\n3\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n\n— cardsign.example/log AAAAAQ==\n"

func TestEncodeRequest(t *testing.T) {
	h := func(b byte) transparency.Hash {
		var x transparency.Hash
		x[0], x[31] = b, b
		return x
	}
	for _, tc := range []struct {
		name  string
		old   int64
		proof []transparency.Hash
		cp    string
		want  string // "" and err: refused
		err   string
	}{
		{"first", 0, nil, checkpoint, "old 0\n\n" + checkpoint, ""},
		{"with a proof", 2, []transparency.Hash{h(1), h(2)}, checkpoint,
			"old 2\nAQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE=\nAgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAI=\n\n" + checkpoint, ""},
		{"63 hashes", 1, make([]transparency.Hash, 63), checkpoint,
			"old 1\n" + strings.Repeat("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n", 63) + "\n" + checkpoint, ""},
		{"64 hashes", 1, make([]transparency.Hash, 64), checkpoint, "", "64 hashes, over the 63"},
		{"negative old", -1, nil, checkpoint, "", "negative"},
		{"no final newline", 0, nil, strings.TrimSuffix(checkpoint, "\n"), "", "ending in a newline"},
		{"empty checkpoint", 0, nil, "", "", "ending in a newline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := encodeRequest(tc.old, tc.proof, []byte(tc.cp))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %q, %v\nwant %q", got, err, tc.want)
			}
		})
	}
}

func TestParseResponse(t *testing.T) {
	const w = "witness.example/w1"
	line := "— witness.example/w1 AAAAAQAAAAAAAAAAAAAAAA==\n"
	for _, tc := range []struct {
		name   string
		status int
		ctype  string
		body   string
		cosigs int   // lines read (200)
		known  int64 // -1: none
		is     error // the error wraps it (nil and no err: an answer)
		err    string
	}{
		{"a cosignature", 200, "text/plain", line, 1, -1, nil, ""},
		{"two", 200, "", line + line, 2, -1, nil, ""},
		{"empty 200", 200, "", "", 0, -1, ErrRefused, "not cosignature lines"},
		{"no newline", 200, "", strings.TrimSuffix(line, "\n"), 0, -1, ErrRefused, "not cosignature lines"},
		{"another name", 200, "", "— witness.example/w2 AAAAAQAAAAAAAAAAAAAAAA==\n", 0, -1, ErrRefused, "not by the witness asked"},
		{"a short signature", 200, "", "— witness.example/w1 AAAA\n", 0, -1, ErrRefused, "not base64"},
		{"409 size", 409, "text/x.tlog.size", "42\n", 0, 42, nil, ""},
		{"409 size with parameters", 409, "text/x.tlog.size; charset=utf-8", "0\n", 0, 0, nil, ""},
		{"409 no newline", 409, "text/x.tlog.size", "42", 0, -1, ErrRefused, "does not carry a size"},
		{"409 leading zero", 409, "text/x.tlog.size", "042\n", 0, -1, ErrRefused, "does not carry a size"},
		{"409 plus sign", 409, "text/x.tlog.size", "+4\n", 0, -1, ErrRefused, "does not carry a size"},
		{"409 negative", 409, "text/x.tlog.size", "-1\n", 0, -1, ErrRefused, "does not carry a size"},
		{"409 overflow", 409, "text/x.tlog.size", "9223372036854775808\n", 0, -1, ErrRefused, "does not carry a size"},
		{"409 other type", 409, "text/plain", "42\n", 0, -1, nil, "without the Content-Type"},
		{"422", 422, "text/plain", "bad consistency proof\n", 0, -1, ErrConflict, "consistency proof does not match"},
		{"404", 404, "text/plain", "unknown log\n", 0, -1, ErrRefused, "register the log's origin and verifier key"},
		{"403", 403, "text/plain", "invalid signature\n", 0, -1, ErrRefused, "register the log's current verifier key"},
		{"400", 400, "text/plain", "bad request\n", 0, -1, ErrRefused, "malformed"},
		{"500 escaped", 500, "", "\x1b[31mboom\n", 0, -1, nil, `status 500: "\x1b[31mboom\n"`},
		{"503 cut", 503, "", strings.Repeat("x", 300), 0, -1, nil, `"…`},
		{"301", http.StatusMovedPermanently, "", "", 0, -1, nil, "status 301"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := parseResponse(tc.status, tc.ctype, w, []byte(tc.body))
			if tc.err != "" {
				if a.err == nil || !strings.Contains(a.err.Error(), tc.err) {
					t.Fatalf("err %v, want one with %q", a.err, tc.err)
				}
				if tc.is != nil && !errors.Is(a.err, tc.is) {
					t.Fatalf("err %v does not wrap %v", a.err, tc.is)
				}
				if errors.Is(a.err, ErrRefused) && errors.Is(a.err, ErrConflict) {
					t.Fatalf("err %v is both a refusal and a conflict", a.err)
				}
				return
			}
			if a.err != nil || len(a.cosigs) != tc.cosigs || a.known != tc.known {
				t.Fatalf("got %d cosignatures, known %d, %v; want %d, %d", len(a.cosigs), a.known, a.err, tc.cosigs, tc.known)
			}
		})
	}
}

// FuzzParseResponse: whatever a witness answers, the parser returns
// exactly one of cosignature lines (all by the witness asked), a size, or
// an error, and never panics.
func FuzzParseResponse(f *testing.F) {
	const w = "witness.example/w1"
	f.Add(200, "", []byte("— witness.example/w1 AAAAAQAAAAAAAAAAAAAAAA==\n"))
	f.Add(409, "text/x.tlog.size", []byte("42\n"))
	f.Add(422, "text/plain", []byte("bad consistency proof\n"))
	f.Add(200, "", []byte("— witness.example/w1 AAAA\n— x y\n"))
	f.Add(409, "text/x.tlog.size; a=b", []byte("\n"))
	f.Fuzz(func(t *testing.T, status int, ctype string, body []byte) {
		a := parseResponse(status, ctype, w, body)
		switch {
		case a.err != nil:
			if len(a.cosigs) != 0 || a.known != -1 {
				t.Fatalf("an error with an answer: %+v", a)
			}
		case a.known >= 0:
			if status != http.StatusConflict || len(a.cosigs) != 0 {
				t.Fatalf("a size from status %d: %+v", status, a)
			}
		default:
			if status != http.StatusOK || len(a.cosigs) == 0 || a.known != -1 {
				t.Fatalf("cosignatures from status %d: %+v", status, a)
			}
			for _, c := range a.cosigs {
				if c.Witness != w {
					t.Fatalf("a cosignature by %q", c.Witness)
				}
			}
		}
	})
}
