package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"time"

	"github.com/cardsign/cardsign/secretfile"
)

// The CA file (--ca-file, or $CARDSIGN_CA_FILE when the flag is not given)
// is read here once for every use: the gRPC connection to cardsignd trusts
// its certificates alone, the HTTPS fetches (JWKS, revocation document, log
// key, log tiles, web verification) trust them besides the system's roots,
// since a JWKS or a jku may live on a public host.

// maxCAFile caps what is read of a CA file: a bundle of many certificates
// is well under it.
const maxCAFile = 4 << 20

// caFileOf returns the CA file a command was given, and how to name it in
// a message: the flag's value, else $CARDSIGN_CA_FILE's ("" when neither).
func caFileOf(flagValue string) (path, source string) {
	if flagValue != "" {
		return flagValue, "--ca-file"
	}
	return orEnv("", caFileEnv), "$" + caFileEnv
}

// addCAFile adds the certificates of the PEM file path to pool; a file
// that cannot be read (not a regular file, over maxCAFile) or holds no
// certificate is an error naming source and path.
func addCAFile(pool *x509.CertPool, path, source string) error {
	data, err := secretfile.ReadFile(path, maxCAFile)
	if err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	if !pool.AppendCertsFromPEM(data) {
		return fmt.Errorf("%s %s holds no PEM certificate", source, path)
	}
	return nil
}

// httpsRoots is the root pool of the HTTPS fetches: the system's roots and
// the CA file's certificates; nil (the system's roots, as net/http has
// them) without a CA file.
func httpsRoots(caFlag string) (*x509.CertPool, error) {
	path, source := caFileOf(caFlag)
	if path == "" {
		return nil, nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if err := addCAFile(pool, path, source); err != nil {
		return nil, err
	}
	return pool, nil
}

// fetchClient is the HTTP client of a command's fetches over http(s): each
// bounded by timeout, redirects checked by redirect, certificates verified
// against httpsRoots(caFlag).
func fetchClient(caFlag string, timeout time.Duration, redirect func(*http.Request, []*http.Request) error) (*http.Client, error) {
	roots, err := httpsRoots(caFlag)
	if err != nil {
		return nil, err
	}
	c := &http.Client{Timeout: timeout, CheckRedirect: redirect}
	if roots != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		c.Transport = tr
	}
	return c, nil
}
