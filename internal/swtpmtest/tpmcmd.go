package swtpmtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// TPM2_GetCapability, raw, over swtpm's command port (its socket protocol is
// the bare TPM command stream): the harness's check that swtpm is up and
// its TPM started, before tpm2-abrmd takes the port's one connection.
const (
	tpmSTNoSessions    = 0x8001
	tpmCCGetCapability = 0x0000017A
	tpmCapTPMProps     = 0x00000006
	tpmPTFamily        = 0x00000100 // TPM_PT_FAMILY_INDICATOR: "2.0"
)

// ping asks swtpm's TPM for its family indicator on a connection of its
// own, and checks that it is TPM 2.0.
func (p *TPM) ping() error {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port)), 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	cmd := binary.BigEndian.AppendUint16(nil, tpmSTNoSessions)
	cmd = binary.BigEndian.AppendUint32(cmd, 22)
	cmd = binary.BigEndian.AppendUint32(cmd, tpmCCGetCapability)
	cmd = binary.BigEndian.AppendUint32(cmd, tpmCapTPMProps)
	cmd = binary.BigEndian.AppendUint32(cmd, tpmPTFamily)
	cmd = binary.BigEndian.AppendUint32(cmd, 1)
	if _, err := c.Write(cmd); err != nil {
		return err
	}
	// tag, size, response code; moreData, capability, count, property, value
	resp := make([]byte, 10+1+4+4+8)
	if _, err := io.ReadFull(c, resp[:10]); err != nil {
		return fmt.Errorf("TPM2_GetCapability: %w", err)
	}
	if rc := binary.BigEndian.Uint32(resp[6:]); rc != 0 {
		return fmt.Errorf("TPM2_GetCapability: TPM response code 0x%X", rc)
	}
	if _, err := io.ReadFull(c, resp[10:]); err != nil {
		return fmt.Errorf("TPM2_GetCapability: %w", err)
	}
	if fam := resp[len(resp)-4:]; !bytes.Equal(fam, []byte("2.0\x00")) {
		return fmt.Errorf("TPM2_GetCapability: TPM family %q, want 2.0", fam)
	}
	return nil
}

// syncBuffer is a bytes.Buffer that a daemon's output goroutine writes
// while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
