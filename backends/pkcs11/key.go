//go:build cgo && !nopkcs11

package pkcs11

import (
	"fmt"
	"slices"

	"github.com/cardsign/cardsign/jose"
	p11 "github.com/miekg/pkcs11"
)

// findObjects returns up to limit objects matching tmpl.
func findObjects(c *p11.Ctx, sh p11.SessionHandle, tmpl []*p11.Attribute, limit int) ([]p11.ObjectHandle, error) {
	if err := c.FindObjectsInit(sh, tmpl); err != nil {
		return nil, fmt.Errorf("C_FindObjectsInit: %w", err)
	}
	hs, _, err := c.FindObjects(sh, limit)
	if ferr := c.FindObjectsFinal(sh); err == nil && ferr != nil {
		err = ferr
	}
	if err != nil {
		return nil, fmt.Errorf("C_FindObjects: %w", err)
	}
	return hs, nil
}

// privateTemplate selects private keys by label and/or id.
func privateTemplate(label string, hasLabel bool, id []byte, hasID bool) []*p11.Attribute {
	t := []*p11.Attribute{p11.NewAttribute(p11.CKA_CLASS, p11.CKO_PRIVATE_KEY)}
	if hasID {
		t = append(t, p11.NewAttribute(p11.CKA_ID, id))
	}
	if hasLabel {
		t = append(t, p11.NewAttribute(p11.CKA_LABEL, label))
	}
	return t
}

// ulong decodes a CK_ULONG attribute value.
func ulong(v []byte) uint {
	var n uint
	if u := ulongs(v); len(u) == 1 {
		n = u[0]
	}
	return n
}

// isTrue decodes a CK_BBOOL attribute value.
func isTrue(v []byte) bool { return len(v) == 1 && v[0] != 0 }

// keyTypeName names the key types people are likely to meet, for errors.
func keyTypeName(kt uint) string {
	switch kt {
	case p11.CKK_RSA:
		return "RSA"
	case p11.CKK_DSA:
		return "DSA"
	case p11.CKK_DH:
		return "DH"
	case p11.CKK_EC:
		return "EC"
	case ckkECEdwards:
		return "EC Edwards"
	case 0x41:
		return "EC Montgomery"
	}
	return fmt.Sprintf("0x%X", kt)
}

