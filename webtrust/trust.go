package webtrust

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/jwks/jwksfetch"
	"github.com/cardsign/cardsign/transparency"
)

// MaxLogKeyBytes bounds a file or response of log verifier keys: a few
// keys of about 100 bytes, with room for comments.
const MaxLogKeyBytes = 64 << 10

// ReadRevocations fetches (an http(s) URL through client) or reads (a
// file) the signed revocation document at src and verifies it with the
// trusted keys at now. maxAge, when positive, refuses a document issued
// longer ago than that: a verifier's bound on how stale a list of revoked
// keys it accepts.
func ReadRevocations(ctx context.Context, src string, client *http.Client, trusted jwks.KeyLookup, now time.Time, maxAge time.Duration) (jwks.Revocations, error) {
	// Read with the JWKS rules: size cap, no devices (a revocation
	// document of /dev/zero must not exhaust memory).
	data, err := jwksfetch.ReadDocument(ctx, src, client)
	if err != nil {
		return jwks.Revocations{}, fmt.Errorf("revocations: %w", err)
	}
	doc, err := jwks.VerifyRevocations(data, trusted, now)
	if err != nil {
		return jwks.Revocations{}, fmt.Errorf("revocation document %s: %w", jwks.RedactURL(src), err)
	}
	if maxAge > 0 && now.Sub(doc.IssuedAt) > maxAge {
		return jwks.Revocations{}, fmt.Errorf("revocation document %s: issued at %s, longer ago than the %s the trust policy allows (max_revocations_age)",
			jwks.RedactURL(src), doc.IssuedAt.UTC().Format(time.RFC3339), maxAge)
	}
	return doc, nil
}

// LoadLogKeys reads the transparency log's verifier keys from spec: a key
// itself (ORIGIN+HASH+BASE64), an http(s) URL serving keys one per line (as
// cardsignd does at /.well-known/cardsign-log-key), fetched with ctx through
// client (http.DefaultClient when nil), or a file of such lines. Either way
// at most 64 KiB is read. Errors do not repeat the flag's name.
func LoadLogKeys(ctx context.Context, spec string, client *http.Client) ([]transparency.Verifier, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, errors.New("empty: give the log's key ORIGIN+HASH+BASE64, a file of such keys, or the URL serving them (cardsignd: https://HOST" + transparency.KeyPath + ")")
	}
	text, err := readKeys(ctx, spec, client, func(s string) error {
		_, err := transparency.ParseVerifierKeys(s)
		return err
	}, "log key")
	if err != nil {
		return nil, err
	}
	vs, err := transparency.ParseVerifierKeys(text)
	if err != nil && !isURL(spec) && text != spec {
		return nil, fmt.Errorf("%s: %w", spec, err)
	}
	return vs, err
}

// LoadWitnessPolicy reads the witnesses' verifier keys from specs (each a
// key NAME+HASH+BASE64, a file of such keys one a line, or an http(s) URL
// serving them, as LoadLogKeys reads log keys) and requires quorum of them
// (0: all of them).
func LoadWitnessPolicy(ctx context.Context, specs []string, quorum int, client *http.Client) (transparency.WitnessPolicy, error) {
	var keys []string
	for _, spec := range specs {
		if strings.TrimSpace(spec) == "" {
			return transparency.WitnessPolicy{}, errors.New("empty: give a witness's verifier key NAME+HASH+BASE64, a file of such keys, or a URL serving them")
		}
		text, err := readKeys(ctx, spec, client, func(s string) error {
			_, err := transparency.ParseWitnessKey(s)
			return err
		}, "witness key")
		if err != nil {
			return transparency.WitnessPolicy{}, err
		}
		for _, line := range strings.Split(text, "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") && !slices.Contains(keys, line) {
				keys = append(keys, line)
			}
		}
	}
	if quorum == 0 {
		quorum = len(keys)
	}
	return transparency.NewWitnessPolicy(keys, quorum)
}

func isURL(spec string) bool {
	lower := strings.ToLower(strings.TrimSpace(spec))
	return strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://")
}

// readKeys returns the text of keys spec names: fetched from an http(s)
// URL, spec itself when isKey accepts it, or a file's contents; at most
// MaxLogKeyBytes. what names the keys in errors.
func readKeys(ctx context.Context, spec string, client *http.Client, isKey func(string) error, what string) (string, error) {
	spec = strings.TrimSpace(spec)
	if isURL(spec) {
		return fetchLogKeys(ctx, spec, client)
	}
	if isKey(spec) == nil {
		return spec, nil
	}
	st, err := os.Stat(spec)
	if err != nil {
		if strings.Contains(spec, "+") {
			return "", fmt.Errorf("%q is neither a %s nor a file: %v", spec, what, isKey(spec))
		}
		return "", fmt.Errorf("%s: %w", spec, unwrapPath(err))
	}
	// A device such as /dev/zero never ends, and a directory is no file
	// of keys; a pipe (--log-key <(…)) is fine.
	if m := st.Mode(); !m.IsRegular() && m&os.ModeNamedPipe == 0 {
		return "", fmt.Errorf("%s is not a regular file: give a file of %ss, one a line", spec, what)
	}
	f, err := os.Open(spec)
	if err != nil {
		return "", fmt.Errorf("%s: %w", spec, unwrapPath(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxLogKeyBytes+1))
	if err != nil {
		return "", fmt.Errorf("%s: %w", spec, err)
	}
	if len(b) > MaxLogKeyBytes {
		return "", fmt.Errorf("%s is over %d bytes: not a file of %ss", spec, MaxLogKeyBytes, what)
	}
	return string(b), nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func fetchLogKeys(ctx context.Context, src string, client *http.Client) (string, error) {
	if client == nil {
		client = http.DefaultClient
	}
	shown := src
	if u, err := url.Parse(src); err == nil {
		shown = u.Redacted()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return "", fmt.Errorf("%s: %w", shown, err)
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("GET %s: %w", shown, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: HTTP status %s", shown, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxLogKeyBytes+1))
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", shown, err)
	}
	if len(b) > MaxLogKeyBytes {
		return "", fmt.Errorf("GET %s: over %d bytes: not a list of log keys", shown, MaxLogKeyBytes)
	}
	return string(b), nil
}
