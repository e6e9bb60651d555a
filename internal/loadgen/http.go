package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// HTTPOptions describe a GET load over keep-alive HTTP/1.1 connections, one
// per worker.
type HTTPOptions struct {
	URL         string // http://host:port/path
	IfNoneMatch string // sent as If-None-Match when not empty
	Concurrency int    // connections
	Warmup, Dur time.Duration
	Hooks       Hooks
}

// HTTPLoad writes one pre-built request per call and reads back only the
// status line, the headers it needs (Content-Length, Transfer-Encoding,
// Connection) and discards the body.
func HTTPLoad(o HTTPOptions) (*Result, error) {
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("%s: only http:// URLs", o.URL)
	}
	if o.Concurrency < 1 {
		return nil, fmt.Errorf("concurrency must be at least 1")
	}
	req := BuildRequest(u, o.IfNoneMatch)
	clients := make([]*rawClient, o.Concurrency)
	for i := range clients {
		clients[i] = &rawClient{addr: u.Host, req: req}
		defer clients[i].close()
	}
	// One request first: a server that does not answer is an error, not a
	// load result.
	if _, _, err := clients[0].do(); err != nil {
		return nil, fmt.Errorf("first request: %w", err)
	}
	return run(o.Concurrency, o.Warmup, o.Dur, o.Hooks, func(w int) (int, int, error) {
		return clients[w].do()
	}), nil
}

// BuildRequest returns the bytes of a keep-alive GET of u.
func BuildRequest(u *url.URL, ifNoneMatch string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: cardsign-loadgen\r\nAccept: */*\r\n", u.RequestURI(), u.Host)
	if ifNoneMatch != "" {
		fmt.Fprintf(&b, "If-None-Match: %s\r\n", ifNoneMatch)
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

type rawClient struct {
	addr string
	req  []byte
	conn net.Conn
	r    *bufio.Reader
}

func (c *rawClient) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// do sends the request and reads the response: body length and status.
func (c *rawClient) do() (int, int, error) {
	if c.conn == nil {
		conn, err := net.DialTimeout("tcp", c.addr, 10*time.Second)
		if err != nil {
			return 0, 0, err
		}
		c.conn = conn
		if c.r == nil {
			c.r = bufio.NewReaderSize(conn, 16<<10)
		} else {
			c.r.Reset(conn)
		}
	}
	if err := c.conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		c.close()
		return 0, 0, err
	}
	if _, err := c.conn.Write(c.req); err != nil {
		c.close()
		return 0, 0, err
	}
	n, status, keep, err := readResponse(c.r)
	if err != nil || !keep {
		c.close()
	}
	return n, status, err
}

var errChunked = errors.New("chunked response: the load generator reads Content-Length bodies only")

// readResponse reads one HTTP/1.1 response to a GET and discards its body.
func readResponse(r *bufio.Reader) (n, status int, keepAlive bool, err error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return 0, 0, false, err
	}
	// "HTTP/1.1 200 OK\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, 0, false, fmt.Errorf("bad status line %q", line)
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, 0, false, fmt.Errorf("bad status line %q", line)
	}
	keepAlive = line[7] == '1'
	length := -1
	for {
		h, err := r.ReadSlice('\n')
		if err != nil {
			return 0, status, false, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return 0, status, false, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			if !bytes.EqualFold(value, []byte("identity")) {
				return 0, status, false, errChunked
			}
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(value, []byte("close")) {
				keepAlive = false
			}
		}
	}
	if status == http.StatusNotModified || status == http.StatusNoContent || status < 200 {
		return 0, status, keepAlive, nil
	}
	if length < 0 {
		return 0, status, false, errors.New("response without Content-Length")
	}
	if _, err := r.Discard(length); err != nil {
		return 0, status, false, err
	}
	return length, status, keepAlive, nil
}

// Document is a fetched HTTP resource: its body and the headers a bare
// handler repeats.
type Document struct {
	Body         []byte
	ETag         string
	CacheControl string
	ContentType  string
	// Header holds the other response headers a bare handler repeats
	// (Vary, Access-Control-*, X-Content-Type-Options, ...): everything but
	// those above, Content-Length (the body's), Date (the server's own) and
	// the connection's.
	Header http.Header
}

// unmirrored are the response headers a mirror does not repeat from
// Header: set from the Document's fields, by net/http, or per connection.
var unmirrored = map[string]bool{
	"Etag": true, "Cache-Control": true, "Content-Type": true, "Content-Length": true,
	"Date": true, "Connection": true, "Keep-Alive": true, "Transfer-Encoding": true,
}

// Fetch GETs url once (net/http, no load) and returns its body and headers.
func Fetch(url string) (*Document, error) {
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	d := &Document{Body: body, ETag: resp.Header.Get("ETag"), CacheControl: resp.Header.Get("Cache-Control"), ContentType: resp.Header.Get("Content-Type"), Header: http.Header{}}
	for k, vs := range resp.Header {
		if !unmirrored[k] {
			d.Header[k] = vs
		}
	}
	return d, nil
}

// Status GETs url once with If-None-Match (when not empty) and returns the
// status code.
func Status(url, ifNoneMatch string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", ifNoneMatch)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// BareHandler is the reference the daemon's documents are compared with:
// a plain net/http handler that writes d's bytes and headers, and answers
// 304 when If-None-Match is d's ETag (with the headers but the body's
// Content-Type and X-Content-Type-Options, as the daemon does).
func BareHandler(d *Document) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		for k, vs := range d.Header {
			if k != "X-Content-Type-Options" {
				h[k] = vs
			}
		}
		if d.ETag != "" {
			h.Set("ETag", d.ETag)
		}
		if d.CacheControl != "" {
			h.Set("Cache-Control", d.CacheControl)
		}
		if d.ETag != "" && r.Header.Get("If-None-Match") == d.ETag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if vs, ok := d.Header["X-Content-Type-Options"]; ok {
			h["X-Content-Type-Options"] = vs
		}
		if d.ContentType != "" {
			h.Set("Content-Type", d.ContentType)
		}
		h.Set("Content-Length", strconv.Itoa(len(d.Body)))
		_, _ = w.Write(d.Body)
	})
}
