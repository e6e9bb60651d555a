package witness

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	fnote "github.com/transparency-dev/formats/note"

	"github.com/cardsign/cardsign/transparency"
)

// ErrRefused is wrapped by the errors of a witness that answered but did
// not cosign: a refusal (400, 403, 404), a 409 naming the size it knows
// (the collector asks again from there), or an answer that is not a valid
// cosignature.
var ErrRefused = errors.New("no cosignature")

// maxResponse bounds what is read from a witness: a few cosignature lines,
// or a size, or an error message.
const maxResponse = 16 << 10

// maxProof is the most consistency-proof lines C2SP tlog-witness lets a
// client send (a proof between trees of up to 2^63 leaves).
const maxProof = 63

// chaser is one witness: its endpoint and what the collector knows of it.
type chaser struct {
	ep       Endpoint
	client   *http.Client
	url      string
	single   transparency.WitnessPolicy // ep alone, to verify its cosignatures
	keyHash  uint32
	requests sync.Mutex    // one add-checkpoint at a time: Round and Run may overlap
	wake     chan struct{} // a new target size (capacity 1)

	mu     sync.Mutex
	known  int64 // the size the witness is known to be at
	target int64 // the newest size of the log it should cosign
	st     WitnessStatus
}

func newChaser(ep Endpoint, o Options) (*chaser, error) {
	w, err := transparency.ParseWitnessKey(ep.Key)
	if err != nil {
		return nil, err
	}
	if ep.Name != "" && ep.Name != w.Name {
		return nil, fmt.Errorf("the name %q is not the name of its key %q", ep.Name, ep.Key)
	}
	v, err := fnote.NewVerifierForCosignatureV1(w.Key)
	if err != nil {
		return nil, fmt.Errorf("witness key %q: %v", w.Key, err)
	}
	u, err := addCheckpointURL(ep.URL)
	if err != nil {
		return nil, fmt.Errorf("witness %q: %w", w.Name, err)
	}
	ep.Witness = w
	client := ep.Client
	if client == nil {
		client = NewClient(o.RequestTimeout, nil)
	}
	return &chaser{
		ep: ep, client: client, url: u,
		single:  transparency.WitnessPolicy{Witnesses: []transparency.Witness{w}, Quorum: 1},
		keyHash: v.KeyHash(),
		wake:    make(chan struct{}, 1),
		st:      WitnessStatus{Name: w.Name, URL: ep.URL},
	}, nil
}

// addCheckpointURL is the add-checkpoint endpoint under the prefix u.
func addCheckpointURL(u string) (string, error) {
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return "", fmt.Errorf("url %q: want an http:// or https:// URL prefix", u)
	}
	return strings.TrimRight(u, "/") + "/add-checkpoint", nil
}

// NewClient is an HTTP client for witnesses: every phase of a request
// bounded by timeout (the collector's per-request context bounds the
// whole), response headers bounded in size, redirects not followed (a
// witness's endpoint is configured, not discovered). tlsConfig (nil: the
// system's roots) is for an https witness with its own CA.
func NewClient(timeout time.Duration, tlsConfig *tls.Config) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = timeout
	t.MaxResponseHeaderBytes = maxResponse
	if tlsConfig != nil {
		t.TLSClientConfig = tlsConfig
	}
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func (w *chaser) knownSize() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.known
}

func (w *chaser) setKnown(n int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.known = n
}

// cosignedSize is the largest size whose cosignature by w is stored.
func (w *chaser) cosignedSize() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st.Size
}

// raise raises the size w should cosign, waking its chase.
func (w *chaser) raise(size int64) {
	w.mu.Lock()
	raised := size > w.target
	w.target = max(w.target, size)
	w.mu.Unlock()
	if raised {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (w *chaser) want() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.target
}

func (w *chaser) status() WitnessStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st
}

