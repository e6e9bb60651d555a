//go:build !nogcpkms

package gcpkms

import "hash/crc32"

// crc32c is the Castagnoli CRC Cloud KMS uses for its integrity fields, as
// the int64 its messages carry.
func crc32c(b []byte) int64 {
	return int64(crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}
