//go:build cgo && !nopkcs11

package pkcs11

import (
	"context"
	"crypto/rand"
	"encoding/asn1"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/jose"
	p11 "github.com/miekg/pkcs11"
)

// RSABits is the modulus size of generated RSA keys, as for the file
// backend: NIST SP 800-57's size for use beyond 2030.
const RSABits = 3072

// idSize is the length of a generated CKA_ID: 128 random bits never collide.
const idSize = 16

// Create generates a key pair for req.Alg inside the token; the private key
// never exists outside it. req.Name is the object label (CKA_LABEL) on the
// configured token (Config.Token, default module, configured PIN), or a
// pkcs11: URI with token attributes and object= (and optionally module-path
// and a PIN) to create it elsewhere.
//
// The private key is CKA_TOKEN, CKA_PRIVATE, CKA_SENSITIVE, not
// CKA_EXTRACTABLE, CKA_SIGN only, and CKA_ALLOWED_MECHANISMS names the one
// mechanism its alg signs with (which is how a PS256 key says it is PS256);
// these are read back and the pair destroyed if the token did not honour
// them. Both halves get the label and a random 16-byte CKA_ID. The URI
// returned names token, object and id, and module-path when the module is
// not the default.
func (b *Backend) Create(ctx context.Context, req backends.CreateRequest) (string, error) {
	if _, err := jose.ParseAlg(string(req.Alg)); err != nil {
		return "", fmt.Errorf("pkcs11: create: %w", err)
	}
	k, err := b.createTarget(req.Name)
	if err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("pkcs11: create: %w", err)
	}
	t, err := b.token(k)
	if err != nil {
		return "", err
	}
	id := make([]byte, idSize)
	if _, err := rand.Read(id); err != nil {
		return "", fmt.Errorf("pkcs11: create: CKA_ID: %w", err)
	}
	name := keyName(k.object, true, id, true)
	err = t.run(ctx, func(c *p11.Ctx, ses session) error {
		return generate(c, ses, req.Alg, k.object, id, t.log)
	})
	if err != nil {
		return "", fmt.Errorf("pkcs11: create %s key %s on token %s: %w", req.Alg, name, t.name, err)
	}
	module, err := b.cfg.resolveModule(k.module)
	if err != nil || module == b.cfg.DefaultModule {
		module = "" // err is impossible: b.token resolved it already
	}
	t.log.Info("pkcs11: key created", "alg", req.Alg, "key", name)
	return formatURI(t.label, k.object, id, module), nil
}

// createTarget turns CreateRequest.Name into the token and label to create
// the key with.
func (b *Backend) createTarget(name string) (*keyURI, error) {
	if name == "" {
		return nil, errors.New("pkcs11: create: empty key label (CreateRequest.Name)")
	}
	if !strings.HasPrefix(strings.ToLower(name), Scheme+":") {
		if b.cfg.Token == "" {
			return nil, errors.New("pkcs11: create: no token configured for new keys (Config.Token), and the name is not a pkcs11: URI")
		}
		return &keyURI{token: map[string]string{"token": b.cfg.Token}, object: name, hasObject: true}, nil
	}
	k, err := parseURI(name)
	if err != nil {
		return nil, err
	}
	if !k.hasObject || k.object == "" || k.hasID {
		return nil, uriError(name, "to create a key give object= (the label) and no id= (it is generated)")
	}
	return k, nil
}

// generate makes the key pair with a read-write session of its own (pool
// sessions are read-only). It may run twice (token.run retries once after a
// re-initialization), so it first looks for a pair with its CKA_ID that an
// earlier attempt made.
func generate(c *p11.Ctx, ses session, alg jose.Alg, label string, id []byte, log *slog.Logger) error {
	hs, err := findObjects(c, ses.h, privateTemplate(label, true, nil, false), 2)
	if err != nil {
		return err
	}
	for _, h := range hs {
		a, err := c.GetAttributeValue(ses.h, h, []*p11.Attribute{p11.NewAttribute(p11.CKA_ID, nil)})
		if err != nil {
			return fmt.Errorf("C_GetAttributeValue(CKA_ID): %w", err)
		}
		if string(a[0].Value) == string(id) {
			return checkPrivate(c, ses.h, h) // made by the first attempt
		}
	}
	if len(hs) > 0 {
		return fmt.Errorf("%w (label %q)", ErrKeyExists, label)
	}

	mech, pub, priv, err := templates(alg, label, id)
	if err != nil {
		return err
	}
	rw, err := c.OpenSession(ses.slot, p11.CKF_SERIAL_SESSION|p11.CKF_RW_SESSION)
	if err != nil {
		return fmt.Errorf("C_OpenSession(RW): %w", err)
	}
	defer c.CloseSession(rw)
	pubH, privH, err := c.GenerateKeyPair(rw, []*p11.Mechanism{p11.NewMechanism(mech, nil)}, pub, priv)
	if errors.Is(err, p11.Error(p11.CKR_ATTRIBUTE_TYPE_INVALID)) {
		// A token without CKA_ALLOWED_MECHANISMS (PKCS#11 < 2.40). The key
		// is then not pinned to its mechanism, and an RSA key reads as RS256
		// when opened: the key record's alg must say PS256.
		log.Warn("pkcs11: token does not support CKA_ALLOWED_MECHANISMS; creating the key without it", "alg", alg)
		pubH, privH, err = c.GenerateKeyPair(rw, []*p11.Mechanism{p11.NewMechanism(mech, nil)}, pub, priv[:len(priv)-1])
	}
	if err != nil {
		return fmt.Errorf("C_GenerateKeyPair: %w", err)
	}
	if err := checkPrivate(c, rw, privH); err != nil {
		// Do not leave a key the token did not protect as asked.
		_ = c.DestroyObject(rw, privH)
		_ = c.DestroyObject(rw, pubH)
		return err
	}
	return nil
}

