package aicatalog

// Reason codes. They are stable: scripts branch on them. Where the
// specification's conformance checker names a rule, the code is its name.
const (
	// The Signature object.
	ReasonUnsigned              = "unsigned"
	ReasonSignatureNotObject    = "signature-not-object"
	ReasonSignatureMissing      = "signature-missing-" // + the member: signer, profile, issuedAt, jws
	ReasonWithoutSubject        = "signed-manifest-without-subject"
	ReasonUnsupportedProfile    = "unsupported-profile"
	ReasonContributorMissing    = "contributor-missing"
	ReasonContributorMismatch   = "contributor-signer-mismatch"
	ReasonSignerNotRootDIDWeb   = "signer-not-root-did-web"
	ReasonTimestampInvalid      = "timestamp-invalid"
	ReasonExpiresNotAfter       = "expiresAt-not-after-issuedAt"
	ReasonNotYetValid           = "not-yet-valid"
	ReasonExpired               = "expired"
	ReasonJWSNotDetached        = "jws-not-detached-compact"
	ReasonJWSSegmentsInvalid    = "jws-segments-invalid"
	ReasonJWSHeaderNotObject    = "jws-header-not-object"
	ReasonJWSTypMismatch        = "jws-typ-mismatch"
	ReasonJWSAlgNotES256        = "jws-alg-not-es256"
	ReasonJWSB64Present         = "jws-b64-present"
	ReasonJWSKeySourceHeader    = "jws-key-source-header-present"
	ReasonJWSUnsupportedCrit    = "jws-unsupported-crit"
	ReasonKIDNotUnderSigner     = "kid-not-under-signer"
	ReasonSignatureInvalid      = "signature-invalid"
	ReasonDIDResolutionFailed   = "did-resolution-failed"
	ReasonDIDDocumentInvalid    = "did-document-invalid"
	ReasonDIDDocumentIDMismatch = "did-document-id-mismatch"
	// Key selection in the DID document.
	ReasonKeyNotAuthorized    = "key-not-authorized-by-assertionMethod"
	ReasonControllerMismatch  = "verification-method-controller-mismatch"
	ReasonJWKNotP256          = "jwk-not-p256"
	ReasonJWKPrivate          = "jwk-contains-private-material"
	ReasonJWKAlgOrUseMismatch = "jwk-alg-or-use-mismatch"
	ReasonJWKKeyOpsForbid     = "jwk-key-ops-forbid-verify"
	ReasonJWKCoordinates      = "jwk-coordinates-invalid"
	// Entry Release Coverage.
	ReasonSubjectIdentifier   = "subject-identifier-mismatch"
	ReasonSubjectType         = "subject-type-mismatch"
	ReasonVersionCoverage     = "version-coverage-failed"
	ReasonSubjectNoBinding    = "subject-without-binding"
	ReasonDigestCoverage      = "digest-coverage-failed"
	ReasonDigestFormat        = "digest-format-invalid"
	ReasonDigestWeak          = "digest-algorithm-weak"
	ReasonArtifactUnavailable = "artifact-unavailable"
	ReasonArtifactMismatch    = "artifact-digest-mismatch"
	ReasonSubjectURLNotHTTPS  = "subject-url-not-https"
	ReasonURLCoverage         = "url-coverage-failed"
	// The did:web Publisher Profile (cardsign's names: no fixture covers it).
	ReasonNotURNAir           = "identifier-not-urn-air"
	ReasonPublisherNotDomain  = "publisher-not-root-domain"
	ReasonPublisherNotSigner  = "publisher-not-signer"
	ReasonNoPublisherManifest = "no-publisher-manifest"
	// Entries.
	ReasonEntryInvalid        = "entry-invalid"
	ReasonIdentifierDuplicate = "identifier-duplicate"
	// The catalog root (Catalog Snapshot Coverage, the did:web Catalog Profile).
	ReasonCatalogUnsigned       = "catalog-unsigned"
	ReasonHostIdentifierMissing = "host-identifier-missing"
	ReasonHostSignerMismatch    = "host-identifier-signer-mismatch"
	ReasonSpecVersion           = "spec-version-unsupported"
)
