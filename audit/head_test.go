package audit

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestHeadParseRoundTrip(t *testing.T) {
	h := Head{Seq: 7, Hash: bytes.Repeat([]byte{0xab}, HashSize)}
	got, err := ParseHead(h.String())
	if err != nil || got.Seq != 7 || !bytes.Equal(got.Hash, h.Hash) {
		t.Fatalf("ParseHead(%q) = %+v, %v", h.String(), got, err)
	}
	for _, bad := range []string{"", "7", "x:" + strings.Repeat("ab", 32), "-1:" + strings.Repeat("ab", 32), "7:abcd", "7:" + strings.Repeat("zz", 32)} {
		if _, err := ParseHead(bad); err == nil {
			t.Errorf("ParseHead(%q) accepted it", bad)
		}
	}
}

func TestHeadCheck(t *testing.T) {
	h7 := bytes.Repeat([]byte{7}, HashSize)
	other := bytes.Repeat([]byte{8}, HashSize)
	h := Head{Seq: 7, Hash: h7}
	tests := []struct {
		name    string
		head    Head
		lastSeq int64
		atHead  []byte
		want    error
		msg     string
	}{
		{"at the head", h, 7, h7, nil, ""},
		{"past the head", h, 9, h7, nil, ""},
		{"empty head", Head{Hash: Genesis()}, 0, nil, nil, ""},
		{"truncated", h, 4, nil, ErrTruncated, "audit log truncated: the published head is record 7 (hash 0707"},
		{"emptied", h, 0, nil, ErrTruncated, "but the log ends at record 0"},
		{"rewritten", h, 9, other, ErrRewritten, "audit log rewritten at record 7: the published head has hash 0707"},
		{"record missing", h, 9, nil, ErrRewritten, "has no record 7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.head.Check(tt.lastSeq, tt.atHead)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.msg)) {
				t.Fatalf("Check = %v; want %v containing %q", err, tt.want, tt.msg)
			}
		})
	}
}
