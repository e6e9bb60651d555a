package aicatalog

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"net/url"
	"strings"

	"github.com/cardsign/cardsign/strictjson"
)

// digestHash returns the hash of a digest algorithm cardsign accepts:
// SHA-256 and stronger, the names the specification's checker accepts.
func digestHash(alg string) (func() hash.Hash, bool) {
	switch alg {
	case "sha256":
		return sha256.New, true
	case "sha384":
		return sha512.New384, true
	case "sha512":
		return sha512.New, true
	}
	return nil, false
}

// checkDigestFormat reads "alg:hex" and returns the hash, or a Reason
// (CodeDigestFormatInvalid, CodeDigestAlgorithmWeak).
func checkDigestFormat(d string) (func() hash.Hash, []byte, error) {
	alg, hexv, ok := strings.Cut(d, ":")
	if !ok || alg == "" || !isAlgName(alg) {
		return nil, nil, Reason{CodeDigestFormatInvalid, fmt.Sprintf("digest %s is not \"algorithm:hex\"", q(d))}
	}
	h, ok := digestHash(alg)
	if !ok {
		return nil, nil, Reason{CodeDigestAlgorithmWeak, fmt.Sprintf("digest algorithm %s is not sha256, sha384 or sha512", q(alg))}
	}
	want, err := hex.DecodeString(hexv)
	if err != nil || len(want) != h().Size() || hex.EncodeToString(want) != hexv {
		return nil, nil, Reason{CodeDigestFormatInvalid, fmt.Sprintf("digest %s: want %d lowercase hex digits after %q", q(d), 2*h().Size(), alg+":")}
	}
	return h, want, nil
}

// sum is the digest of b under h.
func sum(h func() hash.Hash, b []byte) []byte {
	hh := h()
	hh.Write(b)
	return hh.Sum(nil)
}

func isAlgName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// optString returns member key of v when it is a string; present reports
// whether the member exists at all (a non-string counts as present and
// never equal to anything).
func optString(v strictjson.Value, key string) (s string, present, isString bool) {
	m, ok := v.Get(key)
	if !ok {
		return "", false, false
	}
	return m.Str, true, m.Kind == strictjson.String
}

// sameOptional reports whether member key is absent from both objects, or
// present in both as equal strings.
func sameOptional(a, b strictjson.Value, key string) bool {
	as, ap, astr := optString(a, key)
	bs, bp, bstr := optString(b, key)
	if !ap && !bp {
		return true
	}
	return ap && bp && astr && bstr && as == bs
}

// coverage applies Entry Release Coverage to an authenticated manifest:
// its subject must name the entry's release exactly, and every binding it
// has (digest, url) must hold, the digest over the artifact bytes.
func (vf *verifier) coverage(ctx context.Context, entry, manifest strictjson.Value, c *collector) {
	subj, _ := manifest.Get("subject")
	for _, m := range []struct{ key, code string }{{"identifier", CodeSubjectIdentifierMismatch}, {"type", CodeSubjectTypeMismatch}} {
		s, _, _ := optString(subj, m.key)
		e, _, _ := optString(entry, m.key)
		if !sameOptional(subj, entry, m.key) || !subj.Has(m.key) {
			c.add(m.code, "subject."+m.key, "%s is not the entry's %s", q(s), q(e))
		}
	}
	if !sameOptional(subj, entry, "version") {
		c.add(CodeVersionCoverageFailed, "subject.version", "subject and entry versions must be both absent or equal")
	}
	sd, hasDigest, _ := optString(subj, "digest")
	su, hasURL, urlIsString := optString(subj, "url")
	if !hasDigest && !hasURL {
		c.add(CodeSubjectWithoutBinding, "subject", "has neither digest nor url")
		return
	}
	if !sameOptional(subj, entry, "digest") {
		c.add(CodeDigestCoverageFailed, "subject.digest", "subject and entry digests must be both absent or equal")
	} else if hasDigest {
		vf.checkArtifact(ctx, entry, sd, c)
	}
	if hasURL {
		if u, err := url.Parse(su); !urlIsString || err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
			c.add(CodeSubjectURLNotHTTPS, "subject.url", "%s is not an absolute https URL", q(su))
		} else if !sameOptional(subj, entry, "url") {
			eu, _, _ := optString(entry, "url")
			c.add(CodeURLCoverageFailed, "subject.url", "%s is not the entry's url %s", q(su), q(eu))
		}
	}
}

// checkArtifact hashes the entry's artifact (the bytes at its url, or
// JCS of its data) and compares it with digest d.
func (vf *verifier) checkArtifact(ctx context.Context, entry strictjson.Value, d string, c *collector) {
	h, want, err := checkDigestFormat(d)
	if err != nil {
		addReasonErr(c, "subject.digest", err)
		return
	}
	content, err := vf.artifact(ctx, entry)
	if err != nil {
		c.add(CodeArtifactUnavailable, "subject.digest", "%v", err)
		return
	}
	if got := sum(h, content); string(got) != string(want) {
		c.add(CodeArtifactDigestMismatch, "subject.digest", "the artifact hashes to %s, not %s", q(hex.EncodeToString(got)), q(d))
	}
}

// artifact returns the bytes an entry's digest covers: JCS of inline data,
// or what the Fetcher returns for its url (fetched once per URL per
// verification).
func (vf *verifier) artifact(ctx context.Context, entry strictjson.Value) ([]byte, error) {
	if data, ok := entry.Get("data"); ok {
		b, err := data.JCS()
		if err != nil {
			return nil, fmt.Errorf("inline data is not RFC 8785 input: %w", err)
		}
		return b, nil
	}
	u, _, _ := optString(entry, "url")
	if o, ok := vf.artifacts[u]; ok {
		return o.data, o.err
	}
	var o artifactOutcome
	limit := vf.opts.MaxArtifacts
	if limit <= 0 {
		limit = DefaultMaxArtifacts
	}
	switch {
	case vf.opts.Fetcher == nil:
		o.err = fmt.Errorf("cannot fetch %s: no artifact fetcher", q(u))
	case vf.fetched >= limit:
		o.err = fmt.Errorf("not fetching %s: this verification has fetched %d artifacts, its cap", q(u), limit)
	default:
		vf.fetched++
		if o.data, o.err = vf.opts.Fetcher.FetchArtifact(ctx, u); o.err != nil {
			o.err = fmt.Errorf("fetching %s: %w", q(u), o.err)
		}
	}
	vf.artifacts[u] = o
	return o.data, o.err
}

type artifactOutcome struct {
	data []byte
	err  error
}

// extensionDigests checks the entry extensions a manifest's
// subject.extensionDigests selects: each key must name an entry extension
// whose RFC 8785 form hashes to the digest (sha256, sha384, sha512).
func extensionDigests(entry, manifest strictjson.Value) map[string]string {
	subj, _ := manifest.Get("subject")
	sel, ok := subj.Get("extensionDigests")
	if !ok || sel.Kind != strictjson.Object || len(sel.Obj) == 0 {
		return nil
	}
	exts, _ := entry.Get("extensions")
	out := make(map[string]string, len(sel.Obj))
	for _, m := range sel.Obj {
		out[m.Key] = ExtensionFailed
		ext, ok := exts.Get(m.Key)
		if !ok || m.Val.Kind != strictjson.String {
			continue
		}
		h, want, err := checkDigestFormat(m.Val.Str)
		if err != nil {
			continue
		}
		b, err := ext.JCS()
		if err != nil {
			continue
		}
		if string(sum(h, b)) == string(want) {
			out[m.Key] = ExtensionMatched
		}
	}
	return out
}