// templates returns the generation mechanism and the public and private key
// templates for alg. CKA_ALLOWED_MECHANISMS is the last private attribute,
// so generate can drop it for tokens that do not know it.
func templates(alg jose.Alg, label string, id []byte) (mech uint, pub, priv []*p11.Attribute, err error) {
	// Both halves are token objects with the same CKA_ID and CKA_LABEL; only
	// the private one is private, sensitive and not extractable.
	object := func(class uint, private bool, extra ...*p11.Attribute) []*p11.Attribute {
		attrs := []*p11.Attribute{
			p11.NewAttribute(p11.CKA_CLASS, class),
			p11.NewAttribute(p11.CKA_TOKEN, true),
			p11.NewAttribute(p11.CKA_PRIVATE, private),
		}
		attrs = append(attrs, extra...)
		return append(attrs, p11.NewAttribute(p11.CKA_ID, id), p11.NewAttribute(p11.CKA_LABEL, label))
	}
	// No CKA_VERIFY or CKA_ENCRYPT on the public half: cardsign verifies in
	// software, and tpm2-pkcs11 maps them to the TPM key's decrypt and sign
	// bits, refusing CKA_ENCRYPT false and making CKA_VERIFY true a key that
	// decrypts.
	pub = object(p11.CKO_PUBLIC_KEY, false)
	priv = object(p11.CKO_PRIVATE_KEY, true,
		p11.NewAttribute(p11.CKA_SENSITIVE, true),
		p11.NewAttribute(p11.CKA_EXTRACTABLE, false),
		p11.NewAttribute(p11.CKA_SIGN, true))
	var keyType, signMech uint
	switch alg {
	case jose.ES256, jose.ES384, jose.ES512:
		oid := map[jose.Alg]asn1.ObjectIdentifier{jose.ES256: oidP256, jose.ES384: oidP384, jose.ES512: oidP521}[alg]
		params, _ := asn1.Marshal(oid)
		mech, keyType, signMech = p11.CKM_EC_KEY_PAIR_GEN, p11.CKK_EC, p11.CKM_ECDSA
		pub = append(pub, p11.NewAttribute(p11.CKA_EC_PARAMS, params))
	case jose.EdDSA:
		// The OID form of the Edwards curve parameters; PKCS#11 3.0 also
		// allows PrintableString "edwards25519", and SoftHSM 2.6 takes both.
		params, _ := asn1.Marshal(oidEd25519)
		mech, keyType, signMech = ckmECEdwardsKeyPairGen, ckkECEdwards, ckmEdDSA
		pub = append(pub, p11.NewAttribute(p11.CKA_EC_PARAMS, params))
	case jose.RS256, jose.PS256:
		mech, keyType, signMech = p11.CKM_RSA_PKCS_KEY_PAIR_GEN, p11.CKK_RSA, p11.CKM_RSA_PKCS
		if alg == jose.PS256 {
			signMech = p11.CKM_RSA_PKCS_PSS
		}
		pub = append(pub,
			p11.NewAttribute(p11.CKA_MODULUS_BITS, RSABits),
			p11.NewAttribute(p11.CKA_PUBLIC_EXPONENT, []byte{1, 0, 1}),
		)
		priv = append(priv, p11.NewAttribute(p11.CKA_DECRYPT, false))
	default:
		return 0, nil, nil, fmt.Errorf("alg %s: %w", alg, jose.ErrUnsupportedAlg)
	}
	pub = append(pub, p11.NewAttribute(p11.CKA_KEY_TYPE, keyType))
	priv = append(priv,
		p11.NewAttribute(p11.CKA_KEY_TYPE, keyType),
		p11.NewAttribute(p11.CKA_ALLOWED_MECHANISMS, encodeUlongs(signMech)),
	)
	return mech, pub, priv, nil
}

// checkPrivate reads back what matters about a new private key.
func checkPrivate(c *p11.Ctx, sh p11.SessionHandle, h p11.ObjectHandle) error {
	want := []struct {
		attr uint
		name string
		v    bool
	}{
		{p11.CKA_TOKEN, "CKA_TOKEN", true},
		{p11.CKA_SENSITIVE, "CKA_SENSITIVE", true},
		{p11.CKA_EXTRACTABLE, "CKA_EXTRACTABLE", false},
		{p11.CKA_ALWAYS_SENSITIVE, "CKA_ALWAYS_SENSITIVE", true},
		{p11.CKA_NEVER_EXTRACTABLE, "CKA_NEVER_EXTRACTABLE", true},
		{p11.CKA_SIGN, "CKA_SIGN", true},
	}
	tmpl := make([]*p11.Attribute, len(want))
	for i, w := range want {
		tmpl[i] = p11.NewAttribute(w.attr, nil)
	}
	got, err := c.GetAttributeValue(sh, h, tmpl)
	if err != nil {
		return fmt.Errorf("reading back the new private key: C_GetAttributeValue: %w", err)
	}
	for i, w := range want {
		if isTrue(got[i].Value) != w.v {
			return fmt.Errorf("the token created the private key with %s=%v, want %v; key destroyed", w.name, !w.v, w.v)
		}
	}
	return nil
}
