package catalog

import (
	"strings"

	"github.com/cardsign/cardsign/aicatalog"
)

// Settings say what the organisation's catalog is (cardsignd's `catalog:`
// configuration section, defaults applied). The catalog is off when Domain
// is empty.
type Settings struct {
	// Domain is the organisation's root domain: the did:web DID
	// (did:web:Domain) that signs, and the publisher of every urn:air
	// identifier.
	Domain string
	// Namespace is the urn:air namespace of the agents' identifiers
	// (urn:air:Domain:Namespace:AGENT).
	Namespace string
	// DisplayName is the catalog host's displayName; PublisherName each
	// entry's publisher displayName.
	DisplayName, PublisherName string
	// BaseURL is where consumers reach the registry's card URLs (entries'
	// url = BaseURL + "/agents/{id}/agent-card.json").
	BaseURL string
	// Inline puts each card in its entry as data instead of a url.
	Inline bool
}

// Enabled reports whether a catalog is published.
func (s Settings) Enabled() bool { return s.Domain != "" }

// DefaultNamespace is the urn:air namespace of the agents when the
// configuration names none.
const DefaultNamespace = "a2a"

// WithDefaults fills what the configuration left empty as the daemon's
// configuration documents it: Namespace DefaultNamespace, DisplayName the
// domain, PublisherName the DisplayName, BaseURL https://Domain (without
// a trailing slash). The
// publisher applies it too, so an authority configured in code (tests)
// needs only a Domain.
func (s Settings) WithDefaults() Settings {
	if s.Namespace == "" {
		s.Namespace = DefaultNamespace
	}
	if s.DisplayName == "" {
		s.DisplayName = s.Domain
	}
	if s.PublisherName == "" {
		s.PublisherName = s.DisplayName
	}
	if s.BaseURL == "" {
		s.BaseURL = "https://" + s.Domain
	}
	// Entries' urls are BaseURL + "/agents/…": one slash between.
	s.BaseURL = strings.TrimRight(s.BaseURL, "/")
	return s
}

// DID is the did:web DID that signs the catalog and its manifests.
func (s Settings) DID() string { return aicatalog.DID(s.Domain) }
