package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/cardsign/cardsign/backends"
	"github.com/cardsign/cardsign/backends/file"
	"github.com/cardsign/cardsign/jose"
	"github.com/cardsign/cardsign/jwks"
	"github.com/cardsign/cardsign/signer"
)

func keygenCmd() command {
	c := command{
		name:    "keygen",
		long:    keygenLong,
		summary: "Create a signing key file (mode 0600) and print its public JWK.",
		usage:   "--alg ES256|ES384|ES512|RS256|PS256|EdDSA --out FILE",
		example: "  cardsign keygen --alg EdDSA --out signing-key.pem",
	}
	c.flags = func(fs *flag.FlagSet, _ string) runFunc {
		algName := fs.String("alg", "ES256", "JOSE algorithm of the new key")
		out := fs.String("out", "", "file to write; it must not exist (required)")
		return func(ctx context.Context, in *call) int {
			e := in.env
			if code, ok := in.noArgs(); !ok {
				return code
			}
			if *out == "" {
				return c.usageError(e, "--out is required")
			}
			alg, err := jose.ParseAlg(*algName)
			if err != nil {
				return c.usageError(e, "%v", err)
			}
			key, uri, pub, err := createKeyFile(ctx, alg, *out)
			if err != nil {
				fmt.Fprintf(e.stderr, "cardsign %s: %v\n", c.name, err)
				return exitFail
			}
			fmt.Fprintf(e.stderr, "cardsign %s: wrote %s (mode 0600), kid %s, alg %s; sign with --key %s\n", c.name, *out, key.KID, key.Alg, uri)
			fmt.Fprintf(e.stdout, "%s\n", pub)
			return exitOK
		}
	}
	return c
}

// createKeyFile writes a new key of alg to the file name with the file
// backend (keygen writes a key file, not a key in a registry), and returns
// the opened key, its URI and its public JWK as JSON.
func createKeyFile(ctx context.Context, alg jose.Alg, name string) (signer.Key, string, []byte, error) {
	b, err := file.New(file.Config{})
	if err != nil {
		return signer.Key{}, "", nil, err
	}
	uri, err := b.Create(ctx, backends.CreateRequest{Alg: alg, Name: name})
	if err != nil {
		return signer.Key{}, "", nil, err
	}
	key, err := backends.OpenWith(ctx, b, uri, backends.OpenOptions{})
	if err != nil {
		return signer.Key{}, "", nil, err
	}
	jwk, err := key.JWK()
	if err != nil {
		return signer.Key{}, "", nil, err
	}
	pub, err := jwk.MarshalJSON()
	if err != nil {
		return signer.Key{}, "", nil, err
	}
	return key, uri, pub, nil
}

func jwksCmd() command {
	c := command{
		name:    "jwks",
		long:    jwksLong,
		summary: "Print the public JWKS of one or more keys (public members only), for verifiers.",
		usage:   "--key URI [--key URI...] [--kid KID] [--alg ALG]",
		example: "  cardsign jwks --key file:signing-key.pem --key file:next-key.pem > jwks.json",
	}
	c.flags = func(fs *flag.FlagSet, _ string) runFunc {
		var kf keyFlags
		kf.register(fs, "(required)")
		return func(ctx context.Context, in *call) int {
			e := in.env
			if code, ok := in.noArgs(); !ok {
				return code
			}
			keys, err := kf.open(ctx)
			if err != nil {
				fmt.Fprintf(e.stderr, "cardsign %s: %v\n", c.name, err)
				return exitUsage
			}
			var set jwks.Set
			for _, k := range keys {
				jwk, err := k.JWK()
				if err != nil {
					fmt.Fprintf(e.stderr, "cardsign %s: %v\n", c.name, err)
					return exitFail
				}
				set.Keys = append(set.Keys, jwk)
			}
			out, err := set.MarshalJSON()
			if err != nil {
				fmt.Fprintf(e.stderr, "cardsign %s: %v\n", c.name, err)
				return exitFail
			}
			fmt.Fprintf(e.stdout, "%s\n", out)
			return exitOK
		}
	}
	return c
}
