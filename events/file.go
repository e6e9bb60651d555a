package events

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// The file sink's defaults.
const (
	DefaultFileMaxBytes = 100 << 20
	DefaultFileKeep     = 10
)

// FileConfig is a file sink's.
type FileConfig struct {
	// Path is the file events are appended to, one JSON line each.
	Path string
	// MaxBytes rotates the file before it would grow past this size
	// (DefaultFileMaxBytes when 0).
	MaxBytes int64
	// Keep is how many rotated files are kept: Path.1 (the newest) to
	// Path.Keep (DefaultFileKeep when 0).
	Keep int
	// Mode is the permission of files it creates (0600 when 0).
	Mode os.FileMode
}

// File is a sink that appends one JSON line per event to a file, for log
// shippers (Filebeat, Fluent Bit, Vector, the OpenTelemetry collector's
// filelog receiver), and rotates it by size as logrotate's "copytruncate"
// cannot do safely: the file is renamed to Path.1 (older ones shifting up
// to Path.Keep) and a new one is started. A batch is delivered once it is
// written and synced (fsync). A line cut short by a crash is removed when
// the file is opened again; its event is written again.
type File struct {
	cfg FileConfig

	mu   sync.Mutex
	f    *os.File
	size int64
}

// NewFile opens (or creates) the file.
func NewFile(cfg FileConfig) (*File, error) {
	if cfg.Path == "" || !filepath.IsAbs(cfg.Path) {
		return nil, fmt.Errorf("file sink path %q: want an absolute path", cfg.Path)
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultFileMaxBytes
	}
	if cfg.Keep <= 0 {
		cfg.Keep = DefaultFileKeep
	}
	if cfg.Mode == 0 {
		cfg.Mode = 0o600
	}
	s := &File{cfg: cfg}
	if err := s.open(); err != nil {
		return nil, err
	}
	return s, nil
}

// open opens the file for appending, cutting a partial last line.
func (s *File) open() error {
	f, err := os.OpenFile(s.cfg.Path, os.O_RDWR|os.O_CREATE, s.cfg.Mode)
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return fmt.Errorf("file sink %s: not a regular file (%v)", s.cfg.Path, err)
	}
	size, err := completeLines(f, st.Size())
	if err != nil {
		f.Close()
		return fmt.Errorf("file sink %s: %w", s.cfg.Path, err)
	}
	if _, err := f.Seek(size, io.SeekStart); err != nil {
		f.Close()
		return fmt.Errorf("file sink %s: %w", s.cfg.Path, err)
	}
	s.f, s.size = f, size
	return nil
}

// completeLines truncates f after its last newline (a line a crash cut
// short) and returns the size kept.
func completeLines(f *os.File, size int64) (int64, error) {
	if size == 0 {
		return 0, nil
	}
	const chunk = 64 << 10
	buf := make([]byte, chunk)
	end := size
	for end > 0 {
		start := max(end-chunk, 0)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			end = start + int64(i) + 1
			break
		}
		end = start
	}
	if end == size {
		return size, nil
	}
	if err := f.Truncate(end); err != nil {
		return 0, err
	}
	return end, f.Sync()
}

// Send appends msgs, rotating first when they would not fit, and syncs.
func (s *File) Send(_ context.Context, msgs []Message) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		if err := s.open(); err != nil {
			return 0, err
		}
	}
	var buf []byte
	for _, m := range msgs {
		buf = append(append(buf, m.JSON...), '\n')
	}
	if s.size > 0 && s.size+int64(len(buf)) > s.cfg.MaxBytes {
		if err := s.rotate(); err != nil {
			return 0, err
		}
	}
	if _, err := s.f.Write(buf); err != nil {
		s.closeLocked() // reopened, and its partial line cut, at the next Send
		return 0, fmt.Errorf("file sink %s: %w", s.cfg.Path, err)
	}
	if err := s.f.Sync(); err != nil {
		s.closeLocked()
		return 0, fmt.Errorf("file sink %s: sync: %w", s.cfg.Path, err)
	}
	s.size += int64(len(buf))
	return len(msgs), nil
}

// rotate shifts Path.i to Path.i+1 (dropping Path.Keep), renames Path to
// Path.1 and starts a new Path.
func (s *File) rotate() error {
	s.closeLocked()
	p := s.cfg.Path
	_ = os.Remove(p + "." + strconv.Itoa(s.cfg.Keep))
	for i := s.cfg.Keep - 1; i >= 1; i-- {
		if err := os.Rename(p+"."+strconv.Itoa(i), p+"."+strconv.Itoa(i+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("file sink: rotating: %w", err)
		}
	}
	if err := os.Rename(p, p+".1"); err != nil {
		return fmt.Errorf("file sink: rotating: %w", err)
	}
	if d, err := os.Open(filepath.Dir(p)); err == nil {
		_ = d.Sync() // the renames survive a crash
		d.Close()
	}
	return s.open()
}

func (s *File) closeLocked() {
	if s.f != nil {
		_ = s.f.Close()
		s.f = nil
	}
}

// Close closes the file.
func (s *File) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
	return nil
}
