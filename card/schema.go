package card

// The A2A v1.0 AgentCard schema (proto package lf.a2a.v1, tags v1.0.0 and
// v1.0.1), as far as JSON and §8.4.1 care: each field's JSON name, its type,
// whether it is REQUIRED, and its proto3 presence. The table in
// shared/reference/agentcard-v1.md is the source; schema_test.go checks every
// row against it (through the copy in testdata/reference).

type fieldKind uint8

const (
	kindString     fieldKind = iota // string scalar
	kindBool                        // bool scalar
	kindMessage                     // singular message
	kindStruct                      // google.protobuf.Struct: free-form JSON object
	kindStrings                     // repeated string
	kindMessages                    // repeated message
	kindMessageMap                  // map<string, message>
	kindStringMap                   // map<string, string>
)

type field struct {
	name     string
	kind     fieldKind
	msg      *message // element message for message kinds
	required bool     // REQUIRED in the spec
	optional bool     // proto3 `optional`: explicit presence for a scalar
	oneof    string   // oneof group; members have explicit presence
	url      urlRule
}

// urlRule says how lint checks a string field that holds a URL.
type urlRule uint8

const (
	notURL       urlRule = iota
	httpsURL             // absolute https URL (http for loopback hosts, with a warning)
	interfaceURL         // httpsURL, or host:port for the GRPC binding
)

type message struct {
	name   string
	fields []field
}

func (m *message) field(name string) *field {
	for i := range m.fields {
		if m.fields[i].name == name {
			return &m.fields[i]
		}
	}
	return nil
}

// cardSchema is the AgentCard message. It is built once and never changed.
var cardSchema = buildSchema()

func buildSchema() *message {
	str := func(name string) field { return field{name: name, kind: kindString} }
	req := func(f field) field { f.required = true; return f }
	opt := func(f field) field { f.optional = true; return f }
	https := func(f field) field { f.url = httpsURL; return f }
	msg := func(name string, m *message) field { return field{name: name, kind: kindMessage, msg: m} }
	msgs := func(name string, m *message) field { return field{name: name, kind: kindMessages, msg: m} }
	oneof := func(group string, f field) field { f.oneof = group; return f }
	boolean := func(name string) field { return field{name: name, kind: kindBool} }
	strs := func(name string) field { return field{name: name, kind: kindStrings} }
	scopes := func() field { return field{name: "scopes", kind: kindStringMap} }

	stringList := &message{name: "StringList", fields: []field{strs("list")}}
	securityRequirement := &message{name: "SecurityRequirement", fields: []field{
		{name: "schemes", kind: kindMessageMap, msg: stringList},
	}}

	authorizationCode := &message{name: "AuthorizationCodeOAuthFlow", fields: []field{
		req(https(str("authorizationUrl"))), req(https(str("tokenUrl"))), https(str("refreshUrl")),
		req(scopes()), boolean("pkceRequired"),
	}}
	clientCredentials := &message{name: "ClientCredentialsOAuthFlow", fields: []field{
		req(https(str("tokenUrl"))), https(str("refreshUrl")), req(scopes()),
	}}
	implicit := &message{name: "ImplicitOAuthFlow", fields: []field{
		https(str("authorizationUrl")), https(str("refreshUrl")), scopes(),
	}}
	password := &message{name: "PasswordOAuthFlow", fields: []field{
		https(str("tokenUrl")), https(str("refreshUrl")), scopes(),
	}}
	deviceCode := &message{name: "DeviceCodeOAuthFlow", fields: []field{
		req(https(str("deviceAuthorizationUrl"))), req(https(str("tokenUrl"))), https(str("refreshUrl")), req(scopes()),
	}}
	oauthFlows := &message{name: "OAuthFlows", fields: []field{
		oneof("flow", msg("authorizationCode", authorizationCode)),
		oneof("flow", msg("clientCredentials", clientCredentials)),
		oneof("flow", msg("implicit", implicit)),
		oneof("flow", msg("password", password)),
		oneof("flow", msg("deviceCode", deviceCode)),
	}}

	apiKey := &message{name: "APIKeySecurityScheme", fields: []field{str("description"), req(str("location")), req(str("name"))}}
	httpAuth := &message{name: "HTTPAuthSecurityScheme", fields: []field{str("description"), req(str("scheme")), str("bearerFormat")}}
	oauth2 := &message{name: "OAuth2SecurityScheme", fields: []field{
		str("description"), req(msg("flows", oauthFlows)), https(str("oauth2MetadataUrl")),
	}}
	oidc := &message{name: "OpenIdConnectSecurityScheme", fields: []field{str("description"), req(https(str("openIdConnectUrl")))}}
	mtls := &message{name: "MutualTlsSecurityScheme", fields: []field{str("description")}}
	securityScheme := &message{name: "SecurityScheme", fields: []field{
		oneof("scheme", msg("apiKeySecurityScheme", apiKey)),
		oneof("scheme", msg("httpAuthSecurityScheme", httpAuth)),
		oneof("scheme", msg("oauth2SecurityScheme", oauth2)),
		oneof("scheme", msg("openIdConnectSecurityScheme", oidc)),
		oneof("scheme", msg("mtlsSecurityScheme", mtls)),
	}}

	agentInterface := &message{name: "AgentInterface", fields: []field{
		{name: "url", kind: kindString, required: true, url: interfaceURL},
		req(str("protocolBinding")), str("tenant"), req(str("protocolVersion")),
	}}
	provider := &message{name: "AgentProvider", fields: []field{req(https(str("url"))), req(str("organization"))}}
	extension := &message{name: "AgentExtension", fields: []field{
		str("uri"), str("description"), boolean("required"), {name: "params", kind: kindStruct},
	}}
	capabilities := &message{name: "AgentCapabilities", fields: []field{
		opt(boolean("streaming")), opt(boolean("pushNotifications")), msgs("extensions", extension), opt(boolean("extendedAgentCard")),
	}}
	skill := &message{name: "AgentSkill", fields: []field{
		req(str("id")), req(str("name")), req(str("description")), req(strs("tags")),
		strs("examples"), strs("inputModes"), strs("outputModes"), msgs("securityRequirements", securityRequirement),
	}}
	signature := &message{name: "AgentCardSignature", fields: []field{
		req(str("protected")), req(str("signature")), {name: "header", kind: kindStruct},
	}}

	return &message{name: "AgentCard", fields: []field{
		req(str("name")),
		req(str("description")),
		req(msgs("supportedInterfaces", agentInterface)),
		msg("provider", provider),
		req(str("version")),
		opt(https(str("documentationUrl"))),
		req(msg("capabilities", capabilities)),
		{name: "securitySchemes", kind: kindMessageMap, msg: securityScheme},
		msgs("securityRequirements", securityRequirement),
		req(strs("defaultInputModes")),
		req(strs("defaultOutputModes")),
		req(msgs("skills", skill)),
		msgs("signatures", signature),
		opt(https(str("iconUrl"))),
	}}
}
