package v2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// State is where an APIRule's reconciliation stands (status.state).
type State string

// The states of an APIRule, as Kyma names them.
const (
	// StateReady: the APIRule is served as written.
	StateReady State = "Ready"
	// StateProcessing: the APIRule is being applied.
	StateProcessing State = "Processing"
	// StateError: the APIRule is not served; status.description says why.
	StateError State = "Error"
	// StateDeleting: the APIRule is being deleted.
	StateDeleting State = "Deleting"
	// StateWarning: the APIRule is served, but not all of it as written;
	// status.description says what is not.
	StateWarning State = "Warning"
)

// APIRuleSpec is the desired state of an APIRule.
//
// +kubebuilder:validation:XValidation:rule="has(self.service) || self.rules.all(r, has(r.service))",message="a service must be set in spec.service or in every rule"
// +kubebuilder:validation:XValidation:rule="!(has(self.gateway) && has(self.externalGateway))",message="gateway and externalGateway are mutually exclusive"
type APIRuleSpec struct {
	// Hosts is where the Service is exposed: one host, a fully qualified
	// domain name (two labels or more: my-app.example.com), a short host
	// (one label: my-app, which takes the installation's domain), or a
	// wildcard domain (*.example.com).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1
	Hosts []*Host `json:"hosts"`

	// Service is the Service that receives the traffic of every rule that
	// does not name its own.
	// +optional
	Service *Service `json:"service,omitempty"`

	// Gateway names Kyma's Istio Gateway, namespace/name. kfn serves
	// every APIRule on its own gateway and keeps this field as written.
	// +kubebuilder:validation:MaxLength=127
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?/([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)$')",message="Gateway must be in the namespace/name format"
	// +optional
	Gateway *string `json:"gateway,omitempty"`

	// ExternalGateway names Kyma's ExternalGateway, namespace/name;
	// mutually exclusive with Gateway. Kept as written.
	// +kubebuilder:validation:MaxLength=127
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?/([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)$')",message="ExternalGateway must be in the namespace/name format"
	// +optional
	ExternalGateway *string `json:"externalGateway,omitempty"`

	// CorsPolicy sets the CORS headers of the responses; without it the
	// Service's own CORS headers are removed.
	// +optional
	CorsPolicy *CorsPolicy `json:"corsPolicy,omitempty"`

	// Rules are the paths exposed, in order: of the rules whose path and
	// methods match a request, the first serves it.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	Rules []Rule `json:"rules"`

	// Timeout is the time, in seconds, a request may take, for the rules
	// that set none (default 180).
	// +optional
	Timeout *Timeout `json:"timeout,omitempty"`
}

// Host is an exposed host: a lowercase RFC 1123 label, a fully qualified
// domain name, or *. and a fully qualified domain name.
// +kubebuilder:validation:MaxLength=255
// +kubebuilder:validation:XValidation:rule="self.matches('^(?:\\\\*\\\\.(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\\\\.)+[a-z0-9]{2,63}|(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(?:(?:\\\\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*(?:\\\\.[a-z0-9]{2,63}))?)$')",message="Host must be a lowercase RFC 1123 label (must consist of lowercase alphanumeric characters or '-', and must start and end with an lowercase alphanumeric character), a fully qualified domain name, or a wildcard domain name (e.g. *.local.kyma.dev)"
type Host string

// Service is the Service that receives a rule's traffic.
type Service struct {
	// Name is the Service's name.
	// +kubebuilder:validation:MaxLength=63
	Name *string `json:"name"`
	// Namespace is the Service's namespace, the APIRule's when unset. kfn
	// exposes only Services of the APIRule's own namespace unless the
	// chart allows more.
	// +kubebuilder:validation:Pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace *string `json:"namespace,omitempty"`
	// Port is the Service's port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port *uint32 `json:"port"`
	// IsExternal says the Service is outside the cluster (Kyma's
	// external: true). kfn does not expose Services outside the cluster:
	// such a rule is not served (status Warning).
	// +optional
	IsExternal *bool `json:"external,omitempty"`
}

// Rule exposes one path pattern for some methods, with exactly one access
// strategy: noAuth, jwt or extAuth.
// +kubebuilder:validation:XValidation:rule="((has(self.extAuth)?1:0)+(has(self.jwt)?1:0)+((has(self.noAuth)&&self.noAuth==true)?1:0))==1",message="One of the following fields must be set: noAuth, jwt, extAuth"
type Rule struct {
	// Path is the path pattern: an exact path (/abc); {*} for exactly one
	// segment (/foo/{*}/bar); {**}, the last operator, for zero or more
	// segments (/foo/{**}); or /*, every path.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^((\/([A-Za-z0-9-._~!$&'()+,;=:@]|%[0-9a-fA-F]{2})*)|(\/\{\*{1,2}\}))+$|^\/\*$`
	Path string `json:"path"`
	// Service receives this rule's traffic, instead of spec.service.
	// +optional
	Service *Service `json:"service,omitempty"`
	// Methods are the HTTP methods allowed on Path.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=9
	Methods []HttpMethod `json:"methods"`
	// NoAuth, true, lets every request of the rule through.
	// +optional
	NoAuth *bool `json:"noAuth"`
	// Jwt lets through requests that carry a JWT its authentications
	// verify and its authorizations accept.
	// +optional
	Jwt *JwtConfig `json:"jwt,omitempty"`
	// ExtAuth asks the named external authorizers about each request.
	// +optional
	ExtAuth *ExtAuth `json:"extAuth,omitempty"`
	// Timeout is the time, in seconds, a request of the rule may take;
	// it overrides spec.timeout.
	// +optional
	Timeout *Timeout `json:"timeout,omitempty"`
	// Request changes the request before it reaches the Service.
	// +optional
	Request *Request `json:"request,omitempty"`
}

// Request lists the headers and cookies set on a request before it is
// forwarded.
type Request struct {
	// Cookies are set in the request's Cookie header, name=value.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	Cookies map[string]string `json:"cookies,omitempty"`
	// Headers are set on the request, name: value.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	Headers map[string]string `json:"headers,omitempty"`
}

// HttpMethod is an HTTP request method (RFC 9110, and PATCH of RFC 5789).
// +kubebuilder:validation:Enum=GET;HEAD;POST;PUT;DELETE;CONNECT;OPTIONS;TRACE;PATCH
type HttpMethod string

// JwtConfig verifies a request's JWT (authentications) and what it must
// grant (authorizations).
type JwtConfig struct {
	// Authentications are the issuers whose tokens are accepted.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Authentications []*JwtAuthentication `json:"authentications,omitempty"`
	// Authorizations are what a token must grant: one of them, all of
	// its scopes and audiences.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Authorizations []*JwtAuthorization `json:"authorizations,omitempty"`
}

// JwtAuthorization is a set of scopes and audiences a token must all have.
type JwtAuthorization struct {
	// RequiredScopes must all be in the token's scopes.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	RequiredScopes []string `json:"requiredScopes,omitempty"`
	// Audiences: the token's audience must be one of them.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Audiences []string `json:"audiences,omitempty"`
}

// JwtAuthentication is an issuer of accepted tokens and where a request
// carries them.
type JwtAuthentication struct {
	// Issuer is the tokens' iss, a URL.
	// +kubebuilder:validation:MaxLength=2048
	Issuer string `json:"issuer"`
	// JwksUri is the URL of the issuer's public keys (JWKS).
	// +kubebuilder:validation:MaxLength=2048
	JwksUri string `json:"jwksUri"`
	// FromHeaders are the headers a token is read from (default the
	// Authorization header, prefix Bearer).
	// +kubebuilder:validation:MaxItems=8
	// +optional
	FromHeaders []*JwtHeader `json:"fromHeaders,omitempty"`
	// FromParams are the query parameters a token is read from.
	// +kubebuilder:validation:MaxItems=8
	// +optional
	FromParams []string `json:"fromParams,omitempty"`
}

// JwtHeader is a header a token is read from.
type JwtHeader struct {
	// Name is the header's name.
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// Prefix comes before the token in the header (default Bearer).
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Prefix string `json:"prefix,omitempty"`
}

// ExtAuth asks external authorizers, defined in kfn's chart, about each
// request of a rule.
type ExtAuth struct {
	// ExternalAuthorizers are the names of the authorizers.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	ExternalAuthorizers []string `json:"authorizers"`
	// Restrictions also require a JWT, as a rule's jwt does.
	// +optional
	Restrictions *JwtConfig `json:"restrictions,omitempty"`
}

// Timeout is a time in seconds, 1 to 3900.
// +kubebuilder:validation:Minimum=1
// +kubebuilder:validation:Maximum=3900
type Timeout uint16

// StringMatch is a list of matches, each {exact|prefix|regex: value}.
// +kubebuilder:validation:MaxItems=32
type StringMatch []map[string]string

// CorsPolicy is the CORS headers of an APIRule's responses.
type CorsPolicy struct {
	// AllowHeaders is Access-Control-Allow-Headers.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	AllowHeaders []string `json:"allowHeaders,omitempty"`
	// AllowMethods is Access-Control-Allow-Methods.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	AllowMethods []string `json:"allowMethods,omitempty"`
	// AllowOrigins are the origins answered with
	// Access-Control-Allow-Origin.
	// +optional
	AllowOrigins StringMatch `json:"allowOrigins,omitempty"`
	// AllowCredentials is Access-Control-Allow-Credentials.
	// +optional
	AllowCredentials *bool `json:"allowCredentials,omitempty"`
	// ExposeHeaders is Access-Control-Expose-Headers.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	ExposeHeaders []string `json:"exposeHeaders,omitempty"`
	// MaxAge is Access-Control-Max-Age, in seconds.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxAge *uint64 `json:"maxAge,omitempty"`
}

// APIRuleStatus is the observed state of an APIRule.
type APIRuleStatus struct {
	// LastProcessedTime is when the APIRule was last reconciled.
	// +optional
	LastProcessedTime metav1.Time `json:"lastProcessedTime,omitempty"`
	// State is Ready, Warning or Error (Processing, Deleting on the way).
	// +kubebuilder:validation:Enum=Processing;Deleting;Ready;Error;Warning
	State State `json:"state"`
	// Description says why the state is not Ready.
	// +optional
	Description string `json:"description,omitempty"`
}

// APIRule exposes a Service outside the cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:categories={kyma-api-gateway}
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=".status.state"
// +kubebuilder:printcolumn:name="Hosts",type="string",JSONPath=".spec.hosts"
type APIRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	Spec APIRuleSpec `json:"spec"`
	// Status is the observed state.
	// +optional
	Status APIRuleStatus `json:"status,omitempty"`
}

// APIRuleList is a list of APIRules.
//
// +kubebuilder:object:root=true
type APIRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []APIRule `json:"items"`
}

func init() {
	SchemeBuilder.Register(&APIRule{}, &APIRuleList{})
}
