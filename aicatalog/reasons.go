package aicatalog

// Reason codes. They are stable: scripts branch on them and the CLI prints
// them. Where the specification's conformance checker
// (jonathanhefner/ai-catalog, tools/verify_trust_manifest_fixtures.py) has
// a code for the same refusal, the string is the checker's, so that a
// result can be compared with the fixtures' "expect" lists; the rest are
// cardsign's own.
const (
	// CodeContributorMissing: a manifest's contributor is missing or not
	// a string.
	CodeContributorMissing = "contributor-missing"
	// CodeUnsigned: a Trust Manifest has no signature, so it endorses
	// nothing.
	CodeUnsigned = "unsigned"
	// CodeSignatureNotObject: the signature member is not a JSON object.
	CodeSignatureNotObject = "signature-not-object"
	// CodeSignatureMissingPrefix + member ("signer", "profile",
	// "issuedAt", "jws"): a required signature member is missing, empty or
	// not a string.
	CodeSignatureMissingPrefix = "signature-missing-"
	// CodeSignedManifestWithoutSubject: a signed manifest has no subject
	// object, so the signature binds no release.
	CodeSignedManifestWithoutSubject = "signed-manifest-without-subject"
	// CodeUnsupportedProfile: signature.profile is not exactly Profile;
	// there is no inference and no fallback, even when the key would
	// verify.
	CodeUnsupportedProfile = "unsupported-profile"
	// CodeContributorSignerMismatch: a manifest's signature.signer is not
	// exactly its contributor (case-sensitive, no normalisation).
	CodeContributorSignerMismatch = "contributor-signer-mismatch"
	// CodeSignerNotRootDIDWeb: signature.signer is not a root did:web DID
	// (lowercase ASCII domain, no port, path, IP address or trailing dot).
	CodeSignerNotRootDIDWeb = "signer-not-root-did-web"
	// CodeTimestampInvalid: issuedAt or expiresAt is not an RFC 3339
	// instant with an offset.
	CodeTimestampInvalid = "timestamp-invalid"
	// CodeExpiresNotAfterIssued: expiresAt is not later than issuedAt.
	CodeExpiresNotAfterIssued = "expiresAt-not-after-issuedAt"
	// CodeNotYetValid: the instant of verification (plus the clock skew)
	// is before issuedAt.
	CodeNotYetValid = "not-yet-valid"
	// CodeExpired: the instant of verification (minus the clock skew) is
	// at or after expiresAt.
	CodeExpired = "expired"
	// CodeJWSNotDetachedCompact: signature.jws is not
	// BASE64URL(header) ".." BASE64URL(signature).
	CodeJWSNotDetachedCompact = "jws-not-detached-compact"
	// CodeJWSSegmentsInvalid: a JWS segment is not base64url, or the
	// header is not strict JSON (duplicate names included).
	CodeJWSSegmentsInvalid = "jws-segments-invalid"
	// CodeJWSHeaderNotObject: the protected header is JSON but not an
	// object.
	CodeJWSHeaderNotObject = "jws-header-not-object"
	// CodeJWSTypMismatch: the protected typ is not the one of the signed
	// object (TypManifest, TypCatalog): a manifest signature replayed as a
	// catalog signature, or the reverse.
	CodeJWSTypMismatch = "jws-typ-mismatch"
	// CodeJWSAlgNotES256: the protected alg is not ES256.
	CodeJWSAlgNotES256 = "jws-alg-not-es256"
	// CodeJWSB64Present: the protected header has b64 (RFC 7797 is not
	// used).
	CodeJWSB64Present = "jws-b64-present"
	// CodeJWSKeySourceHeader: the protected header names its own key (jku,
	// jwk, x5u or x5c); did-web-v1 takes keys from the DID document only.
	CodeJWSKeySourceHeader = "jws-key-source-header-present"
	// CodeJWSUnsupportedCrit: the protected header has crit; no extension
	// is understood.
	CodeJWSUnsupportedCrit = "jws-unsupported-crit"
	// CodeKIDNotUnderSigner: the protected kid is not signer "#" fragment
	// (checked before anything is resolved).
	CodeKIDNotUnderSigner = "kid-not-under-signer"
	// CodeDIDResolutionFailed: the signer's DID document could not be
	// fetched.
	CodeDIDResolutionFailed = "did-resolution-failed"
	// CodeDIDDocumentInvalid: the DID document is not strict JSON
	// (duplicate names, bad UTF-8), exceeds a size or depth cap, or its
	// members have the wrong types.
	CodeDIDDocumentInvalid = "did-document-invalid"
	// CodeDIDDocumentIDMismatch: the DID document's id is not exactly the
	// signer.
	CodeDIDDocumentIDMismatch = "did-document-id-mismatch"
	// CodeKeyNotAuthorized: not exactly one assertionMethod entry (string
	// reference or embedded method) has id == kid; a key listed under
	// verificationMethod or authentication only is not authorized.
	CodeKeyNotAuthorized = "key-not-authorized-by-assertionMethod"
	// CodeControllerMismatch: the selected method's controller is not the
	// signer.
	CodeControllerMismatch = "verification-method-controller-mismatch"
	// CodeJWKNotP256: the method has no publicKeyJwk object, or it is not
	// kty EC, crv P-256.
	CodeJWKNotP256 = "jwk-not-p256"
	// CodeJWKPrivateMaterial: the publicKeyJwk has a private or symmetric
	// member (d, p, q, dp, dq, qi, oth, k).
	CodeJWKPrivateMaterial = "jwk-contains-private-material"
	// CodeJWKAlgOrUseMismatch: the publicKeyJwk's alg is present and not
	// ES256, or its use is present and not sig.
	CodeJWKAlgOrUseMismatch = "jwk-alg-or-use-mismatch"
	// CodeJWKKeyOpsForbidVerify: the publicKeyJwk's key_ops is present and
	// does not include verify.
	CodeJWKKeyOpsForbidVerify = "jwk-key-ops-forbid-verify"
	// CodeJWKCoordinatesInvalid: x and y are not base64url coordinates of
	// a point on P-256.
	CodeJWKCoordinatesInvalid = "jwk-coordinates-invalid"
	// CodeSignatureInvalid: the ES256 signature does not verify over the
	// payload rebuilt from the document.
	CodeSignatureInvalid = "signature-invalid"

	// CodeSubjectIdentifierMismatch: subject.identifier is not the entry's
	// identifier.
	CodeSubjectIdentifierMismatch = "subject-identifier-mismatch"
	// CodeSubjectTypeMismatch: subject.type is not the entry's type.
	CodeSubjectTypeMismatch = "subject-type-mismatch"
	// CodeVersionCoverageFailed: subject.version and the entry's version
	// are not both absent or both present and equal.
	CodeVersionCoverageFailed = "version-coverage-failed"
	// CodeSubjectWithoutBinding: the subject has neither digest nor url.
	CodeSubjectWithoutBinding = "subject-without-binding"
	// CodeDigestCoverageFailed: subject.digest and the entry's digest are
	// not both absent or both present and equal.
	CodeDigestCoverageFailed = "digest-coverage-failed"
	// CodeDigestFormatInvalid: a digest is not "alg:hex" with lowercase
	// hex of the algorithm's length.
	CodeDigestFormatInvalid = "digest-format-invalid"
	// CodeDigestAlgorithmWeak: a digest's algorithm is not sha256, sha384
	// or sha512 (consumers must reject anything shorter than SHA-256, and
	// an algorithm cardsign does not know cannot be checked).
	CodeDigestAlgorithmWeak = "digest-algorithm-weak"
	// CodeArtifactUnavailable: the artifact at the entry's url could not
	// be fetched (or no Fetcher was given), so its digest cannot be
	// checked.
	CodeArtifactUnavailable = "artifact-unavailable"
	// CodeArtifactDigestMismatch: the artifact bytes (or JCS of inline
	// data) do not hash to the digest.
	CodeArtifactDigestMismatch = "artifact-digest-mismatch"
	// CodeSubjectURLNotHTTPS: subject.url is not an absolute https URL.
	CodeSubjectURLNotHTTPS = "subject-url-not-https"
	// CodeURLCoverageFailed: subject.url is not exactly the entry's url.
	CodeURLCoverageFailed = "url-coverage-failed"

	// CodeIdentifierNotURNAIR: the entry's identifier is not
	// urn:air:{publisher}:{namespace}:{name}, so the Publisher Profile
	// cannot name its publisher.
	CodeIdentifierNotURNAIR = "identifier-not-urn-air"
	// CodePublisherNotRootDomain: the urn:air publisher segment is not a
	// domain a root did:web DID may name.
	CodePublisherNotRootDomain = "publisher-not-root-domain"
	// CodePublisherNotSigner: manifests verified, but none is signed by
	// did:web:{publisher}; another contributor's endorsement is not
	// publisher authorization.
	CodePublisherNotSigner = "publisher-not-signer"
	// CodeNoPublisherManifest: the entry has no Trust Manifest at all.
	CodeNoPublisherManifest = "no-publisher-manifest"

	// CodeCatalogUnsigned: the catalog has no root signature.
	CodeCatalogUnsigned = "catalog-unsigned"
	// CodeHostIdentifierMissing: the catalog has no host.identifier
	// string, which the did:web Catalog Profile requires.
	CodeHostIdentifierMissing = "host-identifier-missing"
	// CodeHostIdentifierSignerMismatch: host.identifier is not exactly the
	// root signature's signer.
	CodeHostIdentifierSignerMismatch = "host-identifier-signer-mismatch"
	// CodeSpecVersionUnsupported: specVersion is missing, not
	// "Major.Minor", or its major version is not 1.
	CodeSpecVersionUnsupported = "spec-version-unsupported"

	// CodeEntryInvalid: an entry is not an object, lacks a non-empty
	// identifier or type string, does not have exactly one of url and
	// data, or has a trustManifests member that is not an array.
	CodeEntryInvalid = "entry-invalid"
	// CodeIdentifierDuplicate: two entries share identifier (and version,
	// when versions are present).
	CodeIdentifierDuplicate = "identifier-duplicate"
	// CodeEntryRevoked: Options.Revoked says the entry (or its artifact)
	// is revoked.
	CodeEntryRevoked = "entry-revoked"
)
