package jose

import (
	"bytes"
	"encoding/asn1"
	"math/big"
	"testing"
)

func asn1Marshal(r, s *big.Int) ([]byte, error) { return asn1.Marshal(ecdsaDER{r, s}) }

func TestECDSAToRaw(t *testing.T) {
	mustDER := func(r, s int64) []byte {
		b, err := asn1Marshal(big.NewInt(r), big.NewInt(s))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	raw := func(r, s byte, size int) []byte {
		out := make([]byte, 2*size)
		out[size-1], out[2*size-1] = r, s
		return out
	}
	wide := new(big.Int).Lsh(big.NewInt(1), 256) // 33 bytes
	wideDER, _ := asn1Marshal(wide, big.NewInt(1))
	tests := []struct {
		name    string
		in      []byte
		size    int
		want    []byte
		wantErr bool
	}{
		{"DER small values padded", mustDER(1, 2), 32, raw(1, 2, 32), false},
		{"DER P-521 width", mustDER(5, 7), 66, raw(5, 7, 66), false},
		{"raw passthrough", raw(9, 9, 32), 32, raw(9, 9, 32), false},
		{"DER with trailing byte", append(mustDER(1, 2), 0), 32, nil, true},
		{"negative r", mustDER(-1, 2), 32, nil, true},
		{"zero s", mustDER(1, 0), 32, nil, true},
		{"r too wide", wideDER, 32, nil, true},
		{"garbage", []byte{0xde, 0xad}, 32, nil, true},
		{"raw wrong width", make([]byte, 63), 32, nil, true},
	}
	for _, tt := range tests {
		got, err := ecdsaToRaw(tt.in, tt.size)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: err = %v, wantErr %v", tt.name, err, tt.wantErr)
			continue
		}
		if !bytes.Equal(got, tt.want) {
			t.Errorf("%s: got %x, want %x", tt.name, got, tt.want)
		}
	}
}

// TestRawToDER checks the hand-written DER against encoding/asn1's for the
// widths and edge values a raw signature can hold, and that derToRaw reads
// it back.
func TestRawToDER(t *testing.T) {
	half := func(size int, lead ...byte) []byte {
		b := make([]byte, size)
		copy(b, lead)
		b[size-1] |= 1
		return b
	}
	tests := []struct {
		name string
		r, s []byte
	}{
		{"P-256 top bit set", half(32, 0x80), half(32, 0xff)},
		{"P-256 top bit clear", half(32, 0x7f), half(32, 0x01)},
		{"P-256 leading zeros", half(32, 0, 0, 0x80), half(32, 0, 0x12)},
		{"P-256 small", half(32), half(32)},
		{"P-384", half(48, 0x80), half(48, 0x40)},
		{"P-521 long length", half(66, 0x01, 0xff), half(66, 0x01, 0x80)},
		{"zero r", make([]byte, 32), half(32, 0x80)},
	}
	for _, tt := range tests {
		raw := append(append([]byte(nil), tt.r...), tt.s...)
		want, err := asn1Marshal(new(big.Int).SetBytes(tt.r), new(big.Int).SetBytes(tt.s))
		if err != nil {
			t.Fatal(err)
		}
		got := rawToDER(nil, raw)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: rawToDER = %x, want %x", tt.name, got, want)
		}
		back, ok := derToRaw(got, len(tt.r))
		zero := new(big.Int).SetBytes(tt.r).Sign() == 0
		if ok == zero || (ok && !bytes.Equal(back, raw)) {
			t.Errorf("%s: derToRaw = %x, %v; want %x, %v", tt.name, back, ok, raw, !zero)
		}
	}
}
