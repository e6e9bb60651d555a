//go:build cgo && !nopkcs11

package pkcs11

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	p11 "github.com/miekg/pkcs11"
)

// module is one loaded PKCS#11 library. The Backend owns exactly one per
// path, and is the only code in it that calls C_Initialize and C_Finalize:
// keeping those in one place is what makes recovery sound (see doc.go).
type module struct {
	path string
	log  *slog.Logger

	// rw is held shared around every call into ctx, and exclusively around
	// C_Finalize/C_Initialize: PKCS#11 leaves C_Finalize undefined while other
	// threads are inside the library. Signing takes it with TryRLock, so a
	// re-initialization in progress makes Sign fail fast instead of queueing.
	rw     sync.RWMutex
	ctx    *p11.Ctx
	gen    uint64 // counts our C_Initialize calls; guarded by rw
	owner  bool   // we initialized the library, so Close finalizes it; guarded by rw
	closed bool   // guarded by rw

	reinits atomic.Int64 // module re-initializations, for tests and logs
}

// loadModule dlopens path and initializes it. A library that another user in
// this process (another Backend, or crypto11) already initialized is shared:
// CKR_CRYPTOKI_ALREADY_INITIALIZED is success, and Close then leaves the
// library initialized.
func loadModule(path string, log *slog.Logger) (*module, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, &ModuleError{Path: path, Err: err}
	}
	if !st.Mode().IsRegular() {
		return nil, &ModuleError{Path: path, Err: errors.New("not a regular file")}
	}
	ctx := p11.New(path)
	if ctx == nil {
		return nil, &ModuleError{Path: path, Err: errors.New("cannot be loaded as a PKCS#11 library (dlopen or C_GetFunctionList failed)")}
	}
	m := &module{path: path, log: log.With("module", path), ctx: ctx, gen: 1}
	switch err := ctx.Initialize(); {
	case err == nil:
		m.owner = true
	case errors.Is(err, p11.Error(p11.CKR_CRYPTOKI_ALREADY_INITIALIZED)):
	default:
		ctx.Destroy()
		return nil, &ModuleError{Path: path, Err: fmt.Errorf("C_Initialize: %w", err)}
	}
	m.log.Info("pkcs11: module loaded", "initialized_here", m.owner)
	return m, nil
}

// reinit finalizes and re-initializes the library, which closes every
// session of every token of this module in this process. It is the last
// resort of a token's recovery; callers must hold no rw lock.
func (m *module) reinit() error {
	m.rw.Lock()
	defer m.rw.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.reinits.Add(1)
	// The result is ignored: CKR_CRYPTOKI_NOT_INITIALIZED (someone else
	// finalized) and a failing library are both cured, or not, by C_Initialize.
	_ = m.ctx.Finalize()
	m.gen++ // even on failure: whatever sessions existed are gone
	err := m.ctx.Initialize()
	if err != nil && !errors.Is(err, p11.Error(p11.CKR_CRYPTOKI_ALREADY_INITIALIZED)) {
		m.log.Warn("pkcs11: module re-initialization failed", "err", err)
		return fmt.Errorf("pkcs11: re-initialize module %s: %w", m.path, err)
	}
	m.owner = err == nil
	m.log.Warn("pkcs11: module re-initialized", "generation", m.gen)
	return nil
}

// close finalizes the library if we initialized it, then unloads our handle.
// Token sessions must already be closed.
func (m *module) close() {
	m.rw.Lock()
	defer m.rw.Unlock()
	if m.closed {
		return
	}
	m.closed = true
	if m.owner {
		_ = m.ctx.Finalize()
	}
	m.ctx.Destroy()
}