// advance brings w to size: it sends the checkpoint of size with a proof
// from the size w is known at, follows the witness's 409 to the size it
// really knows, and stores the cosignature it returns.
func (c *Collector) advance(ctx context.Context, w *chaser, size int64) error {
	w.requests.Lock()
	defer w.requests.Unlock()
	for range maxCatchUp {
		if w.cosignedSize() >= size {
			return nil // cosigned already (by an overlapping Round)
		}
		old := w.knownSize()
		if old > size {
			n, err := c.beyond(ctx, w, old)
			if err != nil {
				return err
			}
			size = n
		}
		body, err := c.request(ctx, old, size)
		if err != nil {
			return c.failed(ctx, w, size, err)
		}
		start := time.Now()
		cp := body.checkpoint
		a := w.post(ctx, c.opts.RequestTimeout, body.bytes)
		if a.err == nil && a.known < 0 {
			a.cosigs, a.err = w.verify(cp, size, a.cosigs)
		}
		var conflict *ConflictError
		switch {
		case errors.As(a.err, &conflict):
			conflict.Witness, conflict.Size, conflict.Known = w.ep.Name, size, old
			c.opts.Observer.Answered(w.ep.Name, size, time.Since(start), conflict)
			return c.conflict(ctx, w, conflict)
		case a.err != nil:
			c.opts.Observer.Answered(w.ep.Name, size, time.Since(start), a.err)
			return c.failed(ctx, w, size, a.err)
		case a.known > size:
			n, err := c.beyond(ctx, w, a.known)
			if err != nil {
				// A 409 followed is counted below as the refusal it is;
				// only a conflict is answered here.
				c.opts.Observer.Answered(w.ep.Name, size, time.Since(start), err)
				return err
			}
			size = n
			fallthrough
		case a.known >= 0:
			err := fmt.Errorf("%w: witness %q knows size %d, not %d", ErrRefused, w.ep.Name, a.known, old)
			c.opts.Observer.Answered(w.ep.Name, size, time.Since(start), err)
			c.opts.Logger.InfoContext(ctx, "witness: catching up a witness from the size it knows",
				"witness", w.ep.Name, "known", a.known, "assumed", old, "size", size)
			if a.known == old {
				return c.failed(ctx, w, size, err) // a 409 that does not move us would loop
			}
			w.setKnown(a.known)
			continue
		}
		c.opts.Observer.Answered(w.ep.Name, size, time.Since(start), nil)
		if err := c.store.PutCosignatures(ctx, a.cosigs); err != nil {
			return c.failed(ctx, w, size, fmt.Errorf("storing the cosignatures of witness %q: %w", w.ep.Name, err))
		}
		w.mu.Lock()
		w.known = size
		w.st.Size, w.st.LastSuccess, w.st.LastError, w.st.Conflict = size, time.Now(), "", nil
		w.mu.Unlock()
		c.stored(ctx, w.ep.Name, size)
		return nil
	}
	return c.failed(ctx, w, size, fmt.Errorf("%w: witness %q kept moving after %d answers of the size it knows", ErrRefused, w.ep.Name, maxCatchUp))
}

// beyond is the log's size when w knows a tree of known leaves, larger
// than the size it was sent: ours if the log grew since, and then the
// log's new size; else one this log never had, a conflict (reported).
func (c *Collector) beyond(ctx context.Context, w *chaser, known int64) (int64, error) {
	n, err := c.log.Size(ctx)
	if err != nil {
		return 0, c.failed(ctx, w, known, fmt.Errorf("reading the log's size: %w", err))
	}
	if known > n {
		return 0, c.conflict(ctx, w, &ConflictError{Witness: w.ep.Name, Size: n, Known: known,
			Detail: fmt.Sprintf("the witness knows size %d, larger than the log's %d", known, n)})
	}
	return n, nil
}

// failed notes and logs a failure of w's; it returns err.
func (c *Collector) failed(ctx context.Context, w *chaser, size int64, err error) error {
	if ctx.Err() != nil {
		return err
	}
	w.mu.Lock()
	w.st.LastError = err.Error()
	w.mu.Unlock()
	c.opts.Logger.WarnContext(ctx, "witness: no cosignature", "witness", w.ep.Name, "size", size, "error", err)
	return err
}

// conflict notes, logs and reports a split-view alarm; it returns e.
func (c *Collector) conflict(ctx context.Context, w *chaser, e *ConflictError) error {
	w.mu.Lock()
	w.st.LastError, w.st.Conflict = e.Error(), e
	w.mu.Unlock()
	c.opts.Logger.ErrorContext(ctx, "witness: SPLIT VIEW: a witness saw a checkpoint of this log inconsistent with ours",
		"witness", e.Witness, "size", e.Size, "known", e.Known, "detail", e.Detail)
	c.opts.Observer.Conflict(e)
	return e
}

// addCheckpoint is an add-checkpoint request's body and the checkpoint it
// carries.
type addCheckpoint struct {
	bytes      []byte
	checkpoint []byte
}

// request builds the add-checkpoint request for the log's checkpoint of
// size, with the proof from old.
func (c *Collector) request(ctx context.Context, old, size int64) (addCheckpoint, error) {
	cp, err := c.log.CheckpointAt(ctx, size)
	if err != nil {
		return addCheckpoint{}, fmt.Errorf("the log's checkpoint of size %d: %w", size, err)
	}
	var proof []transparency.Hash
	if old > 0 && old < size {
		if proof, err = c.log.ConsistencyProof(ctx, old, size); err != nil {
			return addCheckpoint{}, fmt.Errorf("the log's consistency proof from %d to %d: %w", old, size, err)
		}
	}
	b, err := encodeRequest(old, proof, cp)
	return addCheckpoint{bytes: b, checkpoint: cp}, err
}

