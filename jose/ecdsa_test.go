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
