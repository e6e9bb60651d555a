package jwks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// Load reads a JWK Set from src: an http:// or https:// URL, fetched with ctx
// through client (http.DefaultClient when nil), or else a file path. Either
// way at most MaxSize bytes are read. Which src to trust is the caller's
// decision (DESIGN §4: a JWKS the verifier chose, or an allow-listed jku).
func Load(ctx context.Context, src string, client *http.Client) (Set, error) {
	if src == "" {
		return Set{}, errors.New("jwks: load: empty source")
	}
	var (
		data []byte
		err  error
	)
	lower := strings.ToLower(src)
	switch {
	case strings.HasPrefix(lower, "http://"), strings.HasPrefix(lower, "https://"):
		data, err = fetch(ctx, src, client)
	case strings.Contains(src, "://"):
		// Anything else that looks like a URL would otherwise be read as an
		// odd relative path and fail with a confusing "no such file".
		return Set{}, fmt.Errorf("jwks: load %s: unsupported URL scheme (use http://, https:// or a file path)", redact(src))
	default:
		data, err = readFile(ctx, src)
	}
	if err != nil {
		return Set{}, err
	}
	set, err := Parse(data)
	if err != nil {
		return Set{}, fmt.Errorf("jwks: load %s: %w", redact(src), err)
	}
	return set, nil
}

func fetch(ctx context.Context, src string, client *http.Client) ([]byte, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return nil, fmt.Errorf("jwks: load %s: %w", redact(src), err)
	}
	req.Header.Set("Accept", MediaType+", application/json")
	resp, err := client.Do(req)
	if err != nil {
		// *url.Error would print the URL with its query; name it redacted.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = fmt.Errorf("%s: %w", ue.Op, ue.Err)
		}
		return nil, fmt.Errorf("jwks: load %s: %w", redact(src), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jwks: load %s: unexpected HTTP status %s", redact(src), resp.Status)
	}
	return readCapped(resp.Body, "jwks: load "+redact(src))
}

func readFile(ctx context.Context, path string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("jwks: load %s: %w", path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("jwks: load: %w", err) // *PathError names the path
	}
	defer f.Close()
	return readCapped(f, "jwks: load "+path)
}

// readCapped reads r up to MaxSize bytes; one byte more is an error rather
// than a silently truncated (and then unparsable) document.
func readCapped(r io.Reader, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%s: document larger than %d bytes", what, MaxSize)
	}
	return data, nil
}

// redact drops credentials and the query from a URL before it goes into an
// error message; a JWKS URL may carry an access token.
func redact(src string) string {
	u, err := url.Parse(src)
	if err != nil || u.Scheme == "" {
		return src
	}
	u.User = nil
	if u.RawQuery != "" {
		u.RawQuery = "…"
	}
	u.Fragment = ""
	return u.String()
}
