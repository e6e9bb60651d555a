package awskmsfake

import "slices"

// handler returns the implementation of a KMS operation, nil if the fake
// has none.
func (s *Server) handler(op string) func(body []byte) (any, *apiError) {
	switch op {
	case "Sign":
		return s.sign
	case "GetPublicKey":
		return s.getPublicKey
	case "DescribeKey":
		return s.describeKey
	case "CreateKey":
		return s.createKey
	case "CreateAlias":
		return s.createAlias
	case "UpdateAlias":
		return s.updateAlias
	case "DisableKey":
		return s.disableKey
	}
	return nil
}

// keyMetadata is KMS's KeyMetadata shape (the members the fake has).
type keyMetadata struct {
	AWSAccountId          string
	Arn                   string
	KeyId                 string
	CreationDate          float64 // epoch seconds, as JSON 1.1 timestamps are
	Description           string
	Enabled               bool
	KeyState              string
	KeyUsage              string
	KeySpec               string
	CustomerMasterKeySpec string
	KeyManager            string
	Origin                string
	MultiRegion           bool
	SigningAlgorithms     []string `json:",omitempty"`
	EncryptionAlgorithms  []string `json:",omitempty"`
}

func (s *Server) metadata(k *key) keyMetadata {
	md := keyMetadata{
		AWSAccountId:          s.account,
		Arn:                   k.arn,
		KeyId:                 k.id,
		CreationDate:          float64(k.created.UnixMilli()) / 1000,
		Description:           k.description,
		Enabled:               k.enabled,
		KeyState:              k.state(),
		KeyUsage:              k.usage,
		KeySpec:               k.spec,
		CustomerMasterKeySpec: k.spec,
		KeyManager:            "CUSTOMER",
		Origin:                "AWS_KMS",
	}
	if k.usage == usageSign {
		md.SigningAlgorithms = signingAlgorithms(k.spec)
	} else {
		md.EncryptionAlgorithms = []string{"SYMMETRIC_DEFAULT"}
	}
	return md
}

// otherARN returns the ARN of a key other than k, for SetWrongKeyID: an
// existing one if there is, else a made-up one. s.mu must be held.
func (s *Server) otherARN(k *key) string {
	for id, o := range s.keys {
		if id != k.id {
			return o.arn
		}
	}
	return "arn:aws:kms:" + s.region + ":" + s.account + ":key/" + newUUID()
}

func (s *Server) sign(body []byte) (any, *apiError) {
	var in struct {
		KeyId            string
		Message          []byte
		MessageType      string
		SigningAlgorithm string
	}
	if aerr := decode(body, &in); aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	k, aerr := s.resolve(in.KeyId, true)
	if aerr != nil {
		s.mu.Unlock()
		return nil, aerr
	}
	signer, keyARN, usage, enabled, spec := k.signer, k.arn, k.usage, k.enabled, k.spec
	if s.wrongKeyID {
		keyARN = s.otherARN(k)
	}
	s.mu.Unlock()

	switch {
	case !enabled:
		return nil, errorf("DisabledException", "%s is disabled.", k.arn)
	case usage != usageSign:
		return nil, errorf("InvalidKeyUsageException", "%s key usage is %s which is not valid for Sign.", k.arn, usage)
	case !slices.Contains(signingAlgorithms(spec), in.SigningAlgorithm):
		return nil, errorf("InvalidKeyUsageException", "Signing algorithm %q is not compatible with KeySpec %s.", in.SigningAlgorithm, spec)
	}
	sig, aerr := signMessage(signer, in.SigningAlgorithm, in.MessageType, in.Message)
	if aerr != nil {
		return nil, aerr
	}
	return struct {
		KeyId            string
		Signature        []byte
		SigningAlgorithm string
	}{keyARN, sig, in.SigningAlgorithm}, nil
}

