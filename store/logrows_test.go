package store

import (
	"errors"
	"testing"
)

func TestLogFound(t *testing.T) {
	found := map[int64][]byte{3: make([]byte, 32), 4: make([]byte, 32), 5: []byte("short")}
	if _, err := LogHashesFound([]int64{4, 3}, found); err != nil {
		t.Fatal(err)
	}
	if _, err := LogHashesFound([]int64{3, 9}, found); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a missing hash: %v, want ErrNotFound", err)
	}
	if _, err := LogHashesFound([]int64{5}, found); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("a hash of 5 bytes: %v", err)
	}
	if got, err := LogEntriesFound(3, 5, found); err != nil || len(got) != 2 {
		t.Fatalf("LogEntriesFound(3, 5) = %d entries, %v", len(got), err)
	}
	if got, err := LogEntriesFound(4, 4, found); err != nil || len(got) != 0 {
		t.Fatalf("LogEntriesFound(4, 4) = %d entries, %v", len(got), err)
	}
	if _, err := LogEntriesFound(2, 5, found); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a missing leaf: %v, want ErrNotFound", err)
	}
	for _, r := range [][2]int64{{-1, 2}, {5, 4}} {
		if err := CheckLogRange(r[0], r[1]); err == nil {
			t.Errorf("CheckLogRange(%d, %d) accepted", r[0], r[1])
		}
	}
}