// encodeRequest is the body of an add-checkpoint request (C2SP
// tlog-witness): "old N", the proof's hashes in base64 one per line, an
// empty line, and the signed checkpoint.
func encodeRequest(old int64, proof []transparency.Hash, checkpoint []byte) ([]byte, error) {
	if old < 0 {
		return nil, fmt.Errorf("old size %d is negative", old)
	}
	if len(proof) > maxProof {
		return nil, fmt.Errorf("the consistency proof has %d hashes, over the %d a witness accepts", len(proof), maxProof)
	}
	if len(checkpoint) == 0 || checkpoint[len(checkpoint)-1] != '\n' {
		return nil, errors.New("the checkpoint is not a signed note ending in a newline")
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "old %d\n", old)
	for _, h := range proof {
		b.WriteString(base64.StdEncoding.EncodeToString(h[:]))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.Write(checkpoint)
	return b.Bytes(), nil
}

// answer is a witness's response, read: its cosignatures (unverified),
// or the size it knows (known ≥ 0, a 409), or why neither.
type answer struct {
	cosigs []transparency.Cosignature
	known  int64
	err    error
}

// post sends the request body to w and reads its answer, bounded in time
// and size.
func (w *chaser) post(ctx context.Context, timeout time.Duration, body []byte) answer {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return answer{known: -1, err: fmt.Errorf("witness %q: %w", w.ep.Name, err)}
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	resp, err := w.client.Do(req)
	if err != nil {
		return answer{known: -1, err: fmt.Errorf("witness %q: %w", w.ep.Name, err)}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return answer{known: -1, err: fmt.Errorf("witness %q: reading its answer: %w", w.ep.Name, err)}
	}
	if len(raw) > maxResponse {
		return answer{known: -1, err: fmt.Errorf("%w: witness %q answered more than %d bytes", ErrRefused, w.ep.Name, maxResponse)}
	}
	a := parseResponse(resp.StatusCode, resp.Header.Get("Content-Type"), w.ep.Name, raw)
	if a.err != nil {
		a.err = fmt.Errorf("witness %q: %w", w.ep.Name, a.err)
	}
	return a
}

// parseResponse reads a witness's answer to add-checkpoint. The
// cosignatures of a 200 are parsed, not verified (verify does).
func parseResponse(status int, contentType, witness string, body []byte) answer {
	detail := quoted(body)
	switch {
	case status == http.StatusOK:
		cs, err := transparency.ParseCosignatures(0, witness, body)
		if err != nil {
			return answer{known: -1, err: fmt.Errorf("%w: its answer is not cosignature lines: %v", ErrRefused, err)}
		}
		return answer{cosigs: cs, known: -1}
	case status == http.StatusConflict:
		mt, _, _ := mime.ParseMediaType(contentType)
		if mt != "text/x.tlog.size" {
			return answer{known: -1, err: fmt.Errorf("409 without the Content-Type text/x.tlog.size (got %q): %s", contentType, detail)}
		}
		s, ok := strings.CutSuffix(string(body), "\n")
		n, err := strconv.ParseInt(s, 10, 64)
		if !ok || err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
			return answer{known: -1, err: fmt.Errorf("%w: its 409 does not carry a size and a newline: %s", ErrRefused, detail)}
		}
		return answer{known: n}
	case status == http.StatusUnprocessableEntity:
		return answer{known: -1, err: &ConflictError{Known: -1, Detail: "the consistency proof does not match the tree the witness saw (422): " + detail}}
	case status == http.StatusNotFound:
		return answer{known: -1, err: fmt.Errorf("%w: the witness does not know the log (404: register the log's origin and verifier key at the witness): %s", ErrRefused, detail)}
	case status == http.StatusForbidden:
		return answer{known: -1, err: fmt.Errorf("%w: the witness does not accept the log's signature (403: register the log's current verifier key at the witness): %s", ErrRefused, detail)}
	case status == http.StatusBadRequest:
		return answer{known: -1, err: fmt.Errorf("%w: the witness calls the request malformed (400): %s", ErrRefused, detail)}
	default:
		return answer{known: -1, err: fmt.Errorf("status %d: %s", status, detail)}
	}
}

// verify keeps the cosignatures of the checkpoint cp of size that verify
// under w's key. A line under w's key that does not verify refuses the
// answer; lines under other keys of w's name (another algorithm) are
// dropped; an answer with no valid line is refused.
func (w *chaser) verify(cp []byte, size int64, cs []transparency.Cosignature) ([]transparency.Cosignature, error) {
	var out []transparency.Cosignature
	for _, c := range cs {
		c.Size = size
		raw, _ := base64.StdEncoding.DecodeString(c.Signature) // ParseCosignatures checked it
		if len(raw) < 4 || uint32(raw[0])<<24|uint32(raw[1])<<16|uint32(raw[2])<<8|uint32(raw[3]) != w.keyHash {
			continue
		}
		msg, err := transparency.AddCosignatures(cp, []transparency.Cosignature{c})
		if err != nil {
			return nil, fmt.Errorf("%w: witness %q: %v", ErrRefused, w.ep.Name, err)
		}
		if len(w.single.Vouches(msg)) != 1 {
			return nil, fmt.Errorf("%w: witness %q returned a cosignature that does not verify under its key %q for the checkpoint of size %d: %q", ErrRefused, w.ep.Name, w.ep.Key, size, c.Line())
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: witness %q returned no cosignature under its key %q", ErrRefused, w.ep.Name, w.ep.Key)
	}
	return out, nil
}

// quoted is a witness's text for an error message: escaped, and cut.
func quoted(b []byte) string {
	const most = 200
	if len(b) > most {
		return strconv.Quote(string(b[:most])) + "…"
	}
	return strconv.Quote(string(b))
}
