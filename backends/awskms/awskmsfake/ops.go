package awskmsfake

import "slices"

// call is one request as an operation sees it: the body, and the one
// injected fault that changes what an operation answers rather than
// replacing the answer (Server decides on faults; the operations only obey).
type call struct {
	body       []byte
	wrongKeyID bool // answer Sign and GetPublicKey with another key's ARN
}

// api is the KMS JSON 1.1 API over the key store: one method per
// operation the fake answers, and their request plumbing.
type api struct{ *kms }

// handler returns the implementation of a KMS operation, nil if the fake
// has none.
func (m api) handler(op string) func(call) (any, *apiError) {
	switch op {
	case "Sign":
		return m.sign
	case "GetPublicKey":
		return m.getPublicKey
	case "DescribeKey":
		return m.describeKey
	case "CreateKey":
		return m.createKey
	case "CreateAlias":
		return m.createAlias
	case "UpdateAlias":
		return m.updateAlias
	case "DisableKey":
		return m.disableKey
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

// metadata is k's KeyMetadata in account.
func (k *key) metadata(account string) keyMetadata {
	md := keyMetadata{
		AWSAccountId:          account,
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
// existing one if there is, else a made-up one. m.mu must be held.
func (m api) otherARN(k *key) string {
	for id, o := range m.keys {
		if id != k.id {
			return o.arn
		}
	}
	return "arn:aws:kms:" + m.region + ":" + m.account + ":key/" + newUUID()
}

func (m api) sign(c call) (any, *apiError) {
	var in struct {
		KeyId            string
		Message          []byte
		MessageType      string
		SigningAlgorithm string
	}
	if aerr := decode(c.body, &in); aerr != nil {
		return nil, aerr
	}
	m.mu.Lock()
	k, aerr := m.resolve(in.KeyId, true)
	if aerr != nil {
		m.mu.Unlock()
		return nil, aerr
	}
	signer, keyARN, usage, enabled, spec := k.signer, k.arn, k.usage, k.enabled, k.spec
	if c.wrongKeyID {
		keyARN = m.otherARN(k)
	}
	m.mu.Unlock()

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

// withKeyID runs fn on the key that a request of the form {"KeyId": …}
// names, resolved and read under m.mu so that fn sees one consistent state,
// as a single KMS request would.
func (m api) withKeyID(c call, fn func(k *key) (any, *apiError)) (any, *apiError) {
	var in struct{ KeyId string }
	if aerr := decode(c.body, &in); aerr != nil {
		return nil, aerr
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k, aerr := m.resolve(in.KeyId, true)
	if aerr != nil {
		return nil, aerr
	}
	return fn(k)
}

func (m api) getPublicKey(c call) (any, *apiError) {
	return m.withKeyID(c, func(k *key) (any, *apiError) { return m.publicKey(c, k) })
}

// publicKey answers GetPublicKey for k; the caller holds m.mu.
func (m api) publicKey(c call, k *key) (any, *apiError) {
	switch {
	case !k.enabled:
		return nil, errorf("DisabledException", "%s is disabled.", k.arn)
	case k.pubDER == nil:
		return nil, errorf("UnsupportedOperationException", "%s key usage is %s which is not valid for GetPublicKey.", k.arn, k.usage)
	}
	keyARN := k.arn
	if c.wrongKeyID {
		keyARN = m.otherARN(k)
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

func (m api) describeKey(c call) (any, *apiError) {
	return m.withKeyID(c, func(k *key) (any, *apiError) {
		return struct{ KeyMetadata keyMetadata }{k.metadata(m.account)}, nil
	})
}

func (m api) createKey(c call) (any, *apiError) {
	var in struct {
		KeySpec               string
		CustomerMasterKeySpec string
		KeyUsage              string
		Description           string
	}
	if aerr := decode(c.body, &in); aerr != nil {
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
	k, aerr := m.newKey(spec, usage, in.Description)
	if aerr != nil {
		return nil, aerr
	}
	// Described before it is added: once in m.keys, k is m.mu's to guard.
	md := k.metadata(m.account)
	m.add(k)
	return struct{ KeyMetadata keyMetadata }{md}, nil
}

type aliasInput struct {
	AliasName   string
	TargetKeyId string
}

// withAlias runs fn on a CreateAlias or UpdateAlias request whose alias
// name is valid, under m.mu.
func (m api) withAlias(c call, fn func(in aliasInput) (any, *apiError)) (any, *apiError) {
	var in aliasInput
	if aerr := decode(c.body, &in); aerr != nil {
		return nil, aerr
	}
	if aerr := checkAliasName(in.AliasName); aerr != nil {
		return nil, aerr
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return fn(in)
}

func (m api) createAlias(c call) (any, *apiError) { return m.withAlias(c, m.addAlias) }

// addAlias answers CreateAlias; the caller holds m.mu.
func (m api) addAlias(in aliasInput) (any, *apiError) {
	k, aerr := m.resolve(in.TargetKeyId, false)
	if aerr != nil {
		return nil, aerr
	}
	if _, ok := m.aliases[in.AliasName]; ok {
		return nil, errorf("AlreadyExistsException", "An alias with the name %s already exists", m.aliasARN(in.AliasName))
	}
	m.aliases[in.AliasName] = k.id
	return struct{}{}, nil
}

func (m api) updateAlias(c call) (any, *apiError) { return m.withAlias(c, m.moveAlias) }

// moveAlias answers UpdateAlias; the caller holds m.mu.
func (m api) moveAlias(in aliasInput) (any, *apiError) {
	old, ok := m.aliases[in.AliasName]
	if !ok {
		return nil, errorf("NotFoundException", "Alias %s is not found.", m.aliasARN(in.AliasName))
	}
	k, aerr := m.resolve(in.TargetKeyId, false)
	if aerr != nil {
		return nil, aerr
	}
	if o := m.keys[old]; o.usage != k.usage || (o.spec == specSymmetic) != (k.spec == specSymmetic) {
		// KMS only moves an alias between keys of the same type and usage.
		return nil, validation("Alias %s is for a %s %s key; %s is a %s %s key", in.AliasName, o.spec, o.usage, k.arn, k.spec, k.usage)
	}
	m.aliases[in.AliasName] = k.id
	return struct{}{}, nil
}

func (m api) disableKey(c call) (any, *apiError) {
	var in struct{ KeyId string }
	if aerr := decode(c.body, &in); aerr != nil {
		return nil, aerr
	}
	if aerr := m.disable(in.KeyId); aerr != nil {
		return nil, aerr
	}
	return struct{}{}, nil
}
