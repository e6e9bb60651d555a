// Package jwksfetch reads JWK Sets and revocation documents from where a
// verifier was told to find them: an http(s) URL or a local file. It is
// kept apart from jwks so that what only parses and checks documents
// (signer among them) does not depend on net/http.
package jwksfetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/cardsign/cardsign/jwks"
)

// Load reads a JWK Set from src: an http:// or https:// URL, fetched with ctx
// through client (http.DefaultClient when nil), or else a file path. Either
// way at most jwks.MaxSize bytes are read. Which src to trust is the caller's
// decision (DESIGN §4: a JWKS the verifier chose, or an allow-listed jku).
func Load(ctx context.Context, src string, client *http.Client) (jwks.Set, error) {
	data, err := ReadDocument(ctx, src, client)
	if err != nil {
		return jwks.Set{}, fmt.Errorf("jwks: load %w", err)
	}
	set, err := jwks.Parse(data)
	if err != nil {
		return jwks.Set{}, fmt.Errorf("jwks: load %s: %w", jwks.RedactURL(src), err)
	}
	return set, nil
}

// StatusError is an HTTP answer other than 200 OK; callers that treat a
// missing document (404) differently from a broken one look for it.
type StatusError struct {
	URL    string // redacted
	Status string
	Code   int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: unexpected HTTP status %s", e.URL, e.Status)
}

// ReadDocument reads a JWKS or revocation document from src, an http(s)
// URL or a file path, with the rules Load applies: at most jwks.MaxSize bytes
// (one more is an error, not a truncation), and of local files only
// regular files and pipes (so "--jwks <(curl …)" works), never a device
// such as /dev/zero or a directory. Errors begin with the (redacted) src.
func ReadDocument(ctx context.Context, src string, client *http.Client) ([]byte, error) {
	if src == "" {
		return nil, errors.New("empty source")
	}
	lower := strings.ToLower(src)
	switch {
	case strings.HasPrefix(lower, "http://"), strings.HasPrefix(lower, "https://"):
		return fetch(ctx, src, client)
	case strings.Contains(src, "://"):
		// Anything else that looks like a URL would otherwise be read as an
		// odd relative path and fail with a confusing "no such file".
		return nil, fmt.Errorf("%s: unsupported URL scheme (use http://, https:// or a file path)", jwks.RedactURL(src))
	default:
		return readFile(ctx, src)
	}
}

func fetch(ctx context.Context, src string, client *http.Client) ([]byte, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", jwks.RedactURL(src), err)
	}
	req.Header.Set("Accept", jwks.MediaType+", application/json")
	resp, err := client.Do(req)
	if err != nil {
		// *url.Error would print the URL with its query; name it redacted.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = fmt.Errorf("%s: %w", ue.Op, ue.Err)
		}
		return nil, fmt.Errorf("%s: %w", jwks.RedactURL(src), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &StatusError{URL: jwks.RedactURL(src), Status: resp.Status, Code: resp.StatusCode}
	}
	return readCapped(resp.Body, jwks.RedactURL(src))
}

func readFile(ctx context.Context, path string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// Stat before Open: opening a device or FIFO can itself block or have
	// effects, and a device like /dev/zero never ends.
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, unwrapPathError(err))
	}
	if m := st.Mode(); !m.IsRegular() && m&fs.ModeNamedPipe == 0 {
		return nil, fmt.Errorf("%s: not a regular file (%s); give the path of a JSON document", path, fileKind(m))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, unwrapPathError(err))
	}
	defer f.Close()
	return readCapped(f, path)
}

// unwrapPathError drops the *fs.PathError wrapper, whose text would repeat
// the path the caller already names.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeCharDevice != 0, m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	default:
		return "mode " + m.String()
	}
}

// readCapped reads r up to jwks.MaxSize bytes; one byte more is an error rather
// than a silently truncated (and then unparsable) document.
func readCapped(r io.Reader, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, jwks.MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(data) > jwks.MaxSize {
		return nil, fmt.Errorf("%s: document larger than %d bytes", what, jwks.MaxSize)
	}
	return data, nil
}
