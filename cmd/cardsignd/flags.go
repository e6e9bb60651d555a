package main

import "flag"

// daemonFlags are the flags of cardsignd itself (no command), once parsed.
type daemonFlags struct {
	configPath, checkConfig, dataDir, grpcAddr, httpAddr, logLevel, prepublish *string
	version                                                                    *bool
}

// defineFlags registers cardsignd's flags on fs. The CLI reference
// (docs/reference/cli.md) is generated from the flags it registers.
func defineFlags(fs *flag.FlagSet) daemonFlags {
	return daemonFlags{
		configPath:  fs.String("config", "", "YAML config `FILE` (every field optional; see docs/reference/config.md)"),
		checkConfig: fs.String("check-config", "", "validate this config `FILE`, report every problem, and exit"),
		dataDir:     fs.String("data-dir", "", "data directory (overrides data_dir; default ./cardsignd-data)"),
		grpcAddr:    fs.String("grpc-addr", "", "gRPC listen address (overrides grpc_addr; default 127.0.0.1:7700)"),
		httpAddr:    fs.String("http-addr", "", "HTTP listen address for the JWKS, revocations and health (overrides http_addr; default 127.0.0.1:7701)"),
		logLevel:    fs.String("log-level", "", "debug, info, warn or error (overrides log_level)"),
		prepublish:  fs.String("prepublish", "", "how long a rotated key is published before it signs, a duration `D` such as 1h or 0s (overrides keys.prepublish)"),
		version:     fs.Bool("version", false, "print the version (module version, VCS revision and time, Go version, platform) and the key backends built in, and exit"),
	}
}