// readKey learns what signing needs from the private key object h: its
// type, public key and JOSE alg. It returns the template that finds the key
// again after re-initialization: class, key type and CKA_ID (the label only
// when the key has no CKA_ID), so a re-created key of another type or id is
// never picked up silently.
func readKey(c *p11.Ctx, sh p11.SessionHandle, h p11.ObjectHandle, tokenName, keyName string) (keyInfo, []*p11.Attribute, error) {
	unsupported := func(format string, a ...any) error {
		return &UnsupportedKeyError{Token: tokenName, Key: keyName, Reason: fmt.Sprintf(format, a...)}
	}
	attrs, err := c.GetAttributeValue(sh, h, []*p11.Attribute{
		p11.NewAttribute(p11.CKA_KEY_TYPE, nil),
		p11.NewAttribute(p11.CKA_ID, nil),
		p11.NewAttribute(p11.CKA_LABEL, nil),
		p11.NewAttribute(p11.CKA_SIGN, nil),
	})
	if err != nil {
		return keyInfo{}, nil, fmt.Errorf("C_GetAttributeValue: %w", err)
	}
	kt, id, label := ulong(attrs[0].Value), attrs[1].Value, string(attrs[2].Value)
	if !isTrue(attrs[3].Value) {
		return keyInfo{}, nil, unsupported("CKA_SIGN is false")
	}
	refind := []*p11.Attribute{
		p11.NewAttribute(p11.CKA_CLASS, p11.CKO_PRIVATE_KEY),
		p11.NewAttribute(p11.CKA_KEY_TYPE, kt),
	}
	pubTmpl := []*p11.Attribute{
		p11.NewAttribute(p11.CKA_CLASS, p11.CKO_PUBLIC_KEY),
		p11.NewAttribute(p11.CKA_KEY_TYPE, kt),
	}
	if len(id) > 0 {
		refind = append(refind, p11.NewAttribute(p11.CKA_ID, id))
		pubTmpl = append(pubTmpl, p11.NewAttribute(p11.CKA_ID, id))
	} else {
		refind = append(refind, p11.NewAttribute(p11.CKA_LABEL, label))
		pubTmpl = append(pubTmpl, p11.NewAttribute(p11.CKA_LABEL, label))
	}

	// The EC point is an attribute of the public key object only.
	point := func() ([]byte, error) {
		hs, err := findObjects(c, sh, pubTmpl, 1)
		if err != nil {
			return nil, err
		}
		if len(hs) == 0 {
			return nil, &KeyNotFoundError{Token: tokenName, Key: keyName,
				Reason: "no public key object with the same CKA_ID (the public key is read from it)"}
		}
		a, err := c.GetAttributeValue(sh, hs[0], []*p11.Attribute{p11.NewAttribute(p11.CKA_EC_POINT, nil)})
		if err != nil {
			return nil, fmt.Errorf("C_GetAttributeValue(CKA_EC_POINT): %w", err)
		}
		return a[0].Value, nil
	}

	var ki keyInfo
	switch kt {
	case p11.CKK_EC, ckkECEdwards:
		a, err := c.GetAttributeValue(sh, h, []*p11.Attribute{p11.NewAttribute(p11.CKA_EC_PARAMS, nil)})
		if err != nil {
			return keyInfo{}, nil, fmt.Errorf("C_GetAttributeValue(CKA_EC_PARAMS): %w", err)
		}
		if kt == ckkECEdwards {
			if !isEd25519Params(a[0].Value) {
				return keyInfo{}, nil, unsupported("Edwards curve other than Ed25519")
			}
			pt, err := point()
			if err != nil {
				return keyInfo{}, nil, err
			}
			if ki.pub, err = ed25519Public(pt); err != nil {
				return keyInfo{}, nil, unsupported("%v", err)
			}
			ki.kind, ki.alg, ki.mech = kindEd25519, jose.EdDSA, ckmEdDSA
			break
		}
		curve, alg, err := ecCurve(a[0].Value)
		if err != nil {
			return keyInfo{}, nil, unsupported("%v", err)
		}
		pt, err := point()
		if err != nil {
			return keyInfo{}, nil, err
		}
		if ki.pub, err = ecPublic(curve, pt); err != nil {
			return keyInfo{}, nil, unsupported("%v", err)
		}
		ki.kind, ki.alg, ki.mech = kindEC, alg, p11.CKM_ECDSA
	case p11.CKK_RSA:
		// Modulus and public exponent are readable on the private key even
		// when it is sensitive, so no public key object is needed.
		a, err := c.GetAttributeValue(sh, h, []*p11.Attribute{
			p11.NewAttribute(p11.CKA_MODULUS, nil),
			p11.NewAttribute(p11.CKA_PUBLIC_EXPONENT, nil),
		})
		if err != nil {
			return keyInfo{}, nil, fmt.Errorf("C_GetAttributeValue(CKA_MODULUS): %w", err)
		}
		if ki.pub, err = rsaPublic(a[0].Value, a[1].Value); err != nil {
			return keyInfo{}, nil, unsupported("%v", err)
		}
		ki.kind = kindRSA
	default:
		return keyInfo{}, nil, unsupported("key type %s (want EC P-256/P-384/P-521, Ed25519 or RSA)", keyTypeName(kt))
	}

	// Not every token knows CKA_ALLOWED_MECHANISMS; without it, everything
	// the key type supports is allowed.
	var allowed []uint
	if a, err := c.GetAttributeValue(sh, h, []*p11.Attribute{p11.NewAttribute(p11.CKA_ALLOWED_MECHANISMS, nil)}); err == nil {
		allowed = ulongs(a[0].Value)
	}
	if ki.kind == kindRSA {
		ki.alg, ki.mech = rsaAlg(allowed)
		// Limited to PKCS#1 v1.5 (as Create makes RS256 keys) it is RS256;
		// with no limit it can sign PS256 too, so it claims no alg.
		ki.anyRSA = !slices.Contains(allowed, p11.CKM_RSA_PKCS_PSS) && !slices.Contains(allowed, p11.CKM_RSA_PKCS) ||
			slices.Contains(allowed, p11.CKM_RSA_PKCS_PSS) && slices.Contains(allowed, p11.CKM_RSA_PKCS)
	}
	if len(allowed) > 0 && !slices.Contains(allowed, ki.mech) {
		return keyInfo{}, nil, unsupported("CKA_ALLOWED_MECHANISMS does not include mechanism 0x%X, which signing needs", ki.mech)
	}
	return ki, refind, nil
}
