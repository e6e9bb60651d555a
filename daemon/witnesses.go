package daemon

import (
	"fmt"
	"strings"

	"github.com/cardsign/cardsign/internal/daemonconfig"
	"github.com/cardsign/cardsign/server"
	"github.com/cardsign/cardsign/transparency"
	"github.com/cardsign/cardsign/transparency/witness"
)

// maxCAFileBytes bounds a ca_file (a witness's, an event sink's).
const maxCAFileBytes = 1 << 20

// witnessSettings turns log.witnesses (validated) into the authority's
// witness endpoints, quorum policy and wait.
func witnessSettings(l daemonconfig.LogConfig) ([]witness.Endpoint, transparency.WitnessPolicy, server.WitnessWait, error) {
	wait := server.WitnessWait{Mode: l.WitnessWait.Mode, Timeout: l.WitnessWait.Timeout}
	if len(l.Witnesses) == 0 {
		return nil, transparency.WitnessPolicy{}, wait, nil
	}
	p, err := l.WitnessPolicyOf()
	if err != nil {
		return nil, transparency.WitnessPolicy{}, wait, fmt.Errorf("log.witnesses: %w", err)
	}
	eps := make([]witness.Endpoint, len(l.Witnesses))
	for i, w := range l.Witnesses {
		tc, err := caConfig(w.CAFile)
		if err != nil {
			return nil, p, wait, fmt.Errorf("log.witnesses[%d].%w", i, err)
		}
		eps[i] = witness.Endpoint{Witness: p.Witnesses[i], URL: strings.TrimSuffix(w.URL, "/"), Client: witness.NewClient(l.WitnessTimeout, tc)}
	}
	return eps, p, wait, nil
}