func (s *Server) getPublicKey(body []byte) (any, *apiError) {
	var in struct{ KeyId string }
	if aerr := decode(body, &in); aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k, aerr := s.resolve(in.KeyId, true)
	if aerr != nil {
		return nil, aerr
	}
	switch {
	case !k.enabled:
		return nil, errorf("DisabledException", "%s is disabled.", k.arn)
	case k.pubDER == nil:
		return nil, errorf("UnsupportedOperationException", "%s key usage is %s which is not valid for GetPublicKey.", k.arn, k.usage)
	}
	keyARN := k.arn
	if s.wrongKeyID {
		keyARN = s.otherARN(k)
	}
	return struct {
		KeyId                 string
		KeySpec               string
		CustomerMasterKeySpec string
		KeyUsage              string
		PublicKey             []byte
		SigningAlgorithms     []string
	}{keyARN, k.spec, k.spec, k.usage, k.pubDER, signingAlgorithms(k.spec)}, nil
}

func (s *Server) describeKey(body []byte) (any, *apiError) {
	var in struct{ KeyId string }
	if aerr := decode(body, &in); aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k, aerr := s.resolve(in.KeyId, true)
	if aerr != nil {
		return nil, aerr
	}
	return struct{ KeyMetadata keyMetadata }{s.metadata(k)}, nil
}

func (s *Server) createKey(body []byte) (any, *apiError) {
	var in struct {
		KeySpec               string
		CustomerMasterKeySpec string
		KeyUsage              string
		Description           string
	}
	if aerr := decode(body, &in); aerr != nil {
		return nil, aerr
	}
	spec := in.KeySpec
	if spec == "" {
		spec = in.CustomerMasterKeySpec
	}
	usage := in.KeyUsage
	if usage == "" {
		usage = usageEncrypt // KMS's default, unlike the CreateKey helper's
	}
	k, aerr := s.newKey(spec, usage, in.Description)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[k.id] = k
	return struct{ KeyMetadata keyMetadata }{s.metadata(k)}, nil
}

type aliasInput struct {
	AliasName   string
	TargetKeyId string
}

func (s *Server) createAlias(body []byte) (any, *apiError) {
	var in aliasInput
	if aerr := decode(body, &in); aerr != nil {
		return nil, aerr
	}
	if aerr := checkAliasName(in.AliasName); aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k, aerr := s.resolve(in.TargetKeyId, false)
	if aerr != nil {
		return nil, aerr
	}
	if _, ok := s.aliases[in.AliasName]; ok {
		return nil, errorf("AlreadyExistsException", "An alias with the name %s already exists", s.aliasARN(in.AliasName))
	}
	s.aliases[in.AliasName] = k.id
	return struct{}{}, nil
}

func (s *Server) updateAlias(body []byte) (any, *apiError) {
	var in aliasInput
	if aerr := decode(body, &in); aerr != nil {
		return nil, aerr
	}
	if aerr := checkAliasName(in.AliasName); aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.aliases[in.AliasName]
	if !ok {
		return nil, errorf("NotFoundException", "Alias %s is not found.", s.aliasARN(in.AliasName))
	}
	k, aerr := s.resolve(in.TargetKeyId, false)
	if aerr != nil {
		return nil, aerr
	}
	if o := s.keys[old]; o.usage != k.usage || (o.spec == specSymmetic) != (k.spec == specSymmetic) {
		// KMS only moves an alias between keys of the same type and usage.
		return nil, validation("Alias %s is for a %s %s key; %s is a %s %s key", in.AliasName, o.spec, o.usage, k.arn, k.spec, k.usage)
	}
	s.aliases[in.AliasName] = k.id
	return struct{}{}, nil
}

func (s *Server) disableKey(body []byte) (any, *apiError) {
	var in struct{ KeyId string }
	if aerr := decode(body, &in); aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// DisableKey takes a key ID or key ARN, not an alias.
	k, aerr := s.resolve(in.KeyId, false)
	if aerr != nil {
		return nil, aerr
	}
	k.enabled = false
	s.disabled[k.id] = true
	return struct{}{}, nil
}
