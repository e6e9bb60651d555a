package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/cardsign/cardsign/access"
)

// tokenPrefix marks cardsign bearer tokens, so secret scanners and people
// can tell them apart.
const tokenPrefix = "cst_"

// tokenNameRE is what a token's name in cardsignd's config may be.
var tokenNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func tokenCmd() command {
	c := command{
		name:    "token",
		long:    tokenLong,
		summary: "Make a bearer token for cardsignd and print the config entry that grants it roles, or hash an existing token.",
		usage:   "new --name NAME --roles ROLE[,ROLE...] [--out FILE] | hash [FILE|-]   (roles: signer, admin, auditor, reader, approver)",
		example: "  cardsign token new --name release-pipeline --roles signer --out release.token\n" +
			"  cardsign token new --name ops --roles admin,auditor > ops.token\n" +
			"  cardsign token hash release.token\n" +
			"  cardsign sign --server cardsign.internal:7700 --ca-file ca.pem --token-file release.token agent-card.json",
	}
	c.subcommands = true
	c.subs = []subcommand{
		{"new", "make a random bearer token, write it to --out or standard output, and print the config entry (its SHA-256, never the token) on standard error"},
		{"hash", "print the SHA-256 (hex) of a token made elsewhere, for the sha256 field of auth.tokens"},
	}
	c.flags = func(fs *flag.FlagSet, sub string) runFunc {
		switch sub {
		case "new":
			return c.tokenNew(fs)
		case "hash":
			return c.tokenHash
		}
		return nil
	}
	return c
}

// tokenNew registers the flags of token new; its run generates a token, writes it to --out or stdout, and prints the
// config entry (the token's hash, never the token) to stderr.
func (c command) tokenNew(fs *flag.FlagSet) runFunc {
	name := fs.String("name", "", "name of the token in cardsignd's config and audit records: 1-64 of A-Z a-z 0-9 . _ - (required)")
	rolesFlag := fs.String("roles", "", "comma-separated roles the token grants: signer, admin, auditor, reader, approver (required)")
	out := fs.String("out", "", "file to write the token to, created with mode 0600; it must not exist (default: standard output)")
	return func(_ context.Context, in *call) int {
		e, pos := in.env, in.pos
		if len(pos) > 0 {
			return c.usageError(e, "new: unexpected argument %q", pos[0])
		}
		if !tokenNameRE.MatchString(*name) {
			return c.usageError(e, "--name must be 1-64 of A-Z a-z 0-9 . _ -, got %q", *name)
		}
		roles, err := parseRoles(*rolesFlag)
		if err != nil {
			return c.usageError(e, "--roles: %v", err)
		}
		tok, err := newToken()
		if err != nil {
			fmt.Fprintf(e.stderr, "cardsign %s new: %v\n", c.name, err)
			return exitFail
		}
		if *out != "" {
			if err := writeSecret(*out, tok+"\n"); err != nil {
				fmt.Fprintf(e.stderr, "cardsign %s new: %v\n", c.name, err)
				return exitUsage
			}
		} else if _, err := fmt.Fprintln(e.stdout, tok); err != nil {
			fmt.Fprintf(e.stderr, "cardsign %s new: writing the token to standard output: %v\n", c.name, err)
			return exitFail
		}
		fmt.Fprint(e.stderr, tokenConfig(*name, tokenHash(tok), roles))
		return exitOK
	}
}

// tokenHash prints the SHA-256 of a token read from a file or stdin.
func (c command) tokenHash(_ context.Context, in *call) int {
	e, pos := in.env, in.pos
	if len(pos) > 1 {
		return c.usageError(e, "hash takes at most one file (default: standard input), got %d", len(pos))
	}
	src := "-"
	if len(pos) == 1 {
		src = pos[0]
	}
	data, err := readInput(e, src, maxTokenFile+1)
	if err != nil {
		fmt.Fprintf(e.stderr, "cardsign %s hash: %v\n", c.name, err)
		return exitUsage
	}
	where := "standard input"
	if src != "-" {
		where = src
	}
	if len(data) > maxTokenFile {
		fmt.Fprintf(e.stderr, "cardsign %s hash: %s is larger than %d KiB: not a bearer token\n", c.name, where, maxTokenFile>>10)
		return exitUsage
	}
	// Trimmed the way --token-file is, so the hash matches what is sent.
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		fmt.Fprintf(e.stderr, "cardsign %s hash: %s holds no token\n", c.name, where)
		return exitUsage
	}
	fmt.Fprintln(e.stdout, tokenHash(tok))
	return exitOK
}

// newToken returns "cst_" and 32 random bytes in unpadded base64url.
func newToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// tokenHash is the lowercase hex SHA-256 of the token's bytes, the form
// cardsignd's config holds.
func tokenHash(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// parseRoles splits a comma-separated role list: known roles, at least
// one, none twice.
func parseRoles(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("name at least one role: signer, admin, auditor")
	}
	var roles []string
	for _, r := range strings.Split(s, ",") {
		r = strings.TrimSpace(r)
		if _, err := access.ParseRole(r); err != nil {
			return nil, err
		}
		if slices.Contains(roles, r) {
			return nil, fmt.Errorf("role %q is listed twice", r)
		}
		roles = append(roles, r)
	}
	return roles, nil
}

// tokenConfig is the entry to paste into cardsignd's config.
func tokenConfig(name, sha string, roles []string) string {
	return fmt.Sprintf("auth:\n  tokens:\n    - name: %s\n      sha256: %s\n      roles: [%s]\n",
		yamlName(name), sha, strings.Join(roles, ", "))
}

// yamlName quotes a name YAML would read as something other than a string
// (a number, a boolean, null, or a leading - or .); the others stay plain.
func yamlName(name string) string {
	first := name[0]
	letter := first >= 'A' && first <= 'Z' || first >= 'a' && first <= 'z'
	switch strings.ToLower(name) {
	case "y", "n", "yes", "no", "on", "off", "true", "false", "null":
		letter = false
	}
	if letter {
		return name
	}
	return `"` + name + `"`
}

// writeSecret creates path with mode 0600 and writes data, refusing to
// replace an existing file; it removes what it created if writing fails.
func writeSecret(path, data string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("refusing to overwrite %s: it exists", path)
	}
	if err != nil {
		return err
	}
	_, err = io.WriteString(f, data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
