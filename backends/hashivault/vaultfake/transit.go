package vaultfake

import (
	"fmt"
	"net/http"
)

// The Transit key endpoints. Each answers the key's description, as Vault
// has since 1.13 (older ones answered 204 to writes); trim too.

// readKey answers GET keys/NAME; an unknown key is 404 {"errors":[]}, as
// Vault answers a read that found nothing.
func (s *engine) readKey(_ *call, name string) reply {
	d, ok := s.keys.describe(name)
	if !ok {
		return errorReply(http.StatusNotFound)
	}
	return reply{data: d}
}

// createKey answers POST keys/NAME: type (default aes256-gcm96, as
// Vault's), exportable, allow_plaintext_backup. An existing key is
// answered with a warning and left as it is.
func (s *engine) createKey(c *call, name string) reply {
	typ, _, err := c.f.str("type")
	if err != nil {
		return replyFor(err)
	}
	if typ == "" {
		typ = "aes256-gcm96"
	}
	kt, ok := keyTypeOf(typ)
	if !ok {
		return badRequest("unknown key type %v", typ)
	}
	exportable, _, err := c.f.boolean("exportable")
	if err != nil {
		return replyFor(err)
	}
	backup, _, err := c.f.boolean("allow_plaintext_backup")
	if err != nil {
		return replyFor(err)
	}
	if derived, _, _ := c.f.boolean("derived"); derived {
		return badRequest("vaultfake: derived keys are not supported")
	}
	d, created, err := s.keys.create(name, kt, exportable, backup)
	if err != nil {
		return errorReply(http.StatusInternalServerError, fmt.Sprintf("error generating key: %v", err))
	}
	r := reply{data: d}
	if !created {
		r.warnings = []string{fmt.Sprintf("key %s already existed", name)}
	}
	return r
}

// rotateKey answers POST keys/NAME/rotate.
func (s *engine) rotateKey(_ *call, name string) reply {
	d, _, err := s.keys.rotate(name)
	if err != nil {
		return replyFor(err)
	}
	return reply{data: d}
}

// trimKey answers POST keys/NAME/trim: min_available_version.
func (s *engine) trimKey(c *call, name string) reply {
	min, ok, err := c.f.integer("min_available_version")
	if err != nil {
		return replyFor(err)
	}
	if !s.keys.exists(name) {
		return badRequest("invalid key name")
	}
	if !ok {
		return badRequest("missing min_available_version")
	}
	d, err := s.keys.trim(name, min)
	if err != nil {
		return replyFor(err)
	}
	return reply{data: d}
}

// configKey answers POST keys/NAME/config: min_decryption_version,
// min_encryption_version, deletion_allowed, exportable,
// allow_plaintext_backup.
func (s *engine) configKey(c *call, name string) reply {
	var kc keyConfig
	for field, dst := range map[string]**int{
		"min_decryption_version": &kc.minDecryption,
		"min_encryption_version": &kc.minEncryption,
	} {
		n, ok, err := c.f.integer(field)
		if err != nil {
			return replyFor(err)
		}
		if ok {
			*dst = &n
		}
	}
	for field, dst := range map[string]**bool{
		"deletion_allowed":       &kc.deletionAllowed,
		"exportable":             &kc.exportable,
		"allow_plaintext_backup": &kc.allowPlaintextBackup,
	} {
		b, ok, err := c.f.boolean(field)
		if err != nil {
			return replyFor(err)
		}
		if ok {
			*dst = &b
		}
	}
	d, warning, err := s.keys.configure(name, kc)
	if err != nil {
		return replyFor(err)
	}
	r := reply{data: d}
	if warning != "" {
		r.warnings = []string{warning}
	}
	return r
}
