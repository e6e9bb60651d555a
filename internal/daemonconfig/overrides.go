package daemonconfig

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/cardsign/cardsign/backends"
)

// Overrides are settings given on the command line; they win over the
// file. An empty field (nil Prepublish) keeps the file's value.
type Overrides struct {
	DataDir, GRPCAddr, HTTPAddr, LogLevel string
	Prepublish                            *time.Duration
}

// Apply sets the overridden fields. Call Validate afterwards: a flag can
// make a valid file invalid (a public address without TLS).
func (c *Config) Apply(o Overrides) {
	for _, f := range []struct {
		value string
		dst   *string
	}{{o.DataDir, &c.DataDir}, {o.GRPCAddr, &c.GRPCAddr}, {o.HTTPAddr, &c.HTTPAddr}, {o.LogLevel, &c.LogLevel}} {
		if f.value != "" {
			*f.dst = f.value
		}
	}
	if o.Prepublish != nil {
		c.Keys.Prepublish = *o.Prepublish
	}
}

// Check is --check-config: it loads and validates the file at path and
// checks the state directories' modes as the daemon would at start. With
// store.url, it then connects to the database (within a few seconds) and
// reports what it found, without applying migrations. Warnings are written
// to w; every problem is in the returned error. Then, with no problem so
// far, each of more runs on the validated config: the start-up checks that
// need what only cardsignd's main knows (its build, its store's contents),
// which the daemon runs at start too.
func Check(path string, w io.Writer, more ...func(Config) error) error {
	cfg, err := Load(path)
	if err == nil {
		err = cfg.Validate()
	}
	if err == nil {
		err = cfg.ReportStateDirs(w)
	}
	if err == nil {
		cfg.reportStoreWarnings(w)
		if cfg.Store.Postgres() {
			if e := cfg.checkStoreConnection(context.Background(), w); e != nil {
				err = e
			}
		}
	}
	for _, check := range more {
		if err != nil {
			break
		}
		err = check(cfg)
	}
	return err
}

// CheckBuild refuses a config that needs a key backend this build of
// cardsignd lacks: notBuilt maps each such scheme (pkcs11, gcpkms, awskms, azurekv,
// hashivault)
// to how to get it. The daemon would otherwise fail only when it builds the
// backend, and --check-config, which builds none, would say ok.
func (c *Config) CheckBuild(notBuilt map[string]string) error {
	var probs []Problem
	need := func(path, scheme string) {
		if how, missing := notBuilt[scheme]; missing {
			probs = append(probs, Problem{Path: path, Message: fmt.Sprintf(
				"needs the %s backend, and this cardsignd was built without it: %s, or remove what needs it", scheme, how)})
		}
	}
	for _, s := range []struct {
		scheme string
		on     bool
	}{{"pkcs11", c.PKCS11.Enabled()}, {"gcpkms", c.GCPKMS.Enabled()}, {"awskms", c.AWSKMS.Enabled()},
		{"azurekv", c.AzureKV.Enabled()}, {"hashivault", c.HashiVault.Enabled()}} {
		if s.on {
			need(s.scheme, s.scheme)
		}
	}
	if _, named := notBuilt[c.Keys.Backend]; named {
		need("keys.backend", c.Keys.Backend)
	}
	for i, uri := range c.Log.Keys {
		if scheme, err := backends.Scheme(uri); err == nil {
			need(fmt.Sprintf("log.keys[%d]", i), scheme)
		}
	}
	if len(probs) > 0 {
		return &Error{File: c.file, Problems: probs, positions: c.positions}
	}
	return nil
}
