//go:build cgo && !nopkcs11

package pkcs11

import (
	"fmt"
	"strconv"
	"strings"

	p11 "github.com/miekg/pkcs11"
)

// foundToken is a token that matched a URI.
type foundToken struct {
	slot uint
	info p11.TokenInfo
}

// findToken returns the one initialized token of the module that matches
// want (RFC 7512 token attributes, see tokenAttrs). No match is a
// *TokenNotFoundError; several matches are an error too, because picking one
// would sign with a key the URI's author may not have meant. The caller holds
// the module's rw lock shared.
func findToken(ctx *p11.Ctx, module string, want map[string]string, describe string) (foundToken, error) {
	slots, err := ctx.GetSlotList(true)
	if err != nil {
		return foundToken{}, fmt.Errorf("C_GetSlotList: %w", err)
	}
	var lib *p11.Info
	var matches []foundToken
	var present []string
	for _, slot := range slots {
		info, err := ctx.GetTokenInfo(slot)
		if err != nil || info.Flags&p11.CKF_TOKEN_INITIALIZED == 0 {
			// A token that does not answer is not the one we can use; an
			// uninitialized one (SoftHSM's spare slot) has nothing to sign with.
			continue
		}
		present = append(present, fmt.Sprintf("%q (serial %s, slot-id %d)", info.Label, info.SerialNumber, slot))
		ok, err := matchToken(ctx, want, slot, info, &lib)
		if err != nil {
			return foundToken{}, err
		}
		if ok {
			matches = append(matches, foundToken{slot: slot, info: info})
		}
	}
	switch len(matches) {
	case 0:
		return foundToken{}, &TokenNotFoundError{Module: module, Want: describe, Present: present}
	case 1:
		return matches[0], nil
	}
	return foundToken{}, fmt.Errorf("%d tokens match %s in module %s; add serial= or slot-id= to the URI", len(matches), describe, module)
}

// matchToken reports whether the token in slot has every attribute of want.
// Slot and library information is only fetched when want asks for it.
func matchToken(ctx *p11.Ctx, want map[string]string, slot uint, info p11.TokenInfo, lib **p11.Info) (bool, error) {
	var slotInfo *p11.SlotInfo
	for name, v := range want {
		var have string
		switch name {
		case "token":
			have = info.Label
		case "serial":
			have = info.SerialNumber
		case "manufacturer":
			have = info.ManufacturerID
		case "model":
			have = info.Model
		case "slot-id":
			have = strconv.FormatUint(uint64(slot), 10)
		case "slot-description", "slot-manufacturer":
			if slotInfo == nil {
				si, err := ctx.GetSlotInfo(slot)
				if err != nil {
					return false, fmt.Errorf("C_GetSlotInfo(%d): %w", slot, err)
				}
				slotInfo = &si
			}
			have = slotInfo.SlotDescription
			if name == "slot-manufacturer" {
				have = slotInfo.ManufacturerID
			}
		case "library-manufacturer", "library-description", "library-version":
			if *lib == nil {
				li, err := ctx.GetInfo()
				if err != nil {
					return false, fmt.Errorf("C_GetInfo: %w", err)
				}
				*lib = &li
			}
			switch name {
			case "library-manufacturer":
				have = (*lib).ManufacturerID
			case "library-description":
				have = (*lib).LibraryDescription
			default:
				v = normalizeVersion(v)
				have = fmt.Sprintf("%d.%d", (*lib).LibraryVersion.Major, (*lib).LibraryVersion.Minor)
			}
		}
		if have != v {
			return false, nil
		}
	}
	return true, nil
}

// normalizeVersion turns an RFC 7512 library-version ("2", "2.06") into the
// "major.minor" form matchToken compares with, reading a missing minor
// version as 0.
func normalizeVersion(v string) string {
	major, minor, ok := strings.Cut(v, ".")
	if !ok {
		minor = "0"
	}
	a, _ := strconv.Atoi(major)
	b, _ := strconv.Atoi(minor)
	return fmt.Sprintf("%d.%d", a, b)
}
